"""What deciding can be refused with: each a DecisionError whose message says, in words a surface
shows as they are, why nothing was decided."""
from ..models import Approval


class DecisionError(Exception):
    pass


class AlreadyDecided(DecisionError):
    """Someone (or the timeout) decided first; the stored decision stands."""

    def __init__(self, approval: Approval):
        self.approval = approval
        super().__init__(f"Approval {approval.pk} was already {approval.status}.")


class ShownCut(DecisionError):
    """An approve through a message that showed the call cut (its arguments or preview did not fit):
    such a message can reject, never approve. The site shows the whole call and approves it."""

    def __init__(self):
        super().__init__(SHOWN_CUT)


SHOWN_CUT = (
    "This message showed the call cut, so it can only reject: open the site to see the whole call and approve it there."
)


class NotAllowed(DecisionError):
    """The user may see the approval but not decide it (four eyes: an approver must)."""


class AlreadyVoted(DecisionError):
    """This person's vote (or the vote of whom they act for) is already counted: one vote each."""


class ConfirmationRequired(DecisionError):
    """A critical call is approved only with its typed confirmation."""


class ArgumentsChanged(DecisionError):
    """The call was edited after the decider saw it: they would approve what they were not shown."""


class EditForbidden(DecisionError):
    """An edit the rules refuse (a deny rule, or the rejection contract): nothing is stored."""


CHANGED = "The call changed after you saw it (it was edited): look at it again before deciding."


class StepUpRequired(DecisionError):
    """Approving this call needs the approver's passkey on the site (the agent's step_up_from_risk):
    every other surface may only reject it."""


STEP_UP = "Approve on the site with your passkey: this call needs step-up."


class WrongKind(DecisionError):
    """A question is answered (or declined), not approved; an action or a plan is decided, not answered."""


class InvalidAnswer(DecisionError):
    """An answer the question does not take, or plan steps the plan does not allow; nothing is decided."""


class OutcomeConflict(DecisionError):
    """An outcome that cannot be recorded for this approval: not approved, another version than
    the one approved, or reported already."""


class NotExtendable(DecisionError):
    """Its deadline cannot be pushed back: it has none, it was extended once already, or it is decided."""


class NotExpired(DecisionError):
    """Only an expired approval is asked again (a pending one waits still; a decided one was decided)."""


class CannotAskAgain(DecisionError):
    """An expired approval that cannot be asked again: asked again already, its conversation is busy,
    or its caller was told it timed out (an MCP client's call)."""
