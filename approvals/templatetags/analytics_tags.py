"""How the analytics page writes its figures: seconds and rates as short, exact words."""
from django import template

register = template.Library()


@register.filter
def seconds(value: float | None) -> str:
    """1.0 → "1 s", 2.999 → "2.999 s" (never rounded up to the 3 s a suspect stays under)."""
    return "–" if value is None else f"{value:g} s"


@register.filter
def percent(rate: float | None) -> str:
    return "–" if rate is None else f"{round(rate * 100, 1):g} %"
