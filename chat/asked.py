"""Calls a tool asks a human to decide before it goes on (chat.tools.InputRequired's `actions`: a
remote agent's calls that wait for a human there). Each is a call of its own in the turn, `asked_by`
the tool's call (never shown to the model, never run here), gated by this agent's policy, rules and
routes exactly as a call from outside is (chat.outside): four eyes, critical confirmation, allow and
deny rules, its card with the tool's preview. One `InputRequired` is one round; the tool resumes
once every call of the round is settled, with what was decided of each, in their order."""
from dataclasses import replace
from typing import NamedTuple

from approvals.deciders import routing
from approvals.pauses import questions
from approvals.policy import explain, rules
from approvals.models import Approval
from approvals.policy.gate import RISKS, check
from approvals.services import request_approval
from core.visible import reveal

from .gating import GatedCall, automatic_decision, confirmation_hint, explained, request, screen, tool_context
from .models import Conversation, ToolCall
from .tools import OutsideTool, Preview, arguments_hash

Status = ToolCall.Status
ROUND = "~input-"  # a child's call_id: <the call's id>~input-<round>[/<index>]
MAX_ACTIONS = 20
MAX_PREVIEW = 20_000
PREVIEW_KINDS = ("diff", "email", "file", "fetch", "text")


class Checked(NamedTuple):
    """One call of the round, checked before the round's transaction (the rules read, the preview built)."""

    call: ToolCall
    gated: GatedCall | None = None
    screening: rules.Screening | None = None
    suggestion: dict | None = None
    route: object = None
    question: dict | None = None


def check_round(call: ToolCall, conversation: Conversation, actions: list[dict]) -> list[Checked]:
    """The round's calls, unsaved, each gated and screened as chat.outside gates a request: read
    before any write transaction, as the loop reads its own calls' rules."""
    live_rules = rules.applicable(conversation, recently_expired=True)
    live_routes = routing.live_routes(conversation.agent_id)
    number = call.input_requests.count() + 1
    checked = []
    for index, action in enumerate(actions[:MAX_ACTIONS], start=1):
        child = ToolCall(call_id=f"{call.call_id[:150]}{ROUND}{number}/{index}", asked_by=call, is_gated=True, status=Status.PENDING_APPROVAL)
        if action.get("question") is not None:
            child.name = call.name
            checked.append(Checked(child, question=action["question"]))
            continue
        child.name = str(action.get("name") or call.name)[:200]
        child.arguments = action.get("arguments") if isinstance(action.get("arguments"), dict) else {}
        child.arguments_hash = arguments_hash(child.arguments)
        gated = _gate(child, action, conversation)
        screening, suggestion, route = screen(child, gated, conversation, live_rules, live_routes)
        checked.append(Checked(child, gated, screening, suggestion, route))
    return checked


def store_round(call: ToolCall, conversation: Conversation, checked: list[Checked], *, approver_required: bool) -> None:
    """Save the round's calls and their approvals (a rule may decide one at once), in the caller's
    transaction. `approver_required`: the asking call needed four eyes, so its questions do too."""
    turn = call.message
    position = turn.tool_calls.count()
    for offset, (child, gated, screening, suggestion, route, question) in enumerate(checked):
        child.message, child.position = turn, position + offset
        child.save()
        if question is not None:
            child.approval = request_approval(
                tool_call_id=child.pk, conversation_id=conversation.pk, requested_by_id=conversation.owner_id,
                reason=f"{call.name} asks for input before it can finish.", risk="low", arguments_hash=child.arguments_hash,
                approver_required=approver_required, timeout_seconds=conversation.agent.approval_timeout_seconds,
                kind=Approval.Kind.QUESTION, request=question,
            )
            continue
        applied = rules.apply(screening)
        automatic = automatic_decision(applied)
        child.approval = request(
            child, gated, conversation, suggestion=None if automatic else suggestion, route=route, applied=applied,
            explanation=explained(gated, screening, applied, route, conversation),
        )
        if automatic is not None:
            automatic(child.approval)


