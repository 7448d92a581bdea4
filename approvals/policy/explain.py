"""Why a call was asked or decided at once: its decision path, step by step, built as it is applied
(the gate, the route, each rule considered, the repeat check, the outcome) and stored on the approval
when it is made (Approval.explanation: [{"step", "outcome", "detail"}]). Pure: no database."""
from core.visible import has_invisible

from . import memory, rules as rules_

BARRIERS = {
    rules_.CRITICAL: "critical: a critical call always needs a human",
    rules_.ROUTED: "routed: a route names who approves this call",
    rules_.FOUR_EYES: "four eyes: an approver other than the owner must decide",
    rules_.STEP_UP: "step-up: approving a call this risky takes the approver's passkey",
    rules_.OVER_MAX_RISK: "over max risk: riskier than the agent lets a rule approve",
    rules_.INVISIBLE: "invisible characters: what a human sees must be what runs",
    rules_.OUTSIDE_PLAN: "outside the plan: no step of the approved plan calls this tool, so a person decides",
}
ANOTHER_FIRST = "another rule first"


def step(name: str, outcome: str, detail: str = "") -> dict:
    return {"step": name, "outcome": outcome, "detail": detail}


def gate(spec, agent, gate_, arguments: dict, *, failed: bool = False, caller_risk: str | None = None) -> list[dict]:
    """The gate's steps: whether the policy asks a human, and why (the agent's lists, the tool's flag
    or gate function); for a call it asks about, its risk, invisible characters and four eyes."""
    name = spec.name
    if failed:
        why = f"{name}'s gate function failed: a human decides (fails closed). {gate_.reason}"
    elif getattr(spec, "pause", ""):
        why = f"{name} asks a human a {spec.pause}: it always waits."
    elif agent.all_tools_need_approval:
        why = f"{agent.name} needs approval for every tool call (the agent's setting)."
    elif name in agent.require_approval:
        why = f"{agent.name}'s require_approval list names {name}."
    elif callable(spec.needs_approval):
        said = "asks a human" if gate_.required else "lets it run"
        why = f"{name}'s gate function {said}" + (f": {gate_.reason}" if gate_.reason else ".")
    elif gate_.required:
        why = f"{name}'s flag: it always asks a human."
    elif getattr(getattr(spec, "server", None), "trusted", False):
        why = f"{name} runs without a human: an admin trusts its server, which marks it read-only."
    else:
        why = f"{name}'s flag: it runs without a human."
    steps = [step("gate", "asks a human" if gate_.required else "runs without a human", why)]
    if getattr(spec, "pause", ""):
        return steps
    return steps + weighed(gate_, agent, spec, arguments, caller_risk=caller_risk) if gate_.required else steps


def weighed(gate_, agent, spec, arguments: dict, *, caller_risk: str | None = None) -> list[dict]:
    """Risk, invisible characters and four eyes, for a call that waits for a human."""
    steps = []
    if has_invisible(arguments) or has_invisible(spec.name):
        steps.append(step("invisible characters", "found", "Shown escaped; the call counts as one level riskier and no rule approves it."))
    if caller_risk:
        steps.append(step("risk", gate_.risk, f"The caller declared {caller_risk} risk (it may raise the tool's {spec.risk}, never lower it)."))
    else:
        steps.append(step("risk", gate_.risk, f"{spec.name}'s risk is {spec.risk}." if gate_.risk == spec.risk else f"Raised from {spec.risk}."))
    limit = agent.owner_max_risk
    if gate_.approver_required:
        steps.append(step("four eyes", "required", f"{gate_.risk} risk is above the owner's limit ({limit}): an approver other than the owner decides."))
    else:
        steps.append(step("four eyes", "not required", f"{gate_.risk} risk is within the owner's limit ({limit})."))
    return steps


def edit(by: str, checked) -> list[dict]:
    """An edit checked again as the model's call was: who edited, and the gate of the new version."""
    steps = [step("edit", f"by {by}", "The arguments changed: the tool's schema, the gate and the rules met the new version.")]
    steps.append(step("gate", "asks a human", checked.reason or "The call was already waiting for a human."))
    steps.append(step("risk", checked.risk, "The stricter of the request's risk and the edit's."))
    steps.append(step("four eyes", "required" if checked.approver_required else "not required", ""))
    return steps


