"""Decisions that arrive over A2A, as a message on an input-required task: read its parts, check
every decision against the stored rows, then decide through approvals.services like every surface
(first decision wins, four eyes, critical confirmation, the version shown). Plain text goes through
the chat's typed-decision rules.

A decision binds to the version its client saw: by id, the entry's `shown_hash` (the pause lists
one per call); a blanket `decision_type`, the calls the last pause sent for the task listed, at the
versions it listed (`shown`, agentlink.runs.note_shown), never a call pending since. Sync."""
from dataclasses import dataclass, field

from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from approvals import services
from approvals.deciders import routing, votes
from approvals.policy import calls
from approvals.models import Approval
from approvals.permissions import can_decide
from chat import services as chat_services

from .runs import HITL_EXTENSION

APPROVE, DENY, EDIT = "approve", "deny", "edit"
DECISION_TYPES = {"approve": APPROVE, "deny": DENY, "reject": DENY}
# seed 004's approval_response, and the Swift design's reply to the options its pause offers
# ("approve", "deny", "modify", with "modifications"): both spellings mean the same.
SEED_DECISIONS = {"approved": APPROVE, "denied": DENY, "modified": EDIT, "approve": APPROVE, "deny": DENY, "modify": EDIT}
EDITED_KEYS = ("modified_input", "modifications")  # seed 004's, the Swift design's
SHAPE_KEYS = ("decision", "decision_type", "decisions", "approvals", "answers")  # one per shape below
SHAPES = (
    'A data part holds {"decision_type": "approve"|"deny", "reason"?} (the calls the pause you were sent listed), '
    '{"decisions": [{"id", "decision_type", "shown_hash"?, "reason"?, "confirmation"?}]}, {"approvals": [{"id", '
    '"approved", "shown_hash"?, "rejection_reason"?}]} (tool_approval_response) or {"answers": [{"id", "answer"} | '
    '{"id", "decline": true, "reason"?}]} (ask_user_response), or {"type": "approval_response", "decision": "approved"|'
    '"denied"|"modified", "modified_input"?, "id"?, "reason"?} (the calls the pause you were sent listed, or the one named; '
    'also {"decision": "approve"|"deny"|"modify", "modifications"?, "reason"?}). '
    '"shown_hash" is the one the pause lists for the call.'
)


class Refused(Exception):
    """Nothing (or, for a race lost midway, only what the message says) was decided, and why."""

    def __init__(self, message: str, data: dict | None = None):
        super().__init__(message)
        self.message, self.data = message, data


@dataclass
class Decision:
    approval: Approval
    verb: str  # approve, deny, edit (approve these arguments instead) or answer
    reason: str = ""
    confirmation: str = ""
    value: object = None
    decline: bool = False
    shown_hash: str = ""  # the version the client was shown; "" when it named none


@dataclass
class Outcome:
    decided: int  # decisions and votes that stand
    left_alone: list[Approval]  # pending calls a blanket reply did not decide: its pause never listed them
    voted: list[Approval] = field(default_factory=list)  # approved, but a quorum not reached yet: still pending
    held: list[Approval] = field(default_factory=list)  # edited, the edit stored for another approver: still pending


def apply(*, conversation, user, message: pb.Message, pending: list[Approval], shown: dict[int, str]) -> Outcome:
    """Decide what `message` says about the `pending` approvals of the task, `shown` being what the
    last pause sent for it listed ({approval id: shown_hash}). Raises Refused, having decided
    nothing, when any of it cannot stand."""
    texts = [part.text for part in message.parts if part.WhichOneof("content") == "text"]
    data = data_of(message)
    if not data:
        text = "\n".join(texts).strip()
        if not text:
            raise Refused("The message has no text and no data part: nothing to decide. " + SHAPES)
        if unseen := _not_shown(pending, shown):
            # The chat's typed rules decide whatever is pending: not a call this client was never sent.
            raise Refused(f"{_names(unseen)} changed or came after the pause you were sent: read the task "
                          "again (GetTask) before replying. Nothing was decided.")
        chat_services.post_message(conversation=conversation, user=user, content=text, shown=shown)
        return Outcome(0, [])
    decisions, left_alone = _read(data, pending, conversation, shown)
    for decision in decisions:
        _check(decision, user)
    decided, voted, held = 0, [], []
    for decision in decisions:
        try:
            approval = _decide(decision, user)
        except services.AlreadyDecided as exc:
            raise Refused(_already(exc.approval) + _so_far(decided), _data(exc.approval)) from None
        except services.ArgumentsChanged:
            raise Refused(_changed(decision) + _so_far(decided)) from None
        except (services.DecisionError, calls.InvalidArguments, Approval.DoesNotExist) as exc:
            raise Refused(f"Approval #{decision.approval.pk}: {_sentence(exc or 'not found')}" + _so_far(decided)) from None
        decided += 1
        if approval.status == Approval.Status.PENDING and decision.verb == APPROVE:
            voted.append(approval)
        elif approval.status == Approval.Status.PENDING and decision.verb == EDIT:
            held.append(approval)
    return Outcome(decided, left_alone, voted, held)


