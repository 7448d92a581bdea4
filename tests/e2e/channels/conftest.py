"""What the channels' end-to-end tests share: each channel runs a stack of its own (redis-server,
beat, daphne and a Celery worker) pointed at a local stand-in for its service, starts conversations
there through the JSON API, and checks after each test that every part still runs."""
from approvals.models import Approval
from chat.models import Conversation
from tests.conftest import wait_until
from tests.e2e.conftest import BIN, Api, port_open, start


class ChannelStack:
    """A channel's own stack: `processes` by name, in the order they started."""

    processes: dict

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{process.tail()}" for name, process in self.processes.items())


def start_parts(processes: dict, name: str, env: dict, work, redis_port: int, web_port: int, *, worker: bool = True) -> None:
    """Starts into `processes` the stack's redis-server (and waits for it), beat, daphne and, unless
    `worker` is False, a Celery worker: each logged as `<name>-redis`, `<name>-beat` and so on."""
    processes["redis"] = start(f"{name}-redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                                 "--save", "", "--appendonly", "no", "--dir", str(work)], env, work)
    wait_until(lambda: port_open(redis_port), timeout=10, message="redis")
    processes["beat"] = start(f"{name}-beat", [str(BIN / "celery"), "-A", "hitl", "beat", "--schedule", str(work / "beat")], env, work)
    processes["web"] = start(f"{name}-web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(web_port), "hitl.asgi:application"], env, work)
    if worker:
        processes["worker"] = start(f"{name}-worker", [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--without-mingle",
                                                       "--without-gossip", "--hostname", f"{name}@%h"], env, work)


def wait_for_parts(processes: dict, web_port: int, *, daphne_timeout: float = 60) -> None:
    """Daphne answers and the worker is ready."""
    wait_until(lambda: port_open(web_port), timeout=daphne_timeout, message="daphne")
    wait_until(lambda: "ready." in processes["worker"].log.read_text(), timeout=60, message="the worker")


def after_the_test(stack: ChannelStack) -> None:
    """After each test: no part of the stack died, and the worker finished what the test started."""
    for name, process in stack.processes.items():
        assert process.popen.poll() is None, f"{name} died:\n{process.tail()}"
    running = Conversation.objects.filter(status=Conversation.Status.RUNNING)
    wait_until(lambda: not running.exists(), timeout=30, message="the worker to finish what the test started")


def start_on(stack: ChannelStack, user, text: str, agent: str = "demo") -> str:
    """A conversation started by `user` through the channel stack's JSON API; its id."""
    response = Api(stack.base_url, user).post("conversations", {"agent": agent, "message": text})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def approval_of(conversation_id: str) -> Approval:
    return wait_until(lambda: Approval.objects.filter(conversation_id=conversation_id).first(), timeout=20, message="the approval")
