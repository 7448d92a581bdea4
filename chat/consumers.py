"""The conversation socket: the owner or an approver joins `conversation.<uuid>` and receives HTML."""
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import Http404

from hitl import live

from .selectors import conversation_for


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        if user is None or not user.is_authenticated or not await self._may_see(user, conversation_id):
            await self.close(code=4403)
            return
        self.group = live.conversation_group(conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def html_push(self, event: dict) -> None:
        await self.send(text_data=event["html"])

    @database_sync_to_async
    def _may_see(self, user, conversation_id) -> bool:
        try:
            conversation_for(user, conversation_id)
        except Http404:
            return False
        return True
