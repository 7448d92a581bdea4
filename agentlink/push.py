"""A2A push notifications (A2A §9.5): a client asks for a task's state changes to be POSTed to its
URL, with its token; we store the config in `agentlink.models.PushConfig` (ConfigStore, the SDK's
store interface over our rows, each config its owner's) and send with the SDK's own
BasePushNotificationSender, in a Celery task, never on a request's path or in the loop.

Who notices a change: agentlink.receivers, on the rows' signals (a message stored, an approval
asked, decided or edited), queues `notify`, which reads the task as a client would, and queues one
`deliver` per config when its state (or its pause) differs from what this process last sent. A
turn that fails says so in no row with a signal, so `notify` looks again a little later while the
task is still working (a few backing-off looks, one chain at a time).

A URL is http(s), on a port browsers may POST to (the Fetch standard's list of bad ports: no mail,
SSH or IRC server gets a POST), and on a public address unless the agent's operator lets it reach
private ones (the agent's `allow_private_fetch`, web_fetch's switch): checked when it is set (off
A2A's database threads: a name may take seconds to resolve) and again before each delivery, which
connects to the very addresses it checked (no second lookup to rebind), follows no redirect, and
ends within POST_SECONDS reading at most MAX_ANSWER_BYTES of the answer. A delivery is sent only to
an owner who still may use the agent, and only while it is the latest state for its config: a
receiver that keeps failing is retried a few times for the newest state, never for every change."""
import asyncio
import hashlib
import logging
import re

import httpcore
import httpx
from celery import shared_task
from django.core.cache import cache
from django.db import IntegrityError, transaction
from google.protobuf.json_format import MessageToDict, MessageToJson, Parse, ParseDict

from a2a.server.context import ServerCallContext
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from chat import fetching
from chat.selectors import may_use
from chat.tools import ToolError
from core.inputs import is_storable

from . import runs
from .models import PushConfig, Task
from .pool import database

logger = logging.getLogger(__name__)

MAX_CONFIGS_PER_TASK = 10
TOO_MANY = f"A task has at most {MAX_CONFIGS_PER_TASK} push notification configs: delete one first."
MAX_URL, MAX_TOKEN, MAX_ID, MAX_AUTH = 2000, 500, 200, 2000
RESOLVE_SECONDS = 5.0
POST_SECONDS = 10.0  # the whole POST: connecting, TLS, sending, the answer
MAX_ANSWER_BYTES = 64 * 1024  # of the receiver's answer, headers included: only its status is read
RETRIES = 3  # after the first try, backing off 1, 2, 4 s
MAX_FOLLOWS = 120  # looks at a working task, backing off to every 30 s: about an hour
SENT_FOR_SECONDS = 24 * 3600
HEADER_VALUE = re.compile(r"[\x20-\x7e]*")
# The Fetch standard's bad ports (https://fetch.spec.whatwg.org/#bad-port): services that are not HTTP.
BAD_PORTS = frozenset({
    0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
    111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
    540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061,
    6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
})


class Refused(Exception):
    """A push URL we will not POST to, and why."""


def check_url(url: str, *, allow_private: bool) -> list[str]:
    """The addresses to POST `url` to, or Refused: not http(s) with a host, unresolvable, (unless
    `allow_private`) any address of it not public, as web_fetch refuses one, or a bad port."""
    try:
        parts = httpx.URL(url)
        host = parts.raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError, TypeError):
        raise Refused(f"{url[:200]!r} is not a web address.") from None
    if parts.scheme not in ("http", "https") or not host:
        raise Refused("A push notification URL is http(s) with a host.")
    if parts.userinfo:  # user:password@ would be logged with the URL, and is the old trick of hiding the host
        raise Refused("A push notification URL carries no user:password@: send credentials as the config's token or authentication.")
    port = (443 if parts.scheme == "https" else 80) if parts.port is None else parts.port
    if not 0 < port < 65536:
        raise Refused(f"Port {port} is no TCP port.")
    try:
        addresses = fetching.resolve(host, port, fetching.Deadline(RESOLVE_SECONDS))
        if not allow_private:
            fetching.refuse_private(host, addresses)
    except ToolError as exc:
        raise Refused(f"{exc} Push notifications go to public addresses unless the agent's operator allows private ones.") from None
    if port in BAD_PORTS:
        raise Refused(f"Port {port} is not for HTTP (the Fetch standard's bad ports): push notifications are not sent there.")
    return addresses


