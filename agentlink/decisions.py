"""Decisions that arrive over A2A, as a message on an input-required task: read its parts, check
every decision against the stored rows, then decide through approvals.services like every surface
(first decision wins, four eyes, critical confirmation). Plain text goes through the chat's
typed-decision rules. Sync."""
from dataclasses import dataclass

from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from approvals import services
from approvals.models import Approval
from approvals.permissions import can_decide
from chat import services as chat_services

APPROVE, DENY = "approve", "deny"
DECISION_TYPES = {"approve": APPROVE, "deny": DENY, "reject": DENY}
SHAPES = (
    'A data part holds {"decision_type": "approve"|"deny", "reason"?}, {"decisions": [{"id", "decision_type", '
    '"reason"?, "confirmation"?}]}, {"approvals": [{"id", "approved", "rejection_reason"?}]} (tool_approval_response) '
    'or {"answers": [{"id", "answer"} | {"id", "decline": true, "reason"?}]} (ask_user_response).'
)


class Refused(Exception):
    """Nothing (or, for a race lost midway, only what the message says) was decided, and why."""

    def __init__(self, message: str, data: dict | None = None):
        super().__init__(message)
        self.message, self.data = message, data


@dataclass
class Decision:
    approval: Approval
    verb: str  # approve, deny or answer
    reason: str = ""
    confirmation: str = ""
    value: object = None
    decline: bool = False


def apply(*, conversation, user, message: pb.Message, pending: list[Approval]) -> int:
    """Decide what `message` says about the `pending` approvals the task showed. Returns how many
    were decided; raises Refused, having decided nothing, when any of it cannot stand."""
    texts = [part.text for part in message.parts if part.WhichOneof("content") == "text"]
    data = [MessageToDict(part.data) for part in message.parts if part.WhichOneof("content") == "data"]
    if not data:
        text = "\n".join(texts).strip()
        if not text:
            raise Refused("The message has no text and no data part: nothing to decide. " + SHAPES)
        chat_services.post_message(conversation=conversation, user=user, content=text)
        return 0
    decisions = _read(data, pending, conversation)
    for decision in decisions:
        _check(decision, user)
    decided = 0
    for decision in decisions:
        try:
            _decide(decision, user)
        except services.AlreadyDecided as exc:
            raise Refused(_already(exc.approval) + _so_far(decided), _data(exc.approval)) from None
        except (services.DecisionError, Approval.DoesNotExist) as exc:
            raise Refused(f"Approval #{decision.approval.pk}: {exc or 'not found.'}" + _so_far(decided)) from None
        decided += 1
    return decided


def refuse_decided(*, conversation, message: pb.Message) -> None:
    """For a task that no longer waits: name who decided first any call the message decides."""
    data = [MessageToDict(part.data) for part in message.parts if part.WhichOneof("content") == "data"]
    try:
        _read(data, [], conversation)
    except Refused as exc:
        if exc.data is not None:
            raise


def _read(data: list, pending: list[Approval], conversation) -> list[Decision]:
    by_id = {approval.pk: approval for approval in pending}
    seen: dict[int, Decision] = {}

    def add(raw_id, verb: str, **fields) -> None:
        approval_id = _id(raw_id)
        if approval_id in seen:
            raise Refused(f"Approval #{approval_id} is decided twice in this message.")
        approval = by_id.get(approval_id)
        if approval is None:
            earlier = Approval.objects.select_related("decided_by").filter(
                pk=approval_id, conversation_id=conversation.pk
            ).first()
            if earlier is not None and earlier.status != Approval.Status.PENDING:
                raise Refused(_already(earlier), _data(earlier))
            raise Refused(f"Approval #{approval_id} is not one of this task's pending calls.")
        seen[approval_id] = Decision(approval, verb, **fields)

    for item in data:
        item = _unwrap(item)
        if not isinstance(item, dict):
            raise Refused("A data part must be a JSON object. " + SHAPES)
        if "decision_type" in item:
            verb = _verb(item["decision_type"])
            for approval in pending:
                if approval.kind != Approval.Kind.QUESTION:
                    add(approval.pk, verb, reason=_text(item.get("reason")), confirmation=_text(item.get("confirmation")))
                elif verb == DENY:
                    add(approval.pk, "answer", decline=True, reason=_text(item.get("reason")))
        elif "decisions" in item:
            for entry in _list(item["decisions"], "decisions"):
                add(entry.get("id"), _verb(entry.get("decision_type")), reason=_text(entry.get("reason")),
                    confirmation=_text(entry.get("confirmation")))
        elif "approvals" in item:
            for entry in _list(item["approvals"], "approvals"):
                if not isinstance(entry.get("approved"), bool):
                    raise Refused('Each of "approvals" needs "approved": true or false.')
                add(entry.get("id"), APPROVE if entry["approved"] else DENY, reason=_text(entry.get("rejection_reason")),
                    confirmation=_text(entry.get("confirmation")))
        elif "answers" in item:
            for entry in _list(item["answers"], "answers"):
                if entry.get("decline") is True:
                    add(entry.get("id"), "answer", decline=True, reason=_text(entry.get("reason")))
                elif "answer" in entry:
                    add(entry.get("id"), "answer", value=entry["answer"])
                else:
                    raise Refused('Each of "answers" needs "answer", or "decline": true.')
        else:
            raise Refused("That data part decides nothing. " + SHAPES)
    if not seen:
        raise Refused("The message decides none of the pending calls. " + SHAPES)
    return list(seen.values())


