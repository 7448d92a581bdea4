"""Allow and deny rules: which match a call, which one decides it, and what is never decided without
a human. Applied after the tool's own gate has asked for a human (chat.loop): a matching deny rule
rejects the call at once, else a matching allow rule approves it at once; deny always wins. Never
approved by a rule, whatever the rules say: critical calls, four-eyes calls, calls riskier than the
agent's `max_auto_approve_risk`, and calls with invisible or direction-changing characters.

The matching (`choose`) is pure. `applicable()` reads the rules that apply to a conversation (once
a turn), and `verdict()` takes a use of the one that decides, by a conditional update, so two
workers cannot both take a rule's last use."""
import fnmatch
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from hitl.visible import has_invisible

from .conditions import holds
from .models import Approval, Rule
from .policy import RISKS


@dataclass(frozen=True)
class Call:
    """What a rule is matched against, and what decides whether a rule may approve it."""

    tool: str
    arguments: dict
    risk: str
    approver_required: bool
    max_auto_approve_risk: str = "medium"


def may_auto_approve(call: Call) -> bool:
    """Whether any allow rule may approve the call without a human."""
    return (
        call.risk in RISKS
        and call.risk != "critical"
        and not call.approver_required
        and call.max_auto_approve_risk in RISKS
        and RISKS.index(call.risk) <= RISKS.index(call.max_auto_approve_risk)
        and not has_invisible(call.arguments)
        and not has_invisible(call.tool)
    )


def matches(rule, call: Call) -> bool:
    """The tool's name fits the rule's name or glob, and every argument condition holds (as
    approvals.conditions reads it: paths as paths, URLs as URLs, regexes in linear time; in doubt,
    a deny's condition holds and an allow's does not)."""
    if not fnmatch.fnmatchcase(call.tool, rule.tool):
        return False
    deny = rule.effect == Rule.Effect.DENY
    return all(
        name in call.arguments and holds(name, condition, call.arguments[name], deny=deny)
        for name, condition in (rule.arguments or {}).items()
    )


def choose(rules, call: Call) -> list:
    """The rules that may decide the call, in the order to try them: every matching deny rule, then,
    if the call may be approved without a human, every matching allow rule. Deny always comes first."""
    matching = [rule for rule in rules if matches(rule, call)]
    denies = [rule for rule in matching if rule.effect == Rule.Effect.DENY]
    allows = [rule for rule in matching if rule.effect == Rule.Effect.ALLOW] if may_auto_approve(call) else []
    return denies + allows


def verdict(live_rules: list[Rule], call: Call, *, effect: str | None = None):
    """The rule of `live_rules` (applicable() of the call's conversation) that decides the call now,
    a use of it taken; or None: a human decides. `effect` looks at deny or allow rules only."""
    for rule in choose(live_rules, call):
        if (effect is None or rule.effect == effect) and take_use(rule):
            return rule
    return None


def recent_rejection(conversation_id, tool: str, arguments_hash: str):
    """The rejection contract: the newest rejection, within the window (HITL_REPEAT_WINDOW_SECONDS),
    by a human (or a repeat of one), of the same tool with the same arguments in the conversation.
    A deny rule's rejections do not count: removing the rule lets the call be asked again."""
    window = settings.HITL_REPEAT_WINDOW_SECONDS
    if window <= 0:
        return None
    recent = Approval.objects.filter(
        conversation_id=conversation_id,
        status=Approval.Status.REJECTED,
        kind=Approval.Kind.ACTION,
        arguments_hash=arguments_hash,
        tool_call__name=tool,
        decided_at__gte=timezone.now() - timedelta(seconds=window),
    ).exclude(decided_via=Approval.Via.RULE)
    return recent.select_related("repeat_of").order_by("-decided_at", "-pk").first()


