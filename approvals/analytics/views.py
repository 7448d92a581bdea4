"""The analytics page for approvers, at /approvals/analytics/ (the figures: approvals.analytics.selectors)."""
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .selectors import (
    SUSPECT_BOT_MEDIAN_SECONDS,
    SUSPECT_MAX_MEDIAN_SECONDS,
    SUSPECT_MIN_APPROVED_PERCENT,
    SUSPECT_MIN_DECISIONS,
    InvalidWindow,
    approval_analytics,
    parse_days,
)
from .chart import chart_of
from ..permissions import is_approver

WINDOWS = (7, 30, 90)


@login_required
@require_GET
def analytics_page(request) -> HttpResponse:
    if not is_approver(request.user):
        raise PermissionDenied("Analytics are for approvers.")
    try:
        report = approval_analytics(days=parse_days(request.GET.get("days")))
    except InvalidWindow as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    rule = {"decisions": SUSPECT_MIN_DECISIONS, "percent": SUSPECT_MIN_APPROVED_PERCENT, "seconds": SUSPECT_MAX_MEDIAN_SECONDS,
            "bot_seconds": SUSPECT_BOT_MEDIAN_SECONDS}
    context = {"report": report, "chart": chart_of(report.per_day), "windows": WINDOWS, "rule": rule}
    return render(request, "approvals/analytics.html", context)