def route(route_) -> dict:
    if route_ is None:
        return step("route", "none", "No route of the agent matches: the owner or any approver decides.")
    quorum = f"; {route_.quorum} approvals needed" if route_.quorum > 1 else ""
    return step("route", f"route #{route_.pk}", f"Matches {route_.tool} from {route_.min_risk} risk: its approver groups decide{quorum}.")


def rules(screening: "rules_.Screening", applied: "rules_.Applied", *, agent_name: str = "") -> list[dict]:
    """Each rule of the call's tool in the order applied (deny, the repeat check, ask, allow), with
    why it decided or was skipped."""
    steps = []
    by_effect = {effect: [] for effect in (rules_.DENY, rules_.ASK, rules_.ALLOW)}
    for rule, unmet in screening.considered:
        by_effect.setdefault(rule.effect, []).append((rule, unmet))
    if not screening.considered and not screening.expired and not screening.asks:
        steps.append(step("rules", "none", "No live rule of this conversation's scopes names this tool."))
    for rule in screening.expired:
        when = rule.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        steps.append(step(_name(rule), "skipped", f"expired at {when}."))
    for rule, unmet in by_effect[rules_.DENY]:
        steps.append(_rule_step(rule, unmet, screening, applied, "denied the call"))
    if screening.repeat_checked:
        steps.append(_repeat(screening, applied))
    for rule, unmet in by_effect[rules_.ASK]:
        steps.append(_rule_step(rule, unmet, screening, applied, "holds the call for a human (ask)"))
    for asked in (a for a in screening.asks if isinstance(a, rules_.AlwaysAsk)):
        detail = f"{agent_name or 'The agent'} always asks when {asked.argument} fits `{asked.pattern}`"
        if applied.asked == asked:
            steps.append(step("always ask", "applied", f"{detail}: a human decides."))
        else:
            steps.append(step("always ask", "skipped", f"{detail}; {_first(applied)}."))
    for rule, unmet in by_effect[rules_.ALLOW]:
        steps.append(_allow_step(rule, unmet, screening, applied))
    return steps


def _name(rule) -> str:
    return f"rule #{rule.pk} ({rule.effect} {rule.tool})"


def _unmet(rule, unmet: str) -> dict:
    if unmet == memory.AFTER:
        return step(_name(rule), "skipped", f"conditions not met: {memory.after_unmet(rule)}.")
    condition = (rule.arguments or {}).get(unmet)
    wanted = condition.get("regex") if isinstance(condition, dict) else condition
    return step(_name(rule), "skipped", f"conditions not met: {unmet} does not fit `{wanted}` (or the call has no {unmet}).")


def _rule_step(rule, unmet, screening, applied, did: str) -> dict:
    if unmet is not None:
        return _unmet(rule, unmet)
    if applied.rule is not None and applied.rule.pk == rule.pk:
        return step(_name(rule), "applied", f"Matched: {did}.")
    if rule.pk in screening.spent:
        return step(_name(rule), "skipped", f"Matched, but {screening.spent[rule.pk]}.")
    return step(_name(rule), "skipped", f"Matched; {_first(applied)}.")


def _allow_step(rule, unmet, screening, applied) -> dict:
    if unmet is not None:
        return _unmet(rule, unmet)
    if not screening.gated:
        if applied.effect:
            return step(_name(rule), "skipped", f"Matched; {_first(applied)}.")
        return step(_name(rule), "skipped", "Matched; not needed: the policy runs the call without a human.")
    if screening.barrier:
        return step(_name(rule), "skipped", f"Matched, but never for this call: {BARRIERS[screening.barrier]}.")
    return _rule_step(rule, unmet, screening, applied, "approved the call")


