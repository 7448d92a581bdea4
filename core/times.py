"""Times as an audit reads them: to the second, with the time zone."""
from datetime import datetime

from django.utils import timezone


def to_the_second(moment: datetime | None) -> str:
    """"2026-12-01 22:04:07 UTC": the moment in the current time zone, named. What the admin and
    the history show of when a call was requested and decided (Django's own "Dec. 1, 2026,
    10 p.m." drops the minutes two decisions a few seconds apart are told apart by)."""
    if moment is None:
        return ""
    if timezone.is_aware(moment):
        moment = timezone.localtime(moment)
    zone = moment.tzname() or timezone.get_current_timezone_name()
    return f"{moment:%Y-%m-%d %H:%M:%S} {zone}"
