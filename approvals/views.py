"""The approval dashboard, its history, and decision POSTs from the pages (the same decision
service as the API)."""
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from .fragments import approval_controls_html
from .models import Approval, Risk
from .permissions import can_decide, is_approver
from .selectors import Filters, decided_approvals, pending_approvals
from .services import AlreadyDecided, NotAllowed, decide, decide_many

PAGE_CHANNELS = {Approval.Via.CHAT, Approval.Via.DASHBOARD}
DASHBOARD_ROWS = 50  # the oldest first; the count says how many more wait


@login_required
@require_GET
def dashboard(request):
    if not is_approver(request.user):
        raise PermissionDenied("The dashboard is for approvers.")
    filters = Filters.from_query(request.GET)
    approvals = pending_approvals(filters)
    rows = list(approvals[:DASHBOARD_ROWS])
    for approval in rows:
        approval.viewer_may_decide = can_decide(request.user, approval)
    context = {"rows": rows, "count": approvals.count(), "filters": filters, "risks": Risk.values, "shown": len(rows)}
    template = "partials/dashboard_rows.html" if request.htmx else "approvals/dashboard.html"
    return render(request, template, context)


@login_required
@require_GET
def history(request):
    if not is_approver(request.user):
        raise PermissionDenied("The history is for approvers.")
    filters = Filters.from_query(request.GET)
    page = Paginator(decided_approvals(filters), 50).get_page(request.GET.get("page"))
    return render(request, "approvals/history.html", {"page": page, "filters": filters, "risks": Risk.values})


@login_required
@require_POST
def bulk_decide(request):
    if not is_approver(request.user):
        raise PermissionDenied("Bulk decisions are for approvers.")
    decision = request.POST.get("decision")
    ids = [int(i) for i in request.POST.getlist("approval_ids") if i.isdigit()]
    if decision not in ("approve", "reject") or not ids:
        return HttpResponse("Select approvals, then approve or reject them.", status=400)
    outcome = decide_many(
        ids, user=request.user, approve=decision == "approve", via=Approval.Via.DASHBOARD,
        reason=request.POST.get("reason", "")[:2000],
    )
    if not request.htmx:
        return redirect("approvals:dashboard")
    return render(request, "partials/bulk_outcome.html", {"outcome": outcome, "decision": decision})


@login_required
@require_POST
def decide_view(request, approval_id: int) -> HttpResponse:
    decision = request.POST.get("decision")
    via = request.POST.get("via") if request.POST.get("via") in PAGE_CHANNELS else Approval.Via.CHAT
    if decision not in ("approve", "reject"):
        return HttpResponse("Choose approve or reject.", status=400)
    reason = request.POST.get("reason", "")[:2000]
    try:
        approval = decide(approval_id, user=request.user, approve=decision == "approve", via=via, reason=reason)
        status = 200
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except NotAllowed as exc:
        return HttpResponse(str(exc), status=403)
    except AlreadyDecided as exc:
        approval, status = exc.approval, 409  # the card shows who decided first
    if not request.htmx:
        return _back(request)
    return HttpResponse(approval_controls_html(approval, can_decide=False, via=via), status=status)


def _back(request) -> HttpResponse:
    """Without JavaScript the form posts plainly: go back to the page it came from."""
    target = request.META.get("HTTP_REFERER", "/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)
