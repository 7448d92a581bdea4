"""Named users (alice owns, bob approves, mallory is neither), the demo agent, small factories, and
the helpers tests of several apps share."""
import asyncio
import io
import json

import httpx
import pytest

# The helper modules beside the tests assert too: rewritten as test modules are, so that a failing
# helper says what it compared (before any of them is imported).
pytest.register_assert_rewrite(
    "tests.agentlink.a2a_client", "tests.emaillink.recipient", "tests.pushlink.devices", "tests.security.outside_api",
    "tests.slacklink.workspace", "tests.telegramlink.phone", "tests.e2e.browser", "tests.e2e.a2a_client",
)
from django.contrib.auth.models import Group, Permission, User
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from approvals.models import Approval
from bench.stack import wait_until  # noqa: F401  (one polling helper for the tests and the bench)
from chat import services
from chat.demo import ensure_demo_agent
from chat.models import ApiToken, Conversation, Message
from tests import emptying

emptying.install()


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts with an empty process cache: what it remembers is keyed by row ids (A2A push's
    last state sent per config), and a rolled-back test's ids are given out again to the next."""
    cache.clear()


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(db):
    user = User.objects.create_user("bob", password="bob-password")
    user.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    return User.objects.get(pk=user.pk)  # fresh, so the permission cache is empty


@pytest.fixture
def mallory(db):
    return User.objects.create_user("mallory", password="mallory-password")


@pytest.fixture
def agent(db, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return ensure_demo_agent()


@pytest.fixture
def gated_deploy(agent):
    """The demo agent, gating `deploy` too: a tool it does not have, as outside agents ask for."""
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    return agent


@pytest.fixture
def make_conversation(agent):
    def make(owner, **fields) -> Conversation:
        return Conversation.objects.create(owner=owner, agent=fields.pop("agent", agent), **fields)

    return make


class ApiClient:
    """Calls the JSON API with a bearer token, as a program would."""

    def __init__(self, user, *, scope: str = ApiToken.Scope.DECIDE):
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {ApiToken.issue(user, scope=scope)}"} if user else {}

    def get(self, path: str, **params):
        return self.client.get(f"/api/{path}", params, headers=self.headers)

    def post(self, path: str, body=None):
        data = json.dumps(body) if body is not None else ""
        return self.client.post(f"/api/{path}", data, content_type="application/json", headers=self.headers)

    def patch(self, path: str, body):
        return self.client.patch(f"/api/{path}", json.dumps(body), content_type="application/json", headers=self.headers)

    def delete(self, path: str):
        return self.client.delete(f"/api/{path}", headers=self.headers)


@pytest.fixture
def api_as():
    return ApiClient


def start_conversation(user, agent, text: str) -> Conversation:
    """Start a conversation as `user` would (the loop runs in-process with eager Celery), refreshed."""
    conversation = services.start_conversation(user=user, agent=agent, content=text)
    conversation.refresh_from_db()
    return conversation


def client_for(user, *, csrf: bool = False) -> Client:
    """A logged-in test client; `csrf=True` enforces CSRF tokens as a browser's requests meet them."""
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def pending_approvals(conversation) -> list[Approval]:
    return list(Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).order_by("pk"))


def only_pending(conversation) -> Approval:
    (approval,) = pending_approvals(conversation)
    return approval


def say(conversation, user, text: str) -> Conversation:
    """Post `text` as `user` would (the loop runs in-process with eager Celery), refreshed."""
    services.post_message(conversation=conversation, user=user, content=text)
    conversation.refresh_from_db()
    return conversation


def last_reply(conversation) -> str:
    return Message.objects.filter(conversation=conversation, role="assistant").last().content


def last_notice(conversation) -> str:
    return conversation.messages.filter(role="system").last().content


def sandbox(settings, conversation):
    """The conversation's folder in the sandbox, where its file tools read and write."""
    return settings.HITL_SANDBOX_ROOT / str(conversation.pk)


def warned_without_its_signal(approval: Approval) -> Approval:
    """As a worker that marked it warned and died before approvals_expiring (or had the channel off) leaves it."""
    Approval.objects.filter(pk=approval.pk).update(warned_at=timezone.now())
    return Approval.objects.get(pk=approval.pk)


def intact() -> str:
    """The first line `manage.py verify_audit` prints."""
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue().splitlines()[0]


async def receive(layer, channel) -> dict:
    """The next message on `channel` of the channel layer, within 5 seconds."""
    return await asyncio.wait_for(layer.receive(channel), 5)


def asgi_call(application, method: str, path: str, *, token: str | None = None, headers: dict | None = None,
              **kwargs) -> httpx.Response:
    """One request to an ASGI app, as a client would send it (no server)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"

    async def go():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=20) as client:
            return await client.request(method, path, headers=sent, **kwargs)

    return asyncio.run(go())


@pytest.fixture
def ops_agent(db, settings, tmp_path):
    from chat.demo import ensure_ops_agent

    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return ensure_ops_agent()


def finance_group() -> tuple[Group, list[User]]:
    """The finance group and its two members, dana and erin (no password, no global permission)."""
    group = Group.objects.create(name="finance")
    members = [User.objects.create_user(name) for name in ("dana", "erin")]
    for member in members:
        member.groups.add(group)
    return group, members


@pytest.fixture
def carol(db):
    """A second approver, in the Approvers group made by the data migration."""
    from approvals.permissions import approvers_group

    user = User.objects.create_user("carol", password="carol-password")
    user.groups.add(approvers_group())
    return User.objects.get(pk=user.pk)
