from django.urls import path

from approvals.consumers import ApprovalsConsumer
from chat.consumers import ConversationConsumer

websocket_urlpatterns = [
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi()),
    path("ws/approvals/", ApprovalsConsumer.as_asgi()),
]
