"""The dashboard socket: approvers join the `approvals` group and receive its signals."""
from hitl import live
from hitl.consumers import LiveConsumer

from .permissions import is_approver


class ApprovalsConsumer(LiveConsumer):
    def group_name(self) -> str:
        return live.APPROVALS_GROUP

    def may_watch(self, user) -> bool:
        return is_approver(user)