def notice(outcome: Outcome) -> str:
    """What the reply says beside the task: the votes counted toward a quorum (those calls still
    wait), and the calls a blanket decision left alone."""
    counted = [
        f"Your approval of #{approval.pk} {approval.tool_call.name} is counted: {votes.summary(approval)}. "
        f"It is still pending: {approval.quorum - len(votes.counted(approval))} more must approve it."
        for approval in outcome.voted
    ]
    stored = [
        f"Your edit of #{approval.pk} {approval.tool_call.name} is stored: it makes the call stricter, so it still waits "
        "for an approver's decision."
        for approval in outcome.held
    ]
    return "\n".join(counted + stored + [left_alone_notice(outcome.left_alone)]).strip()


def left_alone_notice(left_alone: list[Approval]) -> str:
    """What the reply to a blanket decision says of the calls it did not decide."""
    if not left_alone:
        return ""
    return (f"Not decided: {_names(left_alone)}, pending since the pause you answered (it did not list "
            f"{'it' if len(left_alone) == 1 else 'them'}). Decide from the pause below.")


def refuse_decided(*, conversation, message: pb.Message) -> None:
    """For a task that no longer waits: name who decided first any call the message decides."""
    try:
        _read(data_of(message), [], conversation, {})
    except Refused as exc:
        if exc.data is not None:
            raise


def data_of(message: pb.Message) -> list:
    """The message's data parts, and kagent's HITL extension payload (its UI sends the decision in
    the message's metadata, beside a text part for people that is then not read as a decision)."""
    data = [MessageToDict(part.data) for part in message.parts if part.WhichOneof("content") == "data"]
    if message.HasField("metadata") and HITL_EXTENSION in message.metadata.fields:
        data.append(MessageToDict(message.metadata)[HITL_EXTENSION])
    return data


def _read(data: list, pending: list[Approval], conversation, shown: dict[int, str]) -> tuple[list[Decision], list[Approval]]:
    by_id = {approval.pk: approval for approval in pending}
    seen: dict[int, Decision] = {}
    left_alone: list[Approval] = []

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
        if len(keys := [key for key in SHAPE_KEYS if key in item]) > 1:  # which one it meant is anyone's guess
            raise Refused(f"A data part has one shape: this one has {', '.join(map(repr, keys))}. " + SHAPES)
        if item.get("type") == "approval_response" or isinstance(item.get("decision"), str):
            _read_seed_response(item, pending, shown, add, left_alone)
        elif "decision_type" in item:
            _blanket(_listed(pending, shown, left_alone), _verb(item["decision_type"]), shown, add,
                     reason=_text(item.get("reason")), confirmation=_text(item.get("confirmation")))
        elif "decisions" in item:
            for entry in _list(item["decisions"], "decisions"):
                add(entry.get("id"), _verb(entry.get("decision_type")), reason=_text(entry.get("reason")),
                    confirmation=_text(entry.get("confirmation")), shown_hash=_hash(entry))
        elif "approvals" in item:
            for entry in _list(item["approvals"], "approvals"):
                if not isinstance(entry.get("approved"), bool):
                    raise Refused('Each of "approvals" needs "approved": true or false.')
                add(entry.get("id"), APPROVE if entry["approved"] else DENY, reason=_text(entry.get("rejection_reason")),
                    confirmation=_text(entry.get("confirmation")), shown_hash=_hash(entry))
        elif item.get("type") == "ask_user_response" and isinstance(item.get("id"), str):
            _read_kagent_answers(item, by_id, add)
        elif "answers" in item:
            for entry in _list(item["answers"], "answers"):
                if entry.get("decline") is True:
                    add(entry.get("id"), "answer", decline=True, reason=_text(entry.get("reason")), shown_hash=_hash(entry))
                elif "answer" in entry:
                    add(entry.get("id"), "answer", value=entry["answer"], shown_hash=_hash(entry))
                else:
                    raise Refused('Each of "answers" needs "answer", or "decline": true.')
        else:
            raise Refused("That data part decides nothing. " + SHAPES)
    left_alone = [approval for approval in dict.fromkeys(left_alone) if approval.pk not in seen]
    if not seen and left_alone:
        raise Refused(f"The pause you were sent listed none of the pending calls: {_names(left_alone)} came after it. "
                      "Read the task again (GetTask) and decide what it lists. Nothing was decided.")
    if not seen:
        raise Refused("The message decides none of the pending calls. " + SHAPES)
    return list(seen.values()), left_alone