def _first(applied) -> str:
    """Which decided before a rule that matched too."""
    if applied.effect == rules_.REPEAT:
        return f"{ANOTHER_FIRST}: the repeat check rejected the call"
    if applied.asked is not None and applied.rule is None:
        return f"{ANOTHER_FIRST}: an always-ask pattern holds the call"
    if applied.rule is not None:
        return f"{ANOTHER_FIRST}: rule #{applied.rule.pk} ({applied.effect})"
    return "no use taken"


def _repeat(screening, applied) -> dict:
    earlier = screening.repeats
    if earlier is None:
        return step("repeat check", "no recent rejection", "No human rejected this same call in this conversation just now.")
    original = earlier.repeat_of or earlier
    if applied.effect == rules_.REPEAT:
        return step("repeat check", "rejected again", f"Approval #{original.pk} rejected this same call just now: rejected again without asking.")
    return step("repeat check", "skipped", f"Approval #{original.pk} rejected this same call just now; {_first(applied)}.")


def outcome(applied: "rules_.Applied", *, gated: bool, by_policy: bool = False) -> dict:
    """The last step: what came of it."""
    if applied.effect == rules_.DENY:
        return step("outcome", "rejected", f"Rejected at once by rule #{applied.rule.pk}.")
    if applied.effect == rules_.REPEAT:
        return step("outcome", "rejected", "Rejected at once: a repeat of a human's rejection.")
    if applied.effect == rules_.ALLOW:
        return step("outcome", "approved", f"Approved at once by rule #{applied.rule.pk}.")
    if applied.effect == rules_.ASK:
        return step("outcome", "waits for a human", "Asked because of " + (f"rule #{applied.rule.pk}." if applied.rule else "the agent's always-ask pattern."))
    if by_policy:
        return step("outcome", "approved", "Approved by the agent's policy: it asks no human for this call.")
    if not gated:
        return step("outcome", "runs", "No rule holds it: it runs without a human.")
    return step("outcome", "waits for a human", "No rule decided it.")


def path(gate_steps: list[dict], screening, applied, route_=None, *, agent_name: str = "", by_policy: bool = False, routed: bool = True) -> list[dict]:
    """The whole decision path of a call, in the order applied."""
    steps = list(gate_steps)
    if routed:
        steps.append(route(route_))
    if screening is not None:
        steps += rules(screening, applied, agent_name=agent_name)
    elif by_policy:
        steps.append(step("rules", "none", "No deny or ask rule holds this call."))
    return steps + [outcome(applied, gated=screening.gated if screening is not None else True, by_policy=by_policy)]


def summary(approval) -> list[dict]:
    """An approval stored before explanations were kept, or a question or plan: what its row says."""
    steps = [step("gate", "asks a human", approval.reason)]
    if approval.kind == "action":
        steps.append(step("risk", approval.risk, ""))
        steps.append(step("four eyes", "required" if approval.approver_required else "not required", ""))
    if approval.route_id:
        steps.append(step("route", f"route #{approval.route_id}", ""))
    if approval.decided_via == "rule" and approval.rule_id:
        steps.append(step("outcome", approval.status, f"Decided at once by rule #{approval.rule_id}."))
    elif approval.decided_via == "repeat":
        steps.append(step("outcome", approval.status, "Rejected at once: a repeat of a human's rejection."))
    elif approval.decided_via == "policy":
        steps.append(step("outcome", approval.status, "Approved by the agent's policy."))
    return steps


def steps_of(approval) -> list[dict]:
    """What GET /api/approvals/{id}/explain and the card's "Why?" show."""
    stored = approval.explanation
    if isinstance(stored, list) and stored:
        return [step(str(s.get("step", "")), str(s.get("outcome", "")), str(s.get("detail", ""))) for s in stored if isinstance(s, dict)]
    return summary(approval)


def timeout(action: str, refused: str = "") -> dict:
    """What the deadline will do if no one decides: shown with the call's decision path."""
    if refused:
        return step("timeout", "expires", f"Its agent approves such calls at their deadline, but {refused}: it expires instead.")
    if action == "reject":
        return step("timeout", "rejects", "If no one decides by its deadline, it is rejected, and the model is told why.")
    return step("timeout", "approves", "If no one decides by its deadline, it is approved and runs: a low-risk call anyone may approve.")
