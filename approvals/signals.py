"""How approvals tells the rest of the project what happened. Both are sent after the commit."""
from django.dispatch import Signal

# Sent with `approval`: a new pending Approval.
approval_requested = Signal()
# Sent with `approvals`: the Approvals one transaction decided (a decision, an approve-all, a bulk
# decision, a round of expiries), so that receivers can do their work once for all of them.
approvals_decided = Signal()