def _read_seed_response(item: dict, pending: list[Approval], shown: dict[int, str], add, left_alone: list) -> None:
    """Seed 004's `{"type": "approval_response", "decision", "modified_input"?}`: with "id", the one
    call it names; without, like a blanket decision_type, the calls the pause the client was sent
    listed. "modified" approves `modified_input` in place of one tool call's arguments (an edit,
    checked as every edit is)."""
    verb = SEED_DECISIONS.get(item.get("decision")) if isinstance(item.get("decision"), str) else None
    if verb is None:
        raise Refused('"decision" is "approved", "denied" or "modified". ("approve", "deny" and "modify" mean the same.)')
    given = [key for key in EDITED_KEYS if key in item]
    if len(given) > 1:
        raise Refused('"modified_input" and "modifications" are one field in two spellings: send one.')
    edited = item.get(given[0]) if given else None
    if verb == EDIT and not isinstance(edited, dict):
        raise Refused('"modified" needs "modified_input" (or "modifications"): the tool call\'s arguments as a JSON object.')
    if verb != EDIT and given:
        raise Refused(f'"{given[0]}" goes with "decision": "modified" only.')
    fields = {"reason": _text(item.get("reason")), "confirmation": _text(item.get("confirmation"))}
    if "id" in item:
        approval_id = _id(item["id"])
        add(approval_id, verb, value=edited, shown_hash=_hash(item) or shown.get(approval_id, ""), **fields)
        return
    listed = _listed(pending, shown, left_alone)
    if verb != EDIT:
        _blanket(listed, verb, shown, add, **fields)
        return
    actions = [approval for approval in listed if approval.kind != Approval.Kind.QUESTION]
    if len(actions) != 1:
        raise Refused('"modified" changes one tool call: name it with "id" (the pause lists several, or none).')
    add(actions[0].pk, EDIT, value=edited, shown_hash=shown[actions[0].pk], **fields)


def _listed(pending: list[Approval], shown: dict[int, str], left_alone: list) -> list[Approval]:
    """The pending calls the pause the client was sent listed; those pending since go to `left_alone`."""
    listed = [approval for approval in pending if approval.pk in shown]
    left_alone.extend(approval for approval in pending if approval.pk not in shown)
    return listed


def _blanket(listed: list[Approval], verb: str, shown: dict[int, str], add, *, reason: str, confirmation: str) -> None:
    """A blanket approve or deny of what the pause listed: a question is declined by a deny, left
    alone by an approve (it is answered, not approved)."""
    for approval in listed:
        if approval.kind != Approval.Kind.QUESTION:
            add(approval.pk, verb, reason=reason, confirmation=confirmation, shown_hash=shown[approval.pk])
        elif verb == DENY:
            add(approval.pk, "answer", decline=True, reason=reason, shown_hash=shown[approval.pk])


def _read_kagent_answers(item: dict, by_id: dict[int, Approval], add) -> None:
    """kagent's `{"type": "ask_user_response", "id", "answers": [{"answer": [...]}] | null}`: `id` is
    the one the request gave (the questions' ids, in order), each answer a list of strings (one for a
    single answer); no answers declines them all."""
    ids = [_id(raw) for raw in item["id"].split(",")] if item["id"] else []
    answers = item.get("answers")
    if not ids:
        raise Refused('"id" is the one the ask_user_request gave.')
    if answers is None:
        for approval_id in ids:
            add(approval_id, "answer", decline=True)
        return
    if not isinstance(answers, list) or len(answers) != len(ids) or not all(
        isinstance(entry, dict) and isinstance(entry.get("answer"), list) for entry in answers
    ):
        raise Refused(f'"answers" lists one {{"answer": [...]}} per question: {len(ids)} here.')
    for approval_id, entry in zip(ids, answers):
        approval = by_id.get(approval_id)
        multiple = approval is not None and approval.question.get("type") == "multi_choice"
        value = entry["answer"] if multiple else ", ".join(str(v) for v in entry["answer"])
        add(approval_id, "answer", value=value)


