"""The screenshot script (bench/screens.py, `make screens`) still imports and still names every picture
the README and issue 23 ask for. A cheap check: the script itself starts a stack and a browser for
about a minute, which `make screens` does, not the suite."""
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from bench import screens

ROOT = Path(__file__).resolve().parents[2]


def test_the_tour_takes_every_required_picture_and_the_phone_views():
    names = [scene.name for scene in screens.SCENES]
    assert len(names) == len(set(names))
    assert screens.REQUIRED <= set(names)
    assert {"chat-pending", "chat-decided", "chat-edited", "chat-critical", "chat-question", "chat-plan", "inbox", "history"} <= screens.REQUIRED
    for scene in screens.SCENES:
        assert screens.WIDE in scene.widths, scene.name
        assert (screens.PHONE in scene.widths) == (scene.name in screens.PHONE_VIEWS), scene.name
    assert set(screens.RUNS) == set(names)  # every scene has something that takes it
    for n, scene in enumerate(screens.SCENES):  # a scene builds only on scenes taken before it
        assert set(scene.needs) <= set(names[:n]), scene.name
    assert screens.README_SCENE.rsplit("-", 1)[0] in names


def test_one_scene_is_taken_with_every_scene_it_builds_on():
    assert screens.with_needs({"chat-question"}) == {"chat-question"}
    assert screens.with_needs({"history"}) >= {"chat-pending", "chat-decided", "chat-critical", "chat-edited", "inbox", "history"}
    assert screens.with_needs(set()) == set()


def test_the_script_answers_help_and_refuses_an_unknown_scene():
    helped = subprocess.run([str(ROOT / "bin" / "screens"), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert "chat-pending" in helped.stdout
    refused = subprocess.run([sys.executable, "-m", "bench.screens", "no-such-scene"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "no such scene: no-such-scene" in refused.stderr


def _png(width: int, height: int, level: int) -> bytes:
    rows = b"".join(b"\x00" + bytes((x * 7 + y * 13) % 256 for x in range(width * 3)) for y in range(height))
    chunk = lambda kind, body: struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))  # noqa: E731
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(rows, level)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat[:50]) + chunk(b"IDAT", idat[50:]) + chunk(b"IEND", b"")


def _pixels(png: bytes) -> bytes:
    return zlib.decompress(b"".join(body for kind, body in screens._chunks(png) if kind == b"IDAT"))


def test_shrinking_a_picture_keeps_every_pixel_and_never_grows_it():
    fast = _png(64, 48, level=0)
    shrunk = screens.shrink_png(fast)
    assert len(shrunk) < len(fast)
    assert shrunk.startswith(b"\x89PNG\r\n\x1a\n")
    for kind, body in screens._chunks(screens._redeflate(fast)):  # the fallback writes valid chunks
        assert kind in (b"IHDR", b"IDAT", b"IEND")
    if not _has_pillow():
        assert _pixels(shrunk) == _pixels(fast)
    best = screens.shrink_png(_png(64, 48, level=9))
    assert len(screens.shrink_png(best)) <= len(best)


def _has_pillow() -> bool:
    try:
        import PIL  # noqa: F401
    except ImportError:
        return False
    return True
