"""The rule simulator: what a rule, not yet saved, would have done to the last calls of its scope.

It replays the calls through the matching the live rules use (approvals.policy.rules: `matches`, `barrier`;
deny and ask meet every action, allow only a gated one), reads them in one bounded query (newest
first, at most MAX_CALLS, streamed in chunks) and writes nothing: no rule is saved and no use of any
rule is taken.

What the replay assumes: the rule had been live for the whole window (its expiry is in the future,
so it is not applied to the past); a `max_uses` rule would have decided the oldest matching calls and
been used up for the newer ones; an agent's `max_auto_approve_risk` is read as it is now."""
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from . import memory, rulemaking
from ..models import Approval, Rule
from .rules import CRITICAL, FOUR_EYES, INVISIBLE, OVER_MAX_RISK, ROUTED, STEP_UP, Call, barrier, matches

DEFAULT_DAYS = 30
MAX_DAYS = 366
MAX_CALLS = 10_000
CHUNK = 500
SAMPLES_PER_OUTCOME = 5

# Why a rule never decided a call it matched: an allow rule's barrier (approvals.policy.rules.barrier(), in
# the words approvals.policy.explain uses), or used up, or not gated.
USED_UP, NOT_GATED, AT_MOST = "used up", "not gated", "at most"
REASONS = {
    INVISIBLE: "invisible characters: hidden or direction-changing characters in the call",
    CRITICAL: "critical: a human always decides",
    ROUTED: "routed: the route's approvers decide",
    FOUR_EYES: "four eyes: an approver other than the requester decides",
    STEP_UP: "step-up: approving it takes the approver's passkey",
    OVER_MAX_RISK: "over max risk: riskier than the agent's max auto-approve risk",
    USED_UP: "used up: after its max uses",
    AT_MOST: "at most: it had decided as many calls as it may in the window",
    NOT_GATED: "not gated: it runs without asking, which an allow rule does not change",
}
ALLOW, DENY, ASK = "allow", "deny", "ask"
SAID = {ALLOW: "would allow", DENY: "would deny", ASK: "would ask a human"}


@dataclass(frozen=True)
class Sample:
    """One replayed call: its approval's id if it has one, else the call's own (`kind` says which)."""

    id: int
    kind: str  # "approval" or "call"
    outcome: str  # allow, deny, ask, or a reason of `never`
    tool: str
    tool_call_id: int
    conversation_id: object

    @property
    def said(self) -> str:
        """The outcome in words, for the page."""
        return SAID.get(self.outcome) or f"never: {self.outcome}"


@dataclass
class Simulation:
    would_allow: int = 0
    would_deny: int = 0
    would_ask: int = 0
    never: dict = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    replayed: int = 0  # calls read (at most MAX_CALLS)
    capped: bool = False  # the window held more calls than were read
    days: int = DEFAULT_DAYS

    @property
    def never_listed(self) -> list[tuple[str, str, int]]:
        """(reason, in words, count), in the order of REASONS."""
        return [(reason, said, self.never[reason]) for reason, said in REASONS.items() if reason in self.never]

    def as_contract(self) -> dict:
        """POST /api/rules/simulate's answer, exactly."""
        return {
            "would_allow": self.would_allow,
            "would_deny": self.would_deny,
            "would_ask": self.would_ask,
            "never": dict(self.never),
            "samples": [sample.id for sample in self.samples],
        }


def simulate_for(user, *, days=DEFAULT_DAYS, **fields) -> Simulation:
    """The simulation of the rule `user` asks for (the fields of POST /api/rules), checked exactly as
    making it would be (rulemaking.draft: ScopeNotAllowed, TargetNotFound, InvalidRule), never saved."""
    return simulate(rulemaking.draft(user, **fields), days=check_days(days))


def check_days(days) -> int:
    if days is None:
        return DEFAULT_DAYS
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise rulemaking.InvalidRule(f"`days` is a whole number from 1 to {MAX_DAYS}.")
    return days