def _check(decision: Decision, user) -> None:
    """Refuse, before anything is decided, what the decision service would refuse."""
    approval = decision.approval
    label = f"Approval #{approval.pk}"
    is_question = approval.kind == Approval.Kind.QUESTION
    if decision.verb == "answer" and not is_question:
        raise Refused(f"{label} is a tool call, not a question: approve or deny it.")
    if decision.verb != "answer" and is_question:  # a question is answered or declined, never approved or denied
        raise Refused(f'{label} is a question: answer it with {{"answers": [{{"id": {approval.pk}, "answer": …}}]}}, '
                      f'or decline it with {{"answers": [{{"id": {approval.pk}, "decline": true}}]}}.')
    if decision.verb == EDIT and approval.kind != Approval.Kind.ACTION:
        raise Refused(f"{label} is a plan: approve or deny it; only a tool call's arguments are modified.")
    approving = decision.verb in (APPROVE, EDIT) or (decision.verb == "answer" and not decision.decline)
    if not can_decide(user, approval, approve=approving):
        if routing.asks_only(user):
            raise Refused(f"{label}: {routing.ASKING_TOKEN} Nothing was decided.")
        if approval.route_id is not None:
            raise Refused(f"{label} is routed: only members of its approver groups decide it, never its requester.")
        raise Refused(f"{label} needs an approver other than the requester (four eyes).")
    if decision.verb in (APPROVE, EDIT) and services.needs_step_up(approval):
        raise Refused(f"{label}: {services.STEP_UP} Nothing was decided; you may still deny it.")
    if decision.verb in (APPROVE, EDIT) and approval.confirmation_required and decision.confirmation.strip() != approval.confirmation_hint:
        raise Refused(f'{label} is critical: approve it with "confirmation": "{approval.confirmation_hint}".')
    try:
        services.check_decidable(approval.pk, user, approve=approving, shown_hash=decision.shown_hash)
    except services.ArgumentsChanged:
        raise Refused(_changed(decision) + " Nothing was decided.") from None
    except services.AlreadyDecided as exc:
        raise Refused(_already(exc.approval) + " Nothing was decided.", _data(exc.approval)) from None
    except (services.DecisionError, Approval.DoesNotExist) as exc:
        raise Refused(f"{label}: {_sentence(exc or 'not found')} Nothing was decided.") from None


def _decide(decision: Decision, user) -> Approval:
    approval, via = decision.approval, Approval.Via.A2A
    if decision.verb == "answer":
        return services.answer(
            approval.pk, user=user, via=via, shown_hash=decision.shown_hash,
            value=decision.value, decline=decision.decline, reason=decision.reason,
        )
    if decision.verb == EDIT:
        return services.approve_edited(
            approval.pk, user=user, arguments=decision.value, via=via, shown_hash=decision.shown_hash,
            confirmation=decision.confirmation,
        )
    return services.decide(
            approval.pk, user=user, approve=decision.verb == APPROVE, via=via, shown_hash=decision.shown_hash,
            reason=decision.reason, confirmation=decision.confirmation,
        )


def _not_shown(pending: list[Approval], shown: dict[int, str]) -> list[Approval]:
    """The pending calls the last pause sent did not list, or listed at another version."""
    return [approval for approval in pending if shown.get(approval.pk) != approval.shown_hash]


def _names(approvals: list[Approval]) -> str:
    return ", ".join(
        f"#{a.pk}" + ("" if a.kind == Approval.Kind.QUESTION else f" {a.tool_call.name}") for a in approvals
    )


def _changed(decision: Decision) -> str:
    approval = decision.approval
    if decision.shown_hash:
        return (f"Approval #{approval.pk}: the call changed since the version you decided on (it was edited): read the "
                "task again and decide with the shown_hash it lists now.")
    return (f"Approval #{approval.pk}: the call changed since it was requested (it was edited): approve it by id with "
            'the "shown_hash" the pause lists for it, having read the edit.')


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


def _sentence(error) -> str:
    text = str(error).strip()
    return text if text.endswith((".", "?", "!")) else f"{text}."


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


def _hash(entry: dict) -> str:
    value = entry.get("shown_hash", "")
    if not isinstance(value, str) or len(value) > 128:
        raise Refused('"shown_hash" is the string the pause lists for the call.')
    return value


def _text(value) -> str:
    return value.strip()[:2000] if isinstance(value, str) else ""