def suggestion(conversation, call: Call, *, trust_after: int, look_back: int = 200) -> dict:
    """What a card waiting for a human offers to remember (Approval.rule_suggestion): the
    conditions prefilled from the call, whether an allow rule could ever approve such a call, and
    `trusted`: how many alike calls (same tool, arguments matching those conditions) the owner
    approved with this agent since the last rejection of one, once that reaches `trust_after` (else 0).
    A suggestion only: nothing is made until someone accepts it."""
    from .rulemaking import conditions_for

    conditions = conditions_for(call.arguments)
    may_allow = may_auto_approve(call)
    trusted = _trusted(conversation, call.tool, conditions, look_back) if may_allow and trust_after > 0 else 0
    return {"arguments": conditions, "may_allow": may_allow, "trusted": trusted if trusted >= trust_after else 0}


def _trusted(conversation, tool: str, conditions: dict, look_back: int) -> int:
    """The owner's own approvals of alike calls with the agent, newest first, up to a rejection."""
    alike = Rule(effect=Rule.Effect.ALLOW, tool=tool, arguments=conditions)
    decided = (
        Approval.objects.filter(requested_by_id=conversation.owner_id, conversation__agent_id=conversation.agent_id)
        .filter(kind=Approval.Kind.ACTION, tool_call__name=tool, status__in=[Approval.Status.APPROVED, Approval.Status.REJECTED])
        .exclude(decided_via__in=[Approval.Via.RULE, Approval.Via.REPEAT])
        .select_related("tool_call")
        .order_by("-requested_at", "-pk")[:look_back]
    )
    count = 0
    for approval in decided:
        if not matches(alike, Call(tool, approval.tool_call.arguments, approval.risk, approval.approver_required)):
            continue
        if approval.status == Approval.Status.REJECTED:
            break
        count += approval.decided_by_id == conversation.owner_id
    return count


def applicable(conversation) -> list[Rule]:
    """The live rules whose scope covers the conversation."""
    now = timezone.now()
    scopes = (
        Q(scope=Rule.Scope.CONVERSATION, conversation_id=conversation.pk)
        | Q(scope=Rule.Scope.AGENT_USER, agent_id=conversation.agent_id, created_by_id=conversation.owner_id)
        | Q(scope=Rule.Scope.AGENT, agent_id=conversation.agent_id)
        | Q(scope=Rule.Scope.GLOBAL)
    )
    return list(_live(Rule.objects.filter(scopes), now).order_by("pk"))


def take_use(rule: Rule) -> bool:
    """Count one use, only if the rule is still live and has a use left: one conditional update."""
    now = timezone.now()
    taken = _live(Rule.objects.filter(pk=rule.pk), now).filter(Q(max_uses__isnull=True) | Q(uses__lt=F("max_uses")))
    return bool(taken.update(uses=F("uses") + 1, last_used_at=now))


def _live(rules, now):
    return rules.filter(enabled=True, deleted_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def denial_reason(rule: Rule) -> str:
    """What the model reads, and the card shows, of a call a deny rule rejected."""
    return f"Denied by rule #{rule.pk}: {rule.note}" if rule.note else f"Denied by rule #{rule.pk}."


@dataclass(frozen=True)
class Screening:
    """What the rules say of one version of a call (the model's, or a human's edit), matched before
    any write transaction so that no condition runs under the write lock. The deciding use of a rule
    is taken later, inside the transaction that stores the outcome (first_deny, first_allow)."""

    denies: list
    repeats: Approval | None
    allows: list


def screen(live_rules: list[Rule], call: Call, *, conversation_id, arguments_hash: str) -> Screening:
    """The one place every version of a call meets the rules: the loop for the model's call, the
    decision service for an edit. Deny rules first; then the rejection contract (the same call a
    human just rejected in the conversation); then, if a rule may approve it, the allow rules."""
    chosen = choose(live_rules, call)
    return Screening(
        denies=[rule for rule in chosen if rule.effect == Rule.Effect.DENY],
        repeats=recent_rejection(conversation_id, call.tool, arguments_hash),
        allows=[rule for rule in chosen if rule.effect == Rule.Effect.ALLOW],
    )


def first_deny(screening: Screening) -> Rule | None:
    """The deny rule that rejects the call, a use of it taken; None if none has a use left."""
    return next((rule for rule in screening.denies if take_use(rule)), None)


def first_allow(screening: Screening) -> Rule | None:
    """The allow rule that approves the call, a use of it taken; None if none has a use left."""
    return next((rule for rule in screening.allows if take_use(rule)), None)
