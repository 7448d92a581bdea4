"""How approvals tells the rest of the project what happened. All are sent after the commit."""
from django.dispatch import Signal

# Sent with `approval`: a new pending Approval.
approval_requested = Signal()
# Sent with `approvals`: the Approvals one transaction decided (a decision, an approve-all, a bulk
# decision, a round of expiries), so that receivers can do their work once for all of them. Sent in
# a worker (approvals.announcements), never in the request that decided: a receiver may take its
# time. Also sent with `deliveries`, the webhook deliveries written with the decisions.
approvals_decided = Signal()
# Sent with `approval`: a decision of one call, in the process that stored it, right after the commit
# and before approvals_decided leaves for a worker: for what must show at once (every tab of the
# conversation within half a second). A receiver here holds up the request: push, never wait.
# Several decided at once (approve-all, bulk) send none: they show as the worker moves them.
approval_stored = Signal()
# Sent with `approval`: a pending Approval whose arguments a human edited; it still waits for a
# decision (the edit made the call stricter, so another rule now decides who approves it).
approval_edited = Signal()
# Sent with `approval`: a pending Approval claimed or unclaimed (`claimed_by`): a signal, it decides nothing.
approval_claimed = Signal()
# Sent with `approval`, `vote` and `deliveries` (its webhook outbox): a vote toward a quorum that
# did not yet decide the approval; it still waits. The deciding vote sends approvals_decided instead.
approval_voted = Signal()
# Sent with `approvals` and `deliveries`: pending approvals whose approvers were just reminded
# (`event` "approval.reminder") or which just escalated to their escalation groups ("approval.escalated").
approvals_reminded = Signal()
approvals_escalated = Signal()
# Sent with `approvals`: pending approvals whose deadline is near (Approval.warn_at passed), once
# each: every channel they went to and their conversation warn that they expire soon.
approvals_expiring = Signal()
# Sent with `approval`: a pending approval whose deadline was just extended (`expires_at`, `extended_by`).
approval_extended = Signal()
# Sent with `approval`: a pending approval its AI reviewer handed to a person (approvals.reviewer),
# with `reviewer_rationale`: the card shows why; approval_requested is sent with it.
approval_reviewed = Signal()
