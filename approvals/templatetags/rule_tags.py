"""Template filters of the rules page: a rule's conditions one by one, whether it still decides,
and whether the viewer may change it."""
import json

from django import template
from django.utils import timezone

from approvals.policy.rulemaking import may_change

register = template.Library()


@register.filter
def conditions(arguments) -> list[tuple[str, str, bool]]:
    """(argument, pattern, is_regex) for each condition of a rule's `arguments`: a glob, or
    {"regex": ...}. Anything else a hand-made row may hold is shown as its JSON, never dropped."""
    shown = []
    for name, condition in (arguments or {}).items():
        if isinstance(condition, dict) and set(condition) == {"regex"}:
            shown.append((str(name), str(condition["regex"]), True))
        elif isinstance(condition, str):
            shown.append((str(name), condition, False))
        else:
            shown.append((str(name), json.dumps(condition, ensure_ascii=False), False))
    return shown


@register.filter
def rule_state(rule) -> str:
    """disabled, expired, used up, or enabled: a rule decides only while enabled, unexpired and not used up."""
    if not rule.enabled:
        return "disabled"
    if rule.expires_at is not None and rule.expires_at <= timezone.now():
        return "expired"
    if rule.max_uses is not None and rule.uses >= rule.max_uses:
        return "used up"
    return "enabled"


@register.filter
def changeable_by(rule, user) -> bool:
    return may_change(user, rule)
