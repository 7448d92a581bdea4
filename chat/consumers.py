"""The conversation socket: the owner or an approver joins `conversation.<uuid>` and receives HTML."""
from django.http import Http404

from core import live
from core.consumers import LiveConsumer

from .selectors import conversation_for


class ConversationConsumer(LiveConsumer):
    def group_name(self) -> str:
        return live.conversation_group(self.scope["url_route"]["kwargs"]["conversation_id"])

    def may_watch(self, user) -> bool:
        try:
            conversation_for(user, self.scope["url_route"]["kwargs"]["conversation_id"])
        except Http404:
            return False
        return True