def _check(decision: Decision, user) -> None:
    """Refuse, before anything is decided, what the decision service would refuse."""
    approval = decision.approval
    label = f"Approval #{approval.pk}"
    is_question = approval.kind == Approval.Kind.QUESTION
    if decision.verb == "answer" and not is_question:
        raise Refused(f"{label} is a tool call, not a question: approve or deny it.")
    if decision.verb == APPROVE and is_question:
        raise Refused(f'{label} is a question: answer it with {{"answers": [{{"id": {approval.pk}, "answer": …}}]}}.')
    if not can_decide(user, approval, approve=decision.verb == APPROVE or (decision.verb == "answer" and not decision.decline)):
        raise Refused(f"{label} needs an approver other than the requester (four eyes).")
    if decision.verb == APPROVE and approval.confirmation_required and decision.confirmation.strip() != approval.confirmation_hint:
        raise Refused(f'{label} is critical: approve it with "confirmation": "{approval.confirmation_hint}".')


def _decide(decision: Decision, user) -> None:
    approval, via = decision.approval, Approval.Via.A2A
    if decision.verb == "answer":
        services.answer(approval.pk, user=user, via=via, value=decision.value, decline=decision.decline, reason=decision.reason)
    else:
        services.decide(
            approval.pk, user=user, approve=decision.verb == APPROVE, via=via,
            reason=decision.reason, confirmation=decision.confirmation,
        )


def _already(approval: Approval) -> str:
    who = approval.decided_by.get_username() if approval.decided_by else "nobody"
    how = {"timeout": "its timeout", "rule": "a rule", "repeat": "the repeat rule"}.get(approval.decided_via)
    by = f"by {how}" if how else f"by {who} via {approval.decided_via or 'the system'}"
    return f"Approval #{approval.pk} was already {approval.status} {by}."


def _data(approval: Approval) -> dict:
    return {
        "id": approval.pk,
        "status": approval.status,
        "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
        "decided_via": approval.decided_via,
    }


def _so_far(decided: int) -> str:
    return f" The {decided} decision(s) before it in this message stand." if decided else " Nothing was decided."


def _unwrap(item):
    """kagent's named envelopes ({"tool_approval_response": {...}}) read as their content."""
    if isinstance(item, dict) and len(item) == 1:
        (key, inner), = item.items()
        if key in ("tool_approval_response", "ask_user_response", "decision") and isinstance(inner, dict):
            return inner
    return item


def _verb(value) -> str:
    verb = DECISION_TYPES.get(value) if isinstance(value, str) else None
    if verb is None:
        raise Refused('"decision_type" is "approve" or "deny".')
    return verb


def _id(value) -> int:
    if isinstance(value, bool):
        value = None
    if isinstance(value, float) and value.is_integer():  # JSON numbers arrive as floats through protobuf
        value = int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or value <= 0:
        raise Refused('Each decision names its call by "id": the approval id the request showed.')
    return value


def _list(value, name: str) -> list[dict]:
    if not isinstance(value, list) or not value or not all(isinstance(entry, dict) for entry in value):
        raise Refused(f'"{name}" is a non-empty list of objects.')
    return value


def _text(value) -> str:
    return value.strip()[:2000] if isinstance(value, str) else ""