# --- The configs: the SDK's store over our rows ------------------------------------------------------


def as_proto(row: PushConfig) -> pb.TaskPushNotificationConfig:
    config = pb.TaskPushNotificationConfig(id=row.config_id, task_id=str(row.task_id), url=row.url, token=row.token)
    if row.authentication:
        config.authentication.CopyFrom(ParseDict(row.authentication, pb.AuthenticationInfo(), ignore_unknown_fields=True))
    return config


class ConfigStore(PushNotificationConfigStore):
    """Push configs in the database, each its owner's: the caller (the call context's user) sets,
    reads and deletes only its own, on its own tasks; a task it cannot see is not found."""

    async def set_info(self, task_id: str, notification_config: pb.TaskPushNotificationConfig, context: ServerCallContext):
        user, agent = context.state["hitl_user"], context.state["hitl_agent"]
        task = await database(_own_task)(user, agent, task_id)
        await asyncio.to_thread(check_config, agent, notification_config)  # resolves a name: not on A2A's database threads
        return await database(set_config)(user, task, notification_config)

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[pb.TaskPushNotificationConfig]:
        return await database(configs_of)(context.state["hitl_user"], context.state["hitl_agent"], task_id)

    async def get_info_for_dispatch(self, task_id: str) -> list[pb.TaskPushNotificationConfig]:
        return await database(lambda: [as_proto(row) for row in PushConfig.objects.filter(task_id=runs.parse_id(task_id))])()

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        await database(delete_config)(context.state["hitl_user"], context.state["hitl_agent"], task_id, config_id)


def _own_task(user, agent, task_id: str) -> Task:
    task = runs.task_for(user, agent, task_id)
    if task is None:  # unknown, or another user's: the same answer
        raise TaskNotFoundError
    return task


def check_config(agent, config: pb.TaskPushNotificationConfig) -> None:
    """InvalidParamsError for a config that is not stored: a field too long, no url, a URL refused
    (`check_url`: it resolves the name, so call it off A2A's database threads)."""
    auth = MessageToDict(config.authentication) if config.HasField("authentication") else {}
    for name, value, limit in (("url", config.url, MAX_URL), ("token", config.token, MAX_TOKEN),
                               ("id", config.id, MAX_ID), ("authentication", str(auth), MAX_AUTH)):
        if len(value) > limit:
            raise InvalidParamsError(message=f"A push notification config's {name} is at most {limit} characters.")
    if not (is_storable(config.id) and is_storable(config.url)):
        raise InvalidParamsError(message="A push notification config's id and url hold no NUL or lone surrogate.")
    # Each is sent in a header: visible ASCII only (a CR, LF or NUL would be refused by every send, for ever).
    for name, value in (("token", config.token), ("authentication scheme", config.authentication.scheme),
                        ("authentication credentials", config.authentication.credentials)):
        if not HEADER_VALUE.fullmatch(value):
            raise InvalidParamsError(message=f"A push notification config's {name} is visible ASCII: it is sent in a header.")
    if not config.url:
        raise InvalidParamsError(message="A push notification config needs a url.")
    try:
        check_url(config.url, allow_private=agent.allow_private_fetch)
    except Refused as exc:
        raise InvalidParamsError(message=f"Push notification URL refused: {exc}") from None


