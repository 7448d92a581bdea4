"""Plans that hold (the Swift design's plan approval): once a person approves a plan whose steps
name their tools, a call of a tool that no approved step names waits for a person, whatever the
agent's policy and its rules say, its card naming the plan. The plan holds the conversation from
its approval until the user writes again (a new instruction) or another plan is approved."""
from dataclasses import replace

from approvals.models import Approval
from approvals.pauses import plans
from approvals.policy import explain, gate as policy, timeouts

from .gating import GatedCall, confirmation_hint, preview_of, tool_context
from .models import Conversation, Message, ToolCall


def holding(conversation: Conversation) -> Approval | None:
    """The approved plan that holds the conversation's calls now, if any: the newest plan approved
    since the user last wrote, if its steps name tools. A newer plan still waiting, rejected or
    expired lifts nothing: the model cannot end a hold by proposing another plan."""
    # A typed "yes" that decided a call is not a new instruction (it is not in the model's context).
    since = (
        conversation.messages.filter(role=Message.Role.USER, in_model_context=True).order_by("-position")
        .values_list("position", flat=True).first()
    )
    newest = (
        Approval.objects.filter(
            conversation=conversation, kind=Approval.Kind.PLAN, status=Approval.Status.APPROVED,
            tool_call__message__position__gt=since if since is not None else -1,
        ).order_by("-decided_at", "-pk").first()
    )
    return newest if newest is not None and plans.names_tools(newest.plan) else None


def outside(call: ToolCall, gated: GatedCall, plan: Approval | None) -> bool:
    """Whether `plan` holds this action and no approved step of it calls its tool."""
    return plan is not None and gated.kind == Approval.Kind.ACTION and call.name not in plans.approved_tools(plan.plan, plan.answer or {})


def why(call: ToolCall, plan: Approval) -> str:
    return (f"Outside the approved plan “{plan.plan['title']}” (approval #{plan.pk}): none of its approved steps calls "
            f"{call.name}, so a person decides, whatever the rules say.")


def hold(call: ToolCall, gated: GatedCall, conversation: Conversation, plan: Approval) -> GatedCall:
    """The call gated as the policy gates a call it asks about (its risk, four eyes, its timeout, its
    preview and hint), with the plan named in its reason and its explanation; no allow rule
    approves it, nor its deadline."""
    spec, agent = gated.spec, conversation.agent
    reason = why(call, plan)
    if gated.gate.required:
        gate = replace(gated.gate, reason=f"{reason} {gated.gate.reason}".strip())
    else:
        asked = policy.check(replace(spec, needs_approval=True, risk=gated.gate.risk), gated.arguments, agent)
        gate = replace(asked, reason=reason)
    if gate.timeout_action == timeouts.APPROVE:
        gate = replace(gate, timeout_action=timeouts.EXPIRE)  # a person decides it: not the clock
    hint = gated.confirmation_hint or (confirmation_hint(spec, gated.arguments, gated.arguments_hash) if gate.risk == "critical" else "")
    preview = gated.preview or preview_of(spec, gated.arguments, tool_context(conversation))
    steps = [*gated.steps, explain.step("plan", "outside its steps", reason)]
    if not gated.gate.required:
        steps += explain.weighed(gate, agent, spec, gated.arguments)
    return replace(
        gated, gate=gate, preview=preview, confirmation_hint=hint, annotations=spec.annotations, steps=tuple(steps),
        rules_only=False, outside_plan=True,
    )
