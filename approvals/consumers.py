"""The dashboard socket: approvers (global, a route's group, a delegate) join the `approvals` group
and receive its signals; each signal only tells an inbox to re-read what its viewer may see."""
from core import live
from core.consumers import LiveConsumer

from .permissions import may_approve_anything


class ApprovalsConsumer(LiveConsumer):
    def group_name(self) -> str:
        return live.APPROVALS_GROUP

    def may_watch(self, user) -> bool:
        return may_approve_anything(user)
