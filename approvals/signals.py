"""How approvals tells the rest of the project what happened. Both are sent after the commit."""
from django.dispatch import Signal

# Sent with `approval`: a new pending Approval.
approval_requested = Signal()
# Sent with `approval`: the decided Approval, fresh from the database.
approval_decided = Signal()
