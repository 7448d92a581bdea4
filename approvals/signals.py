"""approval_decided: how approvals speaks back to chat. Sent after the decision commits."""
from django.dispatch import Signal

# Sent with `approval`: the decided Approval, fresh from the database.
approval_decided = Signal()
