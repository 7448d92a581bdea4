"""What every live socket does: authorize on connect, join its groups, send pushed HTML, and
authorize again when the user's access changes or a while has passed, closing with 4403 once the
user may no longer see what it shows. Sockets accept no input: decisions are HTTP POSTs."""
import time

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from . import access

RECHECK_SECONDS = 30  # for what no signal reports: a session deleted or expired
FORBIDDEN = 4403


class LiveConsumer(AsyncWebsocketConsumer):
    def group_name(self) -> str:
        raise NotImplementedError

    def may_watch(self, user) -> bool:
        """Whether `user` (fresh from the database) may receive this socket's pushes."""
        raise NotImplementedError

    async def connect(self) -> None:
        self.groups_joined: list[str] = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not await self._authorized():
            await self.close(code=FORBIDDEN)
            return
        for group in (self.group_name(), access.user_group(user.pk)):
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def html_push(self, event: dict) -> None:
        if time.monotonic() - self.checked_at > RECHECK_SECONDS and not await self._authorized():
            await self.close(code=FORBIDDEN)
            return
        await self.send(text_data=event["html"])

    async def access_changed(self, event: dict) -> None:
        if not await self._authorized():
            await self.close(code=FORBIDDEN)

    async def _authorized(self) -> bool:
        self.checked_at = time.monotonic()
        return await database_sync_to_async(self._check)()

    def _check(self) -> bool:
        user = access.current_user(self.scope)
        return user is not None and self.may_watch(user)
