"""Finding 9: a socket stops receiving pushes once its user may no longer see them: logged out,
deactivated, or no longer an approver. It is closed with 4403."""
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission

from core import live
from hitl.asgi import application
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)
PUSH = {"type": "html.push", "html": "<p id=x>hi</p>"}


def socket_for(client, path: str) -> WebsocketCommunicator:
    """A socket as the browser opens it: the session cookie, an allowed origin."""
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(
        application, path, headers=[(b"cookie", cookie), (b"origin", b"http://localhost"), (b"host", b"localhost")]
    )


@async_to_sync
async def closed_after(communicator, group: str, revoke) -> int | None:
    """Connect, check a push arrives, revoke access, and return the close code the socket got."""
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    await get_channel_layer().group_send(group, PUSH)
    assert await communicator.receive_from(timeout=5) == PUSH["html"]
    await database_sync_to_async(revoke)()
    output = await communicator.receive_output(timeout=5)
    await communicator.wait()
    return output.get("code") if output["type"] == "websocket.close" else None


def test_logging_out_closes_the_users_sockets(alice, make_conversation):
    conversation = make_conversation(alice)
    client = client_for(alice)
    socket = socket_for(client, f"/ws/conversations/{conversation.pk}/")

    assert closed_after(socket, live.conversation_group(conversation.pk), lambda: client.post("/accounts/logout/")) == 4403


def test_a_deactivated_user_stops_receiving(alice, make_conversation):
    conversation = make_conversation(alice)
    socket = socket_for(client_for(alice), f"/ws/conversations/{conversation.pk}/")

    def deactivate():
        alice.is_active = False
        alice.save()

    assert closed_after(socket, live.conversation_group(conversation.pk), deactivate) == 4403


def test_an_approver_who_loses_the_permission_leaves_the_dashboard_and_other_peoples_chats(alice, bob, make_conversation):
    conversation = make_conversation(alice)
    dashboard = socket_for(client_for(bob), "/ws/approvals/")
    chat = socket_for(client_for(bob), f"/ws/conversations/{conversation.pk}/")
    permission = Permission.objects.get(codename="decide_approval")

    assert closed_after(dashboard, live.APPROVALS_GROUP, lambda: bob.user_permissions.remove(permission)) == 4403
    bob.user_permissions.add(permission)
    assert closed_after(chat, live.conversation_group(conversation.pk), lambda: bob.user_permissions.remove(permission)) == 4403


def test_leaving_the_approvers_group_closes_the_dashboard(alice, carol):
    dashboard = socket_for(client_for(carol), "/ws/approvals/")

    assert closed_after(dashboard, live.APPROVALS_GROUP, lambda: carol.groups.clear()) == 4403
