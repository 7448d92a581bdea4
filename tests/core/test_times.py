"""Times to the second, with the zone they are read in (core.times)."""
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo

from django.template import Context, Template
from django.utils import timezone

from core.times import to_the_second

MOMENT = datetime(2026, 12, 1, 22, 4, 7, 654321, tzinfo=dt_timezone.utc)


def test_a_moment_reads_to_the_second_in_the_current_zone_named():
    assert to_the_second(MOMENT) == "2026-12-01 22:04:07 UTC"  # the site's zone (settings.TIME_ZONE)
    with timezone.override(ZoneInfo("Europe/Paris")):
        assert to_the_second(MOMENT) == "2026-12-01 23:04:07 CET"
    with timezone.override(ZoneInfo("America/New_York")):
        assert to_the_second(MOMENT.replace(month=7)) == "2026-07-01 18:04:07 EDT"
    assert to_the_second(None) == ""


def test_the_template_filter_is_the_same_function():
    rendered = Template("{% load hitl_tags %}{{ moment|to_the_second }}").render(Context({"moment": MOMENT}))
    assert rendered == "2026-12-01 22:04:07 UTC"
