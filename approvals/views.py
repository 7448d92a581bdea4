"""Decision POSTs from the pages (the same decision service as the API)."""
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from .fragments import approval_controls_html
from .models import Approval
from .services import AlreadyDecided, NotAllowed, decide

PAGE_CHANNELS = {Approval.Via.CHAT, Approval.Via.DASHBOARD}


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

