"""Deny, ask and allow rules: which match a call, which one decides it, and what is never decided
without a human. Applied in that order to every action (chat.loop, chat.outside, edits): a matching
deny rule rejects the call at once; else a matching ask rule (or one of the agent's always-ask
patterns, Agent.always_ask) makes it wait for a human, even a call the policy would run; else, for a
call the tool's gate asked a human about, a matching allow rule approves it at once. Never approved
by a rule, whatever the rules say: critical calls, four-eyes calls, calls riskier than the agent's
`max_auto_approve_risk`, and calls with invisible or direction-changing characters.

The matching (`choose`) is pure. `applicable()` reads the rules that apply to a conversation (once
a turn), and `verdict()` takes a use of the one that decides, by a conditional update, so two
workers cannot both take a rule's last use."""
import fnmatch
import unicodedata
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from core.visible import has_invisible

from . import memory
from .conditions import holds
from ..models import Approval, Rule
from .gate import RISKS


@dataclass(frozen=True)
class Call:
    """What a rule is matched against, and what decides whether a rule may approve it."""

    tool: str
    arguments: dict
    risk: str
    approver_required: bool
    max_auto_approve_risk: str = "medium"
    always_ask: tuple = ()  # the agent's always-ask patterns for this tool (Agent.always_ask)
    routed: bool = False  # approver_required because a route names its approvers
    step_up_from_risk: str = ""  # the agent's: from this risk up, approving takes the approver's passkey
    outside_plan: bool = False  # an approved plan holds the conversation and no approved step calls this tool (chat.planned)


# Why no allow rule may approve a call (barrier()); approvals.policy.explain says each in words.
CRITICAL, ROUTED, FOUR_EYES, OVER_MAX_RISK, INVISIBLE = "critical", "routed", "four eyes", "over max risk", "invisible characters"
STEP_UP, OUTSIDE_PLAN = "step-up", "outside the plan"


def barrier(call: Call) -> str:
    """Why no allow rule may approve the call without a human, "" if one may."""
    if has_invisible(call.arguments) or has_invisible(call.tool):
        return INVISIBLE  # first: such characters also raise the risk, which the other reasons would name
    if call.risk not in RISKS or call.risk == "critical":
        return CRITICAL
    if call.outside_plan:
        return OUTSIDE_PLAN  # the person approved a plan without this tool: a person decides it
    if call.approver_required:
        return ROUTED if call.routed else FOUR_EYES
    if call.step_up_from_risk in RISKS and RISKS.index(call.risk) >= RISKS.index(call.step_up_from_risk):
        return STEP_UP  # an allow rule would approve what only the approver's passkey may
    if call.max_auto_approve_risk not in RISKS or RISKS.index(call.risk) > RISKS.index(call.max_auto_approve_risk):
        return OVER_MAX_RISK
    return ""


def may_auto_approve(call: Call) -> bool:
    """Whether any allow rule may approve the call without a human."""
    return not barrier(call)


def unmet_condition(rule, call: Call) -> str | None:
    """The first of the rule's argument conditions that does not hold for the call (its argument's
    name), None when all hold. As approvals.policy.conditions reads them: paths as paths, URLs as URLs,
    regexes in linear time; in doubt, a deny's or an ask's condition holds and an allow's does not."""
    strict = rule.effect != Rule.Effect.ALLOW
    for name, condition in (rule.arguments or {}).items():
        if name not in call.arguments or not holds(name, condition, call.arguments[name], deny=strict):
            return name
    return None


def matches(rule, call: Call) -> bool:
    """The tool's name fits the rule's name or glob, and every argument condition holds."""
    return fnmatch.fnmatchcase(call.tool, rule.tool) and unmet_condition(rule, call) is None


