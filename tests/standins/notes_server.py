"""Our notes MCP server (toolservers.demo_server) over streamable HTTP, for the tests that need a
server reached by URL rather than started over stdio."""
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.stack import free_port, port_open, wait_until


@contextmanager
def notes_over_http(notes_dir: Path) -> Iterator[str]:
    """Start the server on a free port; yield its endpoint URL; stop it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "toolservers.demo_server", "--http", str(port)],
        env={"NOTES_DIR": str(notes_dir), "PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: port_open(port), timeout=20, message="the notes server to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