def _gate(child: ToolCall, action: dict, conversation: Conversation) -> GatedCall:
    """Always asked (the tool's side asked a human), at the risk of a call from outside (medium) or
    the one the tool's side says if higher: it may raise ours, never lower it (a claimed "low"
    would slip past our routes, four eyes and auto-approve limit). Never one of our tools, whatever
    its name; by whom, this agent's policy says (four eyes, timeout)."""
    spec = OutsideTool.named(child.name)
    if action.get("risk") in RISKS and RISKS.index(action["risk"]) > RISKS.index(spec.risk):
        spec = replace(spec, risk=action["risk"])
    spec = replace(spec, needs_approval=True)
    gate = check(spec, child.arguments, conversation.agent, tool_context(conversation))
    reason = str(action.get("reason") or "").strip()[:2000]
    gate = replace(gate, reason=f"{gate.reason} {reason}" if reason else gate.reason)  # ours first: the card folds a routine one
    hint = confirmation_hint(spec, child.arguments, child.arguments_hash) if gate.risk == "critical" else ""
    steps = explain.gate(spec, conversation.agent, gate, child.arguments)
    return GatedCall(child.arguments, child.arguments_hash, gate, _preview(action.get("preview")), hint, steps=tuple(steps), spec=spec)


def _preview(preview) -> Preview | None:
    if not isinstance(preview, dict) or not isinstance(preview.get("text"), str):
        return None
    kind = preview.get("kind") if preview.get("kind") in PREVIEW_KINDS else "text"
    return Preview(kind, reveal(preview["text"][:MAX_PREVIEW]))  # shown as ours are: invisible characters spelled out


def question_of(text: str, asked: dict) -> dict:
    """A question the tool relays (its words, its type), as approvals.pauses.questions stores it."""
    fields = {key: asked.get(key) for key in ("type", "options", "min", "max", "required") if asked.get(key) is not None}
    try:
        return questions.normalize({"question": text, **fields})
    except questions.InvalidQuestion:
        return questions.normalize({"question": text})


def latest_round(call: ToolCall) -> list[ToolCall]:
    """The calls of the newest round the call asked (one question, or the calls of one InputRequired)."""
    newest = call.input_requests.select_related("approval__decided_by").order_by("-pk").first()
    if newest is None:
        return []
    head, separator, tail = newest.call_id.rpartition(ROUND)
    if "/" not in tail:
        return [newest]
    stem = head + separator + tail.split("/")[0]
    return list(call.input_requests.select_related("approval__decided_by").filter(call_id__startswith=stem + "/").order_by("position"))


def is_decision_round(round_: list[ToolCall]) -> bool:
    return bool(round_) and "/" in round_[0].call_id.rpartition(ROUND)[2]


def answer(round_: list[ToolCall]) -> dict:
    """What was decided of each call of the round, in order, as the tool's `resume` takes it."""
    return {"action": "decide", "decisions": [_decision(child) for child in round_]}


def _decision(child: ToolCall) -> dict:
    approval = child.approval
    who = approval.decided_by.get_username() if approval.decided_by else "the system"
    if approval.kind == Approval.Kind.QUESTION:
        if approval.status == Approval.Status.ANSWERED:
            return {"decision": "answer", "value": approval.answer, "by": who}
        return {"decision": "decline" if approval.status == Approval.Status.DECLINED else str(approval.status), "reason": approval.rejection_reason, "by": who}
    if approval.status == Approval.Status.APPROVED:
        return {"decision": "approve", "arguments": approval.edited_arguments if approval.is_edited else None, "by": who}
    if approval.status == Approval.Status.REJECTED:
        return {"decision": "reject", "reason": approval.rejection_reason or child.result, "by": who}
    return {"decision": str(approval.status), "reason": child.result, "by": who}  # expired or cancelled


def passed_on(call: ToolCall) -> str:
    """The result of an approved call of a round once `call`, whose tool asked, goes on with the decision."""
    return f"Approved: the decision was passed on to {call.name}, which had asked for it."
