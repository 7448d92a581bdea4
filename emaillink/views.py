"""The profile page's section (opt out, or back in), and the page a mail's link opens: a GET only
shows (no login: the token is the proof for this one decision), a POST of the page's own form decides.
The Approve link's page shows the whole call with Approve and Reject; the Reject link's (its token
can only reject) is the reject form."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from approvals import services, tokens
from approvals.models import Approval
from approvals.permissions import can_see

from . import texts
from .channel import enabled, opted_in
from .models import EmailPreference

MAX_REASON_CHARS = 2000
MAX_CONFIRMATION_CHARS = 500
REJECT_ONLY = "This is the mail's Reject link: it can only reject. To approve, use the mail's Approve link or open the conversation."


def profile_context(request) -> dict:
    user = request.user
    return {"enabled": enabled(), "address": user.email, "opted_in": opted_in(user)}


@login_required
@require_POST
def preference(request):
    """The profile page's opt out / opt back in."""
    opted_out = request.POST.get("mail") != "on"
    EmailPreference.objects.update_or_create(user=request.user, defaults={"opted_out": opted_out})
    return redirect("/profile/#email")


@require_http_methods(["GET", "POST"])
def approve_page(request, token: str):
    try:
        opened = tokens.open_token(token)
        if opened.token.channel != "email":
            raise tokens.TokenInvalid
    except tokens.TokenInvalid:
        return _page(request, "invalid", status=403)
    if request.method == "GET":
        return _shown(request, opened)
    decision = request.POST.get("decision")
    reason = request.POST.get("reason", "")[:MAX_REASON_CHARS].strip()
    confirmation = request.POST.get("confirmation", "")[:MAX_CONFIRMATION_CHARS]
    if decision not in ("approve", "reject"):
        return _shown(request, opened, error="Choose Approve or Reject.", status=400)
    try:
        approval = tokens.redeem(token, approve=decision == "approve", reason=reason, confirmation=confirmation)
    except tokens.TokenInvalid:
        return _page(request, "invalid", status=403)
    except tokens.TokenExpired:
        return _page(request, "expired", opened.approval, status=403)
    except tokens.TokenUsed:
        return _used(request, _fresh(opened.approval))
    except services.AlreadyDecided as exc:
        return _page(request, "decided", exc.approval, status=409)
    except services.ArgumentsChanged:
        return _page(request, "changed", opened.approval, status=409)
    except services.ConfirmationRequired:
        return _shown(request, opened, error="Type the confirmation exactly as shown to approve this critical call.", status=400)
    except services.ShownCut:
        # The Reject link's token: an approve forged with it is refused and leaves it unspent.
        return _shown(request, opened, error=REJECT_ONLY, status=409)
    except services.AlreadyVoted:
        return _page(request, "voted", _fresh(opened.approval), status=409, already=True)
    except services.NotAllowed:
        return _page(request, "not allowed", opened.approval, status=403)
    except services.DecisionError as exc:
        return _page(request, "refused", opened.approval, status=409, error=str(exc))
    if approval.status == Approval.Status.PENDING:
        return _page(request, "voted", _fresh(approval))
    return _page(request, "done", _fresh(approval))


def _shown(request, opened: tokens.Opened, *, error: str = "", status: int = 200):
    """What a GET shows (and a refused POST again): the form while the link may still decide."""
    approval = opened.approval
    if not can_see(opened.token.user, approval):  # its recipient lost the right since: the link shows nothing
        return _page(request, "not allowed", status=403)
    if approval.status != Approval.Status.PENDING:
        return _page(request, "decided", _fresh(approval))
    if opened.used:
        return _used(request, approval)
    if opened.expired:
        return _page(request, "expired", approval, status=403)
    if opened.changed:
        return _page(request, "changed", approval)
    state = "reject" if request.GET.get("decision") == "reject" or not opened.token.complete else "form"
    return _page(request, state, approval, status=status, error=error, token_user=opened.token.user.get_username())


def _used(request, approval: Approval):
    if approval.status != Approval.Status.PENDING:
        return _page(request, "decided", approval, status=409, used=True)
    return _page(request, "voted", approval, status=409, used=True)


def _fresh(approval: Approval) -> Approval:
    return Approval.objects.select_related("tool_call", "conversation__agent", "requested_by", "decided_by").get(pk=approval.pk)


def _page(request, state: str, approval: Approval | None = None, *, status: int = 200, **extra):
    context = {"state": state, **extra}
    if approval is not None:
        context |= texts.shown(approval) | {"outcome": texts.outcome_line(approval)}
    response = render(request, "emaillink/page.html", context, status=status)
    response["Cache-Control"] = "no-store"
    # The token is in this page's address: never sent to another site. (no-referrer would make Chromium
    # send "Origin: null" with the form, which CSRF protection refuses.)
    response["Referrer-Policy"] = "same-origin"
    return response