def choose(rules, call: Call) -> list:
    """The rules that may decide the call, in the order to try them: every matching deny rule, every
    matching ask rule, then, if the call may be approved without a human, every matching allow rule."""
    matching = [rule for rule in rules if matches(rule, call)]
    denies = [rule for rule in matching if rule.effect == Rule.Effect.DENY]
    asks = [rule for rule in matching if rule.effect == Rule.Effect.ASK]
    allows = [rule for rule in matching if rule.effect == Rule.Effect.ALLOW] if may_auto_approve(call) else []
    return denies + asks + allows


@dataclass(frozen=True)
class AlwaysAsk:
    """One of the agent's always-ask patterns that an argument of the call fits: an ask rule of the
    agent's own (no scope, no uses to count)."""

    pattern: str
    argument: str


def always_asked(call: Call) -> list[AlwaysAsk]:
    """The agent's always-ask patterns for the call's tool that one of its string arguments fits."""
    found = []
    for pattern in call.always_ask:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        argument = next((name for name, text in _strings(call.arguments) if pattern_fits(pattern, text)), None)
        if argument is not None:
            found.append(AlwaysAsk(pattern, argument))
    return found


def pattern_fits(pattern: str, text: str) -> bool:
    """A glob such as `rm -rf *` or `curl * | sh` fits a command if it fits the text, or any part of
    it from a word's start on (`cd /; sudo rm x` fits `sudo *`; `pseudo x` does not), also with the
    text folded (case, compatibility characters): an ask holds in doubt. fnmatch's translation
    finds each fixed piece once, so this stays linear in the text (at most 100 kB: a call's limit)."""
    for candidate, glob in ((text, pattern), (_folded(text), _folded(pattern))):
        if fnmatch.fnmatchcase(candidate, f"{glob}*") or fnmatch.fnmatchcase(candidate, f"*[!A-Za-z0-9_]{glob}*"):
            return True
    return False


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _strings(value, name: str = ""):
    """Every string in the arguments, nested ones too, with the top-level argument it is in."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, name or str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, name)


def patterns_for(always_ask, tool: str) -> tuple:
    """The agent's always-ask patterns for `tool` (Agent.always_ask: {tool name or glob: [patterns]})."""
    if not isinstance(always_ask, dict):
        return ()
    found = []
    for name, patterns in always_ask.items():
        if isinstance(name, str) and isinstance(patterns, list) and fnmatch.fnmatchcase(tool, name):
            found.extend(pattern for pattern in patterns if isinstance(pattern, str))
    return tuple(found)


def verdict(live_rules: list[Rule], call: Call, *, effect: str | None = None):
    """The rule of `live_rules` (applicable() of the call's conversation) that decides the call now,
    a use of it taken; or None. `effect` looks at deny, ask or allow rules only."""
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


EXPLAINED_EXPIRY = timedelta(days=1)  # a rule that expired this recently is still named (skipped: expired)


def applicable(conversation, *, recently_expired: bool = False, shadows: bool = False):
    """The live rules whose scope covers the conversation; with `recently_expired`, also those that
    expired within EXPLAINED_EXPIRY, in the same query, so that an explanation can say a rule was
    skipped because it expired (screen() never lets one decide). With `shadows`: (live, shadow), the
    shadow rules of the same scopes (approvals.policy.shadow) read in the same query."""
    now = timezone.now()
    scopes = (
        Q(scope=Rule.Scope.CONVERSATION, conversation_id=conversation.pk)
        | Q(scope=Rule.Scope.AGENT_USER, agent_id=conversation.agent_id, created_by_id=conversation.owner_id)
        | Q(scope=Rule.Scope.AGENT, agent_id=conversation.agent_id)
        | Q(scope=Rule.Scope.GLOBAL)
    )
    since = now - EXPLAINED_EXPIRY if recently_expired else now
    if not shadows:
        return list(_live(Rule.objects.filter(scopes), since).order_by("pk"))
    standing = list(_standing(Rule.objects.filter(scopes), since).order_by("pk"))
    return [rule for rule in standing if rule.mode == Rule.Mode.LIVE], [rule for rule in standing if rule.mode == Rule.Mode.SHADOW]


