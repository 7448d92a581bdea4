"""Issue 22, finding 10: `make run` owns its Redis.

Without REDIS_URL, `bin/local-redis` starts a redis-server on a unix socket in the checkout's var
directory (no TCP port), and the settings point the broker and the channel layer there: a second
checkout on the same machine gets a Redis of its own instead of joining the first one's.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.stack import wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")

CONNECT_SCRIPT = """
import asyncio, json, django
django.setup()
from django.conf import settings
import redis
from channels.layers import get_channel_layer
from kombu import Connection

redis.Redis.from_url(settings.REDIS_URL).set("written-by", "settings")
with Connection(settings.CELERY_BROKER_URL) as broker:
    queue = broker.SimpleQueue("hitl-local-redis-test")
    queue.put({"task": "advance"})
    message = queue.get(timeout=5)
    message.ack()
    queue.close()

async def through_the_layer():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "html.push", "html": "ok"})
    return await asyncio.wait_for(layer.receive(channel), 5)

print(json.dumps({"redis_url": settings.REDIS_URL, "broker_url": settings.CELERY_BROKER_URL,
                  "task": message.payload, "pushed": asyncio.run(through_the_layer())["html"]}))
"""


def environment(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "HITL_VAR_DIR")}
    return env | extra


def redis_cli(socket: Path, *command: str) -> str:
    result = subprocess.run(["redis-cli", "-s", str(socket), *command], capture_output=True, text=True, timeout=10)
    return result.stdout.strip()


@contextmanager
def local_redis(checkout: Path, **env: str):
    """bin/local-redis as `make run` starts it in `checkout`; stopped (its whole group) afterwards."""
    process = subprocess.Popen(
        [str(checkout / "bin" / "local-redis")], cwd=checkout, env=environment(**env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def checkout(tmp_path: Path, name: str) -> Path:
    """A checkout of the repository, as far as bin/local-redis is concerned."""
    (tmp_path / name / "bin").mkdir(parents=True)
    shutil.copy2(ROOT / "bin" / "local-redis", tmp_path / name / "bin" / "local-redis")
    return tmp_path / name


def answers(socket: Path) -> bool:
    return socket.exists() and redis_cli(socket, "ping") == "PONG"


def test_two_checkouts_each_get_a_redis_of_their_own(tmp_path):
    first, second = checkout(tmp_path, "first"), checkout(tmp_path, "second")
    first_socket, second_socket = first / "var" / "redis.sock", second / "var" / "redis.sock"

    with local_redis(first), local_redis(second):
        wait_until(lambda: answers(first_socket), timeout=15, message="the first checkout's Redis")
        wait_until(lambda: answers(second_socket), timeout=15, message="the second checkout's Redis")
        redis_cli(first_socket, "set", "checkout", "first")

        assert redis_cli(second_socket, "get", "checkout") == ""  # not the first one's Redis
        assert redis_cli(first_socket, "get", "checkout") == "first"
        assert redis_cli(first_socket, "config", "get", "port").splitlines() == ["port", "0"]  # no TCP port
        assert redis_cli(second_socket, "config", "get", "port").splitlines() == ["port", "0"]


def test_a_second_run_of_the_same_checkout_uses_its_redis(tmp_path):
    first = checkout(tmp_path, "first")
    socket = first / "var" / "redis.sock"

    with local_redis(first):
        wait_until(lambda: answers(socket), timeout=15, message="the checkout's Redis")
        with local_redis(first) as again:
            line = again.stdout.readline()

    assert line.strip() == f"local-redis: using this checkout's Redis already running on {socket}."


def test_the_settings_default_is_the_checkouts_redis_for_the_broker_and_the_channel_layer(tmp_path):
    var_dir = tmp_path / "var"
    socket = var_dir / "redis.sock"

    with local_redis(ROOT, HITL_VAR_DIR=str(var_dir)):
        wait_until(lambda: answers(socket), timeout=15, message="the checkout's Redis")
        result = subprocess.run(
            [sys.executable, "-c", CONNECT_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60,
            env=environment(DJANGO_SETTINGS_MODULE="hitl.settings", DEBUG="1", HITL_VAR_DIR=str(var_dir)),
        )
        written = redis_cli(socket, "get", "written-by")

    assert result.returncode == 0, result.stdout + result.stderr
    connected = json.loads(result.stdout.splitlines()[-1])
    assert connected == {
        "redis_url": f"unix://{socket}", "broker_url": f"redis+socket://{socket}",
        "task": {"task": "advance"}, "pushed": "ok",
    }
    assert written == "settings"


def test_a_redis_url_that_is_set_is_used_as_it_is(tmp_path):
    script = "import django; django.setup(); from django.conf import settings as s; print(s.REDIS_URL, s.CELERY_BROKER_URL)"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env=environment(DJANGO_SETTINGS_MODULE="hitl.settings", DEBUG="1", HITL_VAR_DIR=str(tmp_path),
                        REDIS_URL="redis://redis.example.test:6379/2"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["redis://redis.example.test:6379/2"] * 2
