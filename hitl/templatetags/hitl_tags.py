"""Template filters both apps use."""
import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Arguments as indented JSON (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
