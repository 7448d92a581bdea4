"""The conversation socket, in-process: who may join, and that pushes reach it."""
import pytest
from django.contrib.auth.models import AnonymousUser
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from chat.models import Conversation
from core import live
from hitl.asgi import application
from hitl.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


def socket_as(user, conversation: Conversation, app=None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        app or URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
    )
    communicator.scope["user"] = user
    return communicator


@async_to_sync
async def connect_and_receive_push(communicator, conversation):
    connected, _ = await communicator.connect(timeout=5)
    if not connected:
        return None
    await get_channel_layer().group_send(live.conversation_group(conversation.pk), {"type": "html.push", "html": "<p id=x>hi</p>"})
    received = await communicator.receive_from(timeout=5)
    await communicator.disconnect()
    return received


@async_to_sync
async def connect(communicator):
    connected, code = await communicator.connect(timeout=5)
    if connected:
        await communicator.disconnect()
    return connected, code


def test_owner_joins_and_receives_pushed_html(alice, make_conversation):
    conversation = make_conversation(alice)
    assert connect_and_receive_push(socket_as(alice, conversation), conversation) == "<p id=x>hi</p>"


def test_an_approver_may_watch_someone_elses_conversation(alice, bob, make_conversation):
    conversation = make_conversation(alice)
    assert connect_and_receive_push(socket_as(bob, conversation), conversation) == "<p id=x>hi</p>"


def test_another_user_is_refused(alice, mallory, make_conversation):
    conversation = make_conversation(alice)
    assert connect(socket_as(mallory, conversation)) == (False, 4403)


def test_an_anonymous_visitor_is_refused(alice, make_conversation):
    conversation = make_conversation(alice)
    assert connect(socket_as(AnonymousUser(), conversation)) == (False, 4403)


def test_a_foreign_origin_is_refused_before_anything_else(alice, make_conversation):
    conversation = make_conversation(alice)
    communicator = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.pk}/", headers=[(b"origin", b"http://evil.example"), (b"host", b"localhost")]
    )
    connected, _ = connect(communicator)
    assert not connected
