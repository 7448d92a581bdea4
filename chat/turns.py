"""A model's turn, from its calls to stored rows: each call validated, gated (with its preview) and
screened by the rules before the turn's transaction (check_calls), then stored with its approvals
inside it (store_turn). The loop (chat.loop) does the rest of the step."""
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from approvals.deciders import routing
from approvals.policy import rules, shadow
from approvals.models import Approval, ShadowVerdict

from . import planned
from .gating import (
    MAX_RAW_ARGUMENTS, GatedCall, automatic_decision, explained, gate_call, hold, parse_arguments, request, rule_call, screen,
)
from .llm import ModelTurn
from .messages import append_message, set_loaded_calls
from .models import Conversation, Message, ToolCall
from .tools import ToolArgumentsError, registry

MAX_CALL_ID = 200  # ToolCall.call_id's length

Status = ToolCall.Status
Happened = ShadowVerdict.Happened


class Checked(NamedTuple):
    """A call of the turn, checked before the turn's transaction: gated, and for a gated action what
    the rules say of it and what its card would offer to remember."""

    call: ToolCall
    gated: GatedCall | None
    screening: rules.Screening | None = None
    suggestion: dict | None = None
    route: object = None  # the approvals.models.Route that says who approves it, if any
    shadows: tuple = ()  # the shadow rules of its scopes (approvals.policy.shadow), for an action


def check_calls(conversation: Conversation, turn: ModelTurn) -> list[Checked]:
    """Each of the turn's calls, unsaved, validated, gated (with its preview) and screened by the
    rules (an action the policy runs, too: a deny or ask rule may hold it), under an id unique in its turn."""
    checked = []
    live_rules = live_routes = None  # read once a turn, when its first action needs them
    shadow_rules: tuple = ()
    plan = unread = object()  # the approved plan holding the conversation (chat.planned), read likewise
    seen_ids: set[str] = set()
    for position, model_call in enumerate(turn.tool_calls):
        call_id = _unique_call_id(model_call.call_id, position, seen_ids)
        seen_ids.add(call_id)
        call = ToolCall(
            position=position,
            call_id=call_id,
            name=model_call.name[:200],
            raw_arguments=model_call.raw_arguments[:MAX_RAW_ARGUMENTS],
        )
        gated = _check_call(call, model_call.raw_arguments, conversation)
        if gated is None or gated.kind != Approval.Kind.ACTION:
            checked.append(Checked(call, gated))
            continue
        if live_rules is None:
            live_rules, shadow_rules = rules.applicable(conversation, recently_expired=True, shadows=True)
            shadow_rules = tuple(shadow_rules)
        plan = planned.holding(conversation) if plan is unread else plan
        if planned.outside(call, gated, plan):
            gated = planned.hold(call, gated, conversation, plan)  # a person decides it, whatever the rules say
            call.is_gated, call.status = True, Status.PENDING_APPROVAL
        if not gated.gate.required:
            gated = hold(call, gated, conversation, live_rules)  # a deny or ask rule may hold what the policy runs
            if not gated.gate.required:
                checked.append(Checked(call, gated, shadows=shadow_rules))
                continue
            call.is_gated, call.status = True, Status.PENDING_APPROVAL
        live_routes = routing.live_routes(conversation.agent_id) if live_routes is None else live_routes
        screening, suggestion, route = screen(call, gated, conversation, live_rules, live_routes)
        checked.append(Checked(call, gated, screening, suggestion, route, shadow_rules))
    return checked


def store_turn(conversation: Conversation, turn: ModelTurn, checked: list[Checked]) -> tuple[Message, bool]:
    """Store the assistant message and its checked calls, each gated call with its approval (or
    decided at once by a rule), in the caller's locked transaction. Also says whether what is left
    of the turn is for a human: some call waits for a decision, and none is to run or settle now."""
    waits = False
    settles_now = False
    with transaction.atomic(savepoint=False):
        message = append_message(conversation, role=Message.Role.ASSISTANT, content=turn.text, push=False, locked=True)
        calls, tried = [], []
        for call, gated, screening, suggestion, route, shadows in checked:
            call.message = message
            applied = rules.apply(screening) if screening is not None else None
            if gated is not None and gated.rules_only and not applied.effect:
                gated = None  # its rules had no use left: it runs, as the policy says
                call.is_gated, call.status = False, Status.APPROVED
            call.save()
            calls.append(call)
            if gated is not None and gated.gate.required:
                automatic = automatic_decision(applied) if applied is not None else None
                explanation = explained(gated, screening, applied or rules.Applied(), route, conversation)
                call.approval = request(
                    call, gated, conversation, suggestion=None if automatic else suggestion, route=route, applied=applied,
                    explanation=explanation,
                )
                if automatic is not None:
                    automatic(call.approval)
                    settles_now = True
                else:
                    waits = True
            elif call.status not in ToolCall.FINISHED:
                settles_now = True  # not gated: it runs at once
            if shadows:
                tried += _shadowed(call, gated, applied, route, conversation, shadows)
        shadow.record(tried)
        set_loaded_calls(message, calls)
    return message, waits and not settles_now


def _shadowed(call: ToolCall, gated: GatedCall | None, applied, route, conversation: Conversation, shadows: tuple) -> list:
    """What the shadow rules would have done to the stored call, beside what the gate and the live
    rules did (approvals.policy.shadow), matched as the live rules match it (rule_call)."""
    if gated is None or gated.kind != Approval.Kind.ACTION:
        return []
    effect = applied.effect if applied is not None else ""
    if not gated.gate.required:
        happened = Happened.RAN
    elif effect == rules.ALLOW:
        happened = Happened.ALLOWED
    elif effect in (rules.DENY, rules.REPEAT):
        happened = Happened.DENIED
    elif effect == rules.ASK or gated.rules_only or gated.outside_plan:
        happened = Happened.HELD
    else:
        happened = Happened.ASKED
    candidate = rule_call(call, gated, conversation, routed=route is not None)
    return shadow.verdicts(
        list(shadows), candidate, gated=call.is_gated, happened=happened, tool_call_id=call.pk, conversation_id=conversation.pk,
    )


def _unique_call_id(call_id: str, position: int, seen: set[str]) -> str:
    """The model's id for a call, as the column holds it (at most 200 characters) and unique in its
    turn: a provider bug may repeat one (["x_2", "x", "x"]), and each call still gets one result."""
    unique = call_id[:MAX_CALL_ID]
    suffix = 0
    while unique in seen:
        suffix += 1
        tail = f"_{position}" + (f"_{suffix}" if suffix > 1 else "")
        unique = call_id[: MAX_CALL_ID - len(tail)] + tail
    return unique


def _check_call(call: ToolCall, raw: str, conversation: Conversation) -> GatedCall | None:
    """Validate and gate one call, setting its status: failed (with an error for the model, and no
    gate), approved (not gated: runs at once) or pending approval."""
    agent = conversation.agent
    spec = registry.find(agent, call.name)
    if spec is None:
        available = ", ".join(agent.tools) or "none"
        call.status, call.error = Status.FAILED, f"Unknown tool {call.name!r}. Available tools: {available}."
        call.finished_at = timezone.now()
        return None
    try:
        call.arguments = parse_arguments(spec, raw)
    except ToolArgumentsError as exc:
        call.status, call.error, call.finished_at = Status.FAILED, str(exc), timezone.now()
        return None
    gated = gate_call(spec, call.arguments, conversation)
    call.arguments_hash = gated.arguments_hash
    call.is_gated = gated.gate.required
    call.status = Status.PENDING_APPROVAL if call.is_gated else Status.APPROVED
    return gated