def simulate(rule: Rule, *, days: int = DEFAULT_DAYS, now=None) -> Simulation:
    """Replay the scope's calls of the last `days` days, newest first, through `rule` alone."""
    now = now or timezone.now()
    result = Simulation(days=days)
    deciding: list[Sample] = []  # newest first: which of them a max_uses rule used up is settled at the end
    times: list = []  # when each of `deciding` was made: what an at_most rule decided is settled at the end too
    for row in _calls(rule, since=now - timedelta(days=days)).iterator(chunk_size=CHUNK):
        result.replayed += 1
        if result.replayed > MAX_CALLS:
            result.replayed, result.capped = MAX_CALLS, True
            break
        outcome = outcome_of(rule, row)
        if outcome is None:
            continue
        if rule.after and not memory.after_met(
            rule, conversation_id=row["message__conversation_id"], arguments=row["arguments"] if isinstance(row["arguments"], dict) else {},
            at=row["created_at"], before_call_id=row["pk"],
        ):
            continue  # its earlier call had not happened: the rule did not apply
        sample = Sample(
            id=row["approval__pk"] or row["pk"], kind="approval" if row["approval__pk"] else "call", outcome=outcome,
            tool=row["name"], tool_call_id=row["pk"], conversation_id=row["message__conversation_id"],
        )
        if outcome in (ALLOW, DENY, ASK):
            deciding.append(sample)
            times.append(row["created_at"])
        else:
            _count(result, sample)
    if rule.at_most:
        kept = list(reversed(memory.within_window(list(reversed(times)), rule.at_most)))
        deciding = [sample if ok else replace(sample, outcome=AT_MOST) for sample, ok in zip(deciding, kept)]
    if rule.max_uses is not None and len(deciding) > rule.max_uses:
        # Saved at the window's start, it would have decided the oldest matching calls.
        cut = len(deciding) - rule.max_uses
        deciding = [replace(sample, outcome=USED_UP) for sample in deciding[:cut]] + deciding[cut:]
    for sample in deciding:
        _count(result, sample)
    order = [ALLOW, DENY, ASK, *REASONS]
    result.samples.sort(key=lambda sample: order.index(sample.outcome))  # stable: newest first within each
    return result


def outcome_of(rule: Rule, row: dict) -> str | None:
    """What `rule` would have done to the call: allow, deny or ask; or why it never could (an allow
    on a call a human must decide anyway, or on one the policy runs without asking); None: no match.
    As approvals.policy.rules.screen: deny and ask meet every action, allow only a gated one."""
    routed = row["approval__route_id"] is not None
    call = Call(
        tool=row["name"],
        arguments=row["arguments"] if isinstance(row["arguments"], dict) else {},
        risk=row["approval__risk"] or "low",
        approver_required=bool(row["approval__approver_required"]) or routed,
        max_auto_approve_risk=row["message__conversation__agent__max_auto_approve_risk"],
        routed=routed,
        step_up_from_risk=row["message__conversation__agent__step_up_from_risk"],
    )
    return outcome(rule, call, gated=bool(row["is_gated"]))


def outcome(rule: Rule, call: Call, *, gated: bool) -> str | None:
    """What `rule` does to `call`: allow, deny, ask, a reason it never could, or None (no match). The
    one matching of the replay over history and of the shadow over live calls (approvals.policy.shadow)."""
    if not matches(rule, call):
        return None
    if rule.effect != Rule.Effect.ALLOW:
        return str(rule.effect)  # a deny rejects and an ask waits for a human, whatever the call, gated or not
    if not gated:
        return NOT_GATED  # the policy ran it without asking: only deny and ask rules meet such a call
    return barrier(call) or ALLOW


def _count(result: Simulation, sample: Sample) -> None:
    if sample.outcome == ALLOW:
        result.would_allow += 1
        seen = result.would_allow
    elif sample.outcome == DENY:
        result.would_deny += 1
        seen = result.would_deny
    elif sample.outcome == ASK:
        result.would_ask += 1
        seen = result.would_ask
    else:
        result.never[sample.outcome] = seen = result.never.get(sample.outcome, 0) + 1
    if seen <= SAMPLES_PER_OUTCOME:
        result.samples.append(sample)


def _calls(rule: Rule, *, since):
    """The scope's calls the rules were (or, not gated, would be) asked about: validated (a call that
    failed validation never met the gate), the model's or a caller's own (not a tool's question), an
    action (rules never decide questions or plans). Newest first by id, which the primary key's index
    gives without a sort; one query however many rows, streamed."""
    ToolCall = Approval.tool_call.field.related_model  # approvals never imports chat
    calls = ToolCall.objects.filter(created_at__gte=since, asked_by__isnull=True).exclude(arguments_hash="")
    calls = calls.filter(Q(approval__isnull=True) | Q(approval__kind=Approval.Kind.ACTION))
    if rule.scope == Rule.Scope.CONVERSATION:
        calls = calls.filter(message__conversation_id=rule.conversation_id)
    elif rule.scope == Rule.Scope.AGENT_USER:
        calls = calls.filter(message__conversation__agent_id=rule.agent_id, message__conversation__owner_id=rule.created_by_id)
    elif rule.scope == Rule.Scope.AGENT:
        calls = calls.filter(message__conversation__agent_id=rule.agent_id)
    return calls.order_by("-pk").values(
        "pk", "name", "arguments", "is_gated", "message__conversation_id", "message__conversation__agent__max_auto_approve_risk",
        "message__conversation__agent__step_up_from_risk",
        "approval__pk", "approval__risk", "approval__approver_required", "approval__route_id", "created_at",
    )[: MAX_CALLS + 1]