def is_expired(rule: Rule, now=None) -> bool:
    return rule.expires_at is not None and rule.expires_at <= (now or timezone.now())


def take_use(rule: Rule) -> bool:
    """Count one use, only if the rule is still live and has a use left: one conditional update."""
    now = timezone.now()
    taken = _live(Rule.objects.filter(pk=rule.pk), now).filter(Q(max_uses__isnull=True) | Q(uses__lt=F("max_uses")))
    return bool(taken.update(uses=F("uses") + 1, last_used_at=now))


def _live(rules, now):
    """The rules that decide: standing and live (a shadow rule decides nothing, and takes no use)."""
    return _standing(rules, now).filter(mode=Rule.Mode.LIVE)


def _standing(rules, now):
    return rules.filter(enabled=True, deleted_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def denial_reason(rule: Rule) -> str:
    """What the model reads, and the card shows, of a call a deny rule rejected."""
    return f"Denied by rule #{rule.pk}: {rule.note}" if rule.note else f"Denied by rule #{rule.pk}."


def ask_reason(asked, agent_name: str, tool: str) -> str:
    """What the card shows of a call an ask rule, or an always-ask pattern, holds for a human."""
    if isinstance(asked, AlwaysAsk):
        return f"Asked because {agent_name} always asks for {tool} when {asked.argument} fits `{asked.pattern}`."
    return f"Asked because of rule #{asked.pk}: {asked.note}" if asked.note else f"Asked because of rule #{asked.pk}."


@dataclass(frozen=True)
class Screening:
    """What the rules say of one version of a call (the model's, or a human's edit), matched before
    any write transaction so that no condition runs under the write lock. The deciding use of a rule
    is taken later, inside the transaction that stores the outcome (apply, or first_deny, first_ask,
    first_allow), and a rule found without a use left then is noted in `spent` (approvals.policy.explain)."""

    denies: list
    repeats: Approval | None
    allows: list
    asks: list = field(default_factory=list)  # ask rules, then the agent's always-ask patterns (AlwaysAsk)
    gated: bool = True  # the tool's gate asked a human; False: the policy would run it (only deny and ask apply)
    repeat_checked: bool = True
    considered: list = field(default_factory=list)  # (rule, unmet condition or None) for each rule of the call's tool
    expired: list = field(default_factory=list)  # rules of the call's tool that expired a moment ago
    barrier: str = ""  # why no allow rule may approve the call (barrier())
    spent: dict = field(default_factory=dict)  # rule id → why it had no use left when its use was taken

    @property
    def holds(self) -> bool:
        """A rule keeps the call from running as the policy says: a deny or an ask (ungated calls)."""
        return bool(self.denies or self.asks)


def screen(live_rules: list[Rule], call: Call, *, conversation_id, arguments_hash: str, gated: bool = True) -> Screening:
    """The one place every version of a call meets the rules: the loop for the model's call, the
    decision service for an edit, outside requests. Deny rules first; then the rejection contract
    (the same call a human just rejected in the conversation); then ask rules and the agent's
    always-ask patterns; then, for a gated call a rule may approve, the allow rules. A call the
    policy would run (`gated` False) meets deny and ask only, and the rejection contract only when
    an ask holds it (read only then: an ungated call costs no query)."""
    now = timezone.now()
    expired = [rule for rule in live_rules if is_expired(rule, now) and fnmatch.fnmatchcase(call.tool, rule.tool)]
    considered = [
        (rule, unmet_condition(rule, call))
        for rule in live_rules
        if not is_expired(rule, now) and fnmatch.fnmatchcase(call.tool, rule.tool)
    ]
    if any(rule.after for rule, unmet in considered if unmet is None):  # read only for a rule with an `after` that matched
        considered = [
            (rule, memory.AFTER if unmet is None and not memory.after_met(rule, conversation_id=conversation_id, arguments=call.arguments) else unmet)
            for rule, unmet in considered
        ]
    matching = [rule for rule, unmet in considered if unmet is None]
    why_not = barrier(call)
    asks = [rule for rule in matching if rule.effect == Rule.Effect.ASK] + always_asked(call)
    denies = [rule for rule in matching if rule.effect == Rule.Effect.DENY]
    checked = gated or bool(asks)
    return Screening(
        denies=denies,
        repeats=recent_rejection(conversation_id, call.tool, arguments_hash) if checked else None,
        allows=[rule for rule in matching if rule.effect == Rule.Effect.ALLOW] if gated and not why_not else [],
        asks=asks,
        gated=gated,
        repeat_checked=checked,
        considered=considered,
        expired=expired,
        barrier=why_not,
    )


def would_hold(live_rules: list[Rule], call: Call) -> bool:
    """Whether a live deny or ask rule, or an always-ask pattern, matches a call the policy would run:
    then it is screened as a gated call is (pure: no query for a call nothing holds)."""
    now = timezone.now()
    return bool(always_asked(call)) or any(
        rule.effect in (Rule.Effect.DENY, Rule.Effect.ASK) and not is_expired(rule, now) and matches(rule, call)
        for rule in live_rules
    )


def first_deny(screening: Screening) -> Rule | None:
    """The deny rule that rejects the call, a use of it taken; None if none has a use left."""
    return next((rule for rule in screening.denies if _take(rule, screening)), None)


def first_ask(screening: Screening):
    """The ask rule (a use of it taken) or always-ask pattern that holds the call for a human; None if none."""
    return next((asked for asked in screening.asks if isinstance(asked, AlwaysAsk) or _take(asked, screening)), None)


def first_allow(screening: Screening) -> Rule | None:
    """The allow rule that approves the call, a use of it taken; None if none has a use left."""
    return next((rule for rule in screening.allows if _take(rule, screening)), None)


def _take(rule: Rule, screening: Screening) -> bool:
    if not memory.under_limit(rule):  # its at_most, counted under the rule's lock: the race for its last place
        screening.spent[rule.pk] = memory.limit_reached(rule)
        return False
    if take_use(rule):
        return True
    screening.spent[rule.pk] = why_spent(rule)
    return False


def why_spent(rule: Rule) -> str:
    """Why a rule found live a moment ago had no use to take (read only then: it is rare)."""
    now = timezone.now()
    row = Rule.objects.filter(pk=rule.pk).values("enabled", "deleted_at", "expires_at", "max_uses", "uses").first()
    if row is None or row["deleted_at"] is not None:
        return "removed"
    if not row["enabled"]:
        return "disabled"
    if row["expires_at"] is not None and row["expires_at"] <= now:
        return "expired"
    return "used up"


DENY, REPEAT, ASK, ALLOW = "deny", "repeat", "ask", "allow"


@dataclass(frozen=True)
class Applied:
    """What the rules did to one call, the deciding use taken: `effect` deny, repeat (the rejection
    contract), ask (`asked`: the rule or always-ask pattern), allow; or "" (nothing: the gate stands,
    a human decides a gated call and an ungated one runs)."""

    effect: str = ""
    rule: Rule | None = None
    asked: object = None
    earlier: Approval | None = None


def apply(screening: Screening) -> Applied:
    """The rules applied in their order, deny → repeat → ask → allow, in the transaction that stores
    the outcome: the first that can decides (a rule without a use left is passed over)."""
    if rule := first_deny(screening):
        return Applied(DENY, rule=rule)
    if screening.repeats is not None:
        return Applied(REPEAT, earlier=screening.repeats)
    if asked := first_ask(screening):
        return Applied(ASK, rule=None if isinstance(asked, AlwaysAsk) else asked, asked=asked)
    if rule := first_allow(screening):
        return Applied(ALLOW, rule=rule)
    return Applied()
