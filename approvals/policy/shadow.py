"""Shadow rules: a rule tried on live calls before it decides any.

A rule saved in `shadow` mode decides nothing. At the gate, each action of a turn meets the shadow
rules of its conversation's scopes (read with the live ones, in their query: rules.applicable), and
every call one would have decided ("would allow", "would deny", "would ask") is recorded beside what
did happen to it (ShadowVerdict), and whether the rule would have changed that. The match is the
simulator's (simulate.outcome): the shadow over live calls and the replay over history say the same
of the same calls. Promoting a shadow rule makes it live: a save, and so a new policy version."""
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from . import memory
from ..models import Rule, ShadowVerdict
from .rules import Call, is_expired
from .simulate import ALLOW, ASK, DENY, outcome

Happened = ShadowVerdict.Happened

# What would differ had the rule been live, given what happened (the rules' order: deny → ask → allow).
CHANGES = {
    ALLOW: {Happened.ASKED},  # a person was asked, and no rule held it: allowed at once instead
    DENY: {Happened.RAN, Happened.ALLOWED, Happened.HELD, Happened.ASKED},  # anything not already denied
    ASK: {Happened.RAN, Happened.ALLOWED},  # it ran or was allowed without a person
}
MAX_LISTED = 50


class NotShadow(Exception):
    """Only a shadow rule is promoted."""


def verdicts(
    shadow_rules: list[Rule], call: Call, *, gated: bool, happened: str, tool_call_id: int, conversation_id,
) -> list[ShadowVerdict]:
    """What each shadow rule would have done to one live call, unsaved; none for a rule that would
    not have decided it (no match, an allow that could not: not gated, or a barrier; an `after` not
    met, an `at_most` reached by what it would have decided before)."""
    found = []
    now = timezone.now()
    for rule in shadow_rules:
        if is_expired(rule, now):
            continue
        would = outcome(rule, call, gated=gated)
        if would not in (ALLOW, DENY, ASK):
            continue
        if not memory.after_met(rule, conversation_id=conversation_id, arguments=call.arguments, at=now):
            continue
        if rule.at_most and ShadowVerdict.objects.filter(
            rule=rule, created_at__gt=now - timedelta(seconds=rule.at_most["within_seconds"])
        ).count() >= rule.at_most["count"]:
            continue
        found.append(ShadowVerdict(
            rule=rule, tool_call_id=tool_call_id, outcome=would, happened=happened, changed=happened in CHANGES[would],
        ))
    return found


def record(found: list[ShadowVerdict]) -> None:
    """In the turn's transaction: one row per rule and call."""
    if found:
        ShadowVerdict.objects.bulk_create(found, ignore_conflicts=True)


@dataclass(frozen=True)
class WouldHave:
    allow: int = 0
    deny: int = 0
    ask: int = 0
    changed: int = 0  # of those, the calls it would have decided otherwise than they were


def would_have(rule: Rule) -> WouldHave:
    """The rule's counts over live calls since it was saved (one query)."""
    counts = ShadowVerdict.objects.filter(rule=rule).aggregate(
        allow=Count("pk", filter=Q(outcome=ALLOW)), deny=Count("pk", filter=Q(outcome=DENY)),
        ask=Count("pk", filter=Q(outcome=ASK)), changed=Count("pk", filter=Q(changed=True)),
    )
    return WouldHave(**counts)


def attach_counts(rules: list[Rule], *, listed: int = 10) -> None:
    """For a page of rules: each one that was ever in the shadow gets `would_have` and `changed_list`
    (its newest changed calls, at most `listed`), in two queries whatever the number of rules."""
    ids = [rule.pk for rule in rules]
    counts = {
        row.pop("rule"): WouldHave(**row)
        for row in ShadowVerdict.objects.filter(rule_id__in=ids).values("rule").annotate(
            allow=Count("pk", filter=Q(outcome=ALLOW)), deny=Count("pk", filter=Q(outcome=DENY)),
            ask=Count("pk", filter=Q(outcome=ASK)), changed=Count("pk", filter=Q(changed=True)),
        ).order_by()
    }
    changed: dict[int, list] = {}
    recent = ShadowVerdict.objects.filter(rule_id__in=ids, changed=True).select_related("tool_call__message")
    for verdict in recent.order_by("-pk")[: MAX_LISTED * 4]:
        if len(changed.setdefault(verdict.rule_id, [])) < listed:
            changed[verdict.rule_id].append(verdict)
    for rule in rules:
        rule.would_have = counts.get(rule.pk) if rule.pk in counts else (WouldHave() if rule.mode == Rule.Mode.SHADOW else None)
        rule.changed_list = changed.get(rule.pk, [])


def promote(rule: Rule) -> Rule:
    """Make a shadow rule live: saved, not updated, so that its history and a policy version say
    who promoted it when (approvals.policy.versions). Raises NotShadow for a live rule."""
    if rule.mode != Rule.Mode.SHADOW:
        raise NotShadow(f"Rule #{rule.pk} is already live.")
    rule.mode = Rule.Mode.LIVE
    rule.save(update_fields=["mode"])
    return rule