def set_config(user, task: Task, config: pb.TaskPushNotificationConfig) -> pb.TaskPushNotificationConfig:
    """Store (or replace, by id: the task's own id when it names none) a config, checked already
    (`check_config`), on the caller's own task."""
    config_id = check_room(task, config)
    fields = {"owner": user, "url": config.url, "token": config.token,
              "authentication": MessageToDict(config.authentication) if config.HasField("authentication") else {}}
    try:
        with transaction.atomic():
            row, created = PushConfig.objects.update_or_create(task=task, config_id=config_id, defaults=fields)
            if created and PushConfig.objects.filter(task=task).count() > MAX_CONFIGS_PER_TASK:
                raise InvalidParamsError(message=TOO_MANY)
    except IntegrityError:  # two clients setting one id at once: the first stands
        raise InvalidParamsError(message="That push notification config was set meanwhile: read it again.") from None
    transaction.on_commit(lambda: notify.delay(str(task.pk), force=True), robust=True)
    return as_proto(row)


def check_room(task: Task, config: pb.TaskPushNotificationConfig) -> str:
    """The config's id (the task's own when it names none), or InvalidParamsError when it would be
    one too many for the task: checked before a message that carries it decides or starts anything."""
    config_id = config.id or str(task.pk)
    configs = PushConfig.objects.filter(task=task)
    if configs.count() >= MAX_CONFIGS_PER_TASK and not configs.filter(config_id=config_id).exists():
        raise InvalidParamsError(message=TOO_MANY)
    return config_id


def configs_of(user, agent, task_id: str) -> list[pb.TaskPushNotificationConfig]:
    task = _own_task(user, agent, task_id)
    return [as_proto(row) for row in PushConfig.objects.filter(task=task, owner=user)]


def delete_config(user, agent, task_id: str, config_id: str | None) -> None:
    task = _own_task(user, agent, task_id)
    if is_storable(config_id or ""):  # no stored id holds a NUL, and PostgreSQL refuses one even in a query
        PushConfig.objects.filter(task=task, owner=user, config_id=config_id or str(task.pk)).delete()


# --- Sending: a task's state, when it changed, to every config's URL ---------------------------------


@shared_task(ignore_result=True)
def notify(task_id: str, *, follow: int = 0, force: bool = False) -> None:
    """Send the task to each of its configs if its state or pause changed since this process last
    sent it (`force`: a config just set hears the state as it is)."""
    task = Task.objects.select_related("conversation").filter(pk=task_id).first()
    if task is None or not task.push_configs.exists():
        return
    reading = runs.read(task)
    proto = runs.as_proto(task, reading, history_length=0)
    sent_key = f"agentlink.push.sent:{task_id}"
    digest = hashlib.sha256(bytes([reading.state]) + proto.status.message.SerializeToString(deterministic=True)).hexdigest()
    if force or cache.get(sent_key) != digest:
        cache.set(sent_key, digest, SENT_FOR_SECONDS)
        payload = MessageToJson(proto)
        for config_pk in task.push_configs.values_list("pk", flat=True):
            cache.set(_latest_key(config_pk), _digest(payload), SENT_FOR_SECONDS)
            deliver.delay(config_pk, payload)
    _follow_later(task_id, follow, moving=reading.state in (runs.State.TASK_STATE_SUBMITTED, runs.State.TASK_STATE_WORKING))


