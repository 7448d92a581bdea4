"""Writes on approvals: request one, decide one (first decision wins), decide several. Every surface
decides through these names (`from approvals import services`), whatever module of this package
holds them:

- `deciding`: one decision, a vote, an answer, a rule's or the policy's, a Stop, an outcome; the
  checks every decision passes and the conditional update that is the race (its `_`-names are the
  package's own, shared by the modules below, never used outside it);
- `requesting`: a new approval; `reviewing`: the AI reviewer's approval or escalation; `editing`: approving an edit, remembering a decision as a rule;
- `bulk`: several at once; `claims`: "I'm on it"; `deadlines`: warnings, expiry, extending, asking
  again; `errors`: what deciding is refused with."""
from .bulk import Outcome, decide_all, decide_many
from .claims import claim, unclaim
from .deadlines import AskAgain, ask_again, expire_overdue, extend, register_asker, warn_expiring, warning_at
from .deciding import (
    CLAIM_ENDS,
    MAX_LATE_KEPT,
    MAX_WORDS,
    StepUp,
    answer,
    approve_by_policy,
    cancel_pending,
    check_decidable,
    decide,
    decide_by_rule,
    needs_step_up,
    option_at,
    record_late,
    record_outcome,
    reject_as_repeat,
    respond,
)
from .editing import approve_edited, decide_remembering
from .errors import (
    CHANGED,
    SHOWN_CUT,
    STEP_UP,
    AlreadyDecided,
    AlreadyVoted,
    ArgumentsChanged,
    CannotAskAgain,
    ConfirmationRequired,
    DecisionError,
    EditForbidden,
    InvalidAnswer,
    NotAllowed,
    NotExpired,
    NotExtendable,
    OutcomeConflict,
    ShownCut,
    StepUpRequired,
    WrongKind,
)
from .requesting import request_approval
from .reviewing import decide_by_reviewer, escalate_review

__all__ = [
    "Outcome", "decide_all", "decide_many", "claim", "unclaim", "AskAgain", "ask_again", "expire_overdue", "extend",
    "register_asker", "warn_expiring", "warning_at", "CLAIM_ENDS", "MAX_LATE_KEPT", "MAX_WORDS", "StepUp", "answer",
    "approve_by_policy", "cancel_pending", "check_decidable", "decide", "decide_by_rule", "needs_step_up", "option_at",
    "record_late", "record_outcome", "reject_as_repeat", "respond", "approve_edited", "decide_remembering", "CHANGED", "SHOWN_CUT",
    "STEP_UP", "AlreadyDecided", "AlreadyVoted", "ArgumentsChanged", "CannotAskAgain", "ConfirmationRequired",
    "DecisionError", "EditForbidden", "InvalidAnswer", "NotAllowed", "NotExpired", "NotExtendable", "OutcomeConflict",
    "ShownCut", "StepUpRequired", "WrongKind", "request_approval", "decide_by_reviewer", "escalate_review",
]
