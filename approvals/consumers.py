"""The dashboard socket: approvers join the `approvals` group and receive its signals."""
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from hitl import live

from .permissions import is_approver


class ApprovalsConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(is_approver)(user):
            await self.close(code=4403)
            return
        self.joined = True
        await self.channel_layer.group_add(live.APPROVALS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(live.APPROVALS_GROUP, self.channel_name)

    async def html_push(self, event: dict) -> None:
        await self.send(text_data=event["html"])
