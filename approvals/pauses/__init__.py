"""The pauses that are not a tool call to allow: a question and a plan. What each asks (checked when
the agent asks it) and, once decided, the tool result the model reads. The loop sees only that: a
decided pause with a result; it never learns a kind's details.

In this package: `questions` and `plans`, each kind's rules (pure: no database). May import
approvals' models only."""
from django.conf import settings

from . import plans, questions
from ..models import Approval

Kind = Approval.Kind
Status = Approval.Status


class InvalidRequest(ValueError):
    """The agent's question or plan does not hold together; the message names the field, for the model."""


def request(kind: str, arguments: dict) -> dict:
    """The stored question or plan from the agent's (schema-validated) arguments, or InvalidRequest."""
    try:
        if kind == Kind.QUESTION:
            return questions.normalize(arguments, most_file_bytes=settings.HITL_MAX_UPLOAD_BYTES)
        if kind == Kind.PLAN:
            return plans.normalize(arguments)
    except (questions.InvalidQuestion, plans.InvalidPlan) as exc:
        raise InvalidRequest(str(exc)) from None
    raise ValueError(f"not a kind of pause with a request: {kind!r}")


def result(approval: Approval) -> str:
    """What the model reads as the tool's result once the question or plan is decided (not
    cancelled: a Stop reads the same for every kind)."""
    who = approval.decided_by.get_username() if approval.decided_by_id else "the system"
    reason = approval.rejection_reason
    if approval.kind == Kind.QUESTION:
        if approval.status == Status.ANSWERED:
            return questions.answered_result(approval.answer)
        if approval.status == Status.DECLINED:
            return questions.declined_result(f"The human ({who})", reason)
        return questions.expired_result()
    if approval.status == Status.APPROVED:
        return plans.approved_result(approval.plan, approval.answer["approved_steps"], approval.answer)
    if approval.status == Status.REJECTED:
        return plans.rejected_result(f"The human ({who})", reason)
    return plans.expired_result()


def succeeded(approval: Approval) -> bool:
    """Whether the pause ended with what the agent asked for: an answer, or a plan it may follow."""
    return approval.status in (Status.ANSWERED, Status.APPROVED)
