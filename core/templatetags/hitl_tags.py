"""Template filters both apps use."""
import json

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from core import times, visible

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Arguments as indented JSON (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


# What you see is what runs: these return plain strings, so the template still escapes them.
@register.filter(name="reveal")
def reveal_filter(value) -> str:
    """Text with invisible and direction-changing characters written as ⟨U+202E⟩."""
    return "" if value is None else visible.reveal(str(value))


@register.filter(name="reveal_json")
def reveal_json_filter(value) -> str:
    """Like pretty_json, with invisible characters revealed."""
    return visible.reveal_json(value)


@register.filter(name="has_invisible")
def has_invisible_filter(value) -> bool:
    return visible.has_invisible(value)


@register.filter
def ago(value) -> str:
    """How long ago, in words: "just now" under a minute (timesince says "0 minutes")."""
    if not value:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value)} ago"


# "2026-12-01 22:04:07 UTC" (core.times): one definition for the history and the admin.
register.filter("to_the_second", times.to_the_second)