def _follow_later(task_id: str, follow: int, *, moving: bool) -> None:
    """Look again later at a working task (a failure has no signal to tell us): one chain of looks
    per task in this process. Eager Celery (the unit tests) runs no chain: it would never wait."""
    key = f"agentlink.push.follow:{task_id}"
    if not moving or follow >= MAX_FOLLOWS or notify.app.conf.task_always_eager:
        if follow:
            cache.delete(key)
        return
    delay = min(2 ** follow, 30)
    if follow == 0 and not cache.add(key, True, delay + 60):
        return  # a chain is on it
    cache.set(key, True, delay + 60)
    notify.apply_async((task_id,), {"follow": follow + 1}, countdown=delay)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def deliver(self, config_pk: int, payload: str) -> None:
    """POST the task to one config's URL, with its token, through the SDK's sender; retried a few
    times, backing off, while the client's server fails and this is still the latest state for it
    (a newer one is on its way: the older is dropped, retries and all). A config deleted meanwhile,
    a URL now refused, or an owner who no longer has the conversation or may no longer use the
    agent (deactivated, access taken back) gets nothing."""
    row = PushConfig.objects.select_related("owner", "task__conversation__agent").filter(pk=config_pk).first()
    if row is None or cache.get(_latest_key(config_pk), _digest(payload)) != _digest(payload):
        return
    conversation = row.task.conversation
    if conversation.owner_id != row.owner_id or not may_use(row.owner, conversation.agent):  # may_use: active too
        logger.warning("a2a push to config %s not sent: its owner may no longer see task %s", config_pk, row.task_id)
        return
    try:
        addresses = check_url(row.url, allow_private=conversation.agent.allow_private_fetch)
    except Refused as exc:
        logger.warning("a2a push to config %s not sent: %s", config_pk, exc)
        return
    proto = Parse(payload, pb.Task())
    if asyncio.run(_post(as_proto(row), proto, addresses)):
        return
    if self.request.retries >= RETRIES:
        logger.warning("a2a push to config %s (task %s) failed %s times: given up", config_pk, row.task_id, RETRIES + 1)
        return
    raise self.retry(countdown=2 ** self.request.retries, max_retries=RETRIES)


def _latest_key(config_pk: int) -> str:
    return f"agentlink.push.latest:{config_pk}"


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


class _OneConfig(PushNotificationConfigStore):
    """The sender's store for one delivery: the one config it sends to (read from our rows already)."""

    def __init__(self, config: pb.TaskPushNotificationConfig):
        self.config = config

    async def set_info(self, task_id, notification_config, context):
        raise NotImplementedError

    async def get_info(self, task_id, context):
        return [self.config]

    async def get_info_for_dispatch(self, task_id):
        return [self.config]

    async def delete_info(self, task_id, context, config_id=None):
        raise NotImplementedError


async def _post(config: pb.TaskPushNotificationConfig, proto: pb.Task, addresses: list[str]) -> bool:
    """Whether the client's server took it (a 2xx) within POST_SECONDS. The SDK's sender logs and
    swallows failures, so the answer is read from the response itself."""
    answers: list[bool] = []

    async def record(response: httpx.Response) -> None:
        answers.append(response.is_success)

    transport = httpx.AsyncHTTPTransport()
    # As chat.fetching does for web_fetch: the pool connects to the checked addresses only.
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(), network_backend=_PinnedBackend(addresses))
    try:
        async with asyncio.timeout(POST_SECONDS):  # one deadline: a receiver answering a byte at a time holds no worker
            async with httpx.AsyncClient(transport=transport, timeout=POST_SECONDS, follow_redirects=False, trust_env=False,
                                         event_hooks={"response": [record]}) as client:
                await BasePushNotificationSender(client, _OneConfig(config)).send_notification(proto.id, proto)
    except TimeoutError:
        logger.warning("a2a push to config %s of task %s: no answer within %g s", config.id, config.task_id, POST_SECONDS)
        return False
    return answers == [True]


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the addresses that were checked, whatever host httpcore names (TLS still checks
    the URL's host)."""

    def __init__(self, addresses: list[str]):
        self._addresses = addresses
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        failure: Exception = httpcore.ConnectError(f"no address for {host}")
        for address in self._addresses:
            try:
                stream = await self._backend.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _CappedStream(stream)
        raise failure

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("push notifications do not use unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _CappedStream(httpcore.AsyncNetworkStream):
    """A connection that reads at most MAX_ANSWER_BYTES: a receiver answering without end fills no
    worker's memory (httpx reads a whole answer before the sender looks at its status)."""

    def __init__(self, stream: httpcore.AsyncNetworkStream):
        self._stream = stream
        self._read = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._read >= MAX_ANSWER_BYTES:
            raise httpcore.ReadError(f"the answer is over {MAX_ANSWER_BYTES} bytes")
        data = await self._stream.read(min(max_bytes, MAX_ANSWER_BYTES - self._read), timeout)
        self._read += len(data)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        return _CappedStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)
