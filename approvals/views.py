"""The approval dashboard, its history, and decision POSTs from the pages (the same decision
service as the API)."""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.inputs import BadInput, parse_ids, parse_shown

from . import inbox
from .pauses import questions, uploads
from .policy import calls
from .policy.calls import InvalidArguments
from .forms import arguments_from_form, edit_fields, grant_from_form
from .cards import races, titles
from .cards.fragments import approval_controls_html
from .models import Approval, Risk
from .policy.rulemaking import InvalidRule, ScopeNotAllowed, TargetNotFound
from .permissions import can_decide, can_see, may_approve_anything
from .selectors import Filters, decided_approvals, powers_for, with_routes
from .services import (
    AlreadyDecided,
    AlreadyVoted,
    ArgumentsChanged,
    CannotAskAgain,
    ConfirmationRequired,
    DecisionError,
    EditForbidden,
    InvalidAnswer,
    NotAllowed,
    NotExpired,
    NotExtendable,
    answer,
    approve_edited,
    ask_again,
    check_decidable,
    claim,
    decide,
    decide_many,
    decide_remembering,
    respond,
    extend,
    record_late,
    unclaim,
)

DASHBOARD_ROWS = 50  # the most urgent (or oldest) first; the count says how many more wait
KINDS = [("action", "tool calls"), ("question", "questions"), ("plan", "plans")]


@login_required
@require_GET
def dashboard(request):
    """The approvers' inbox: compact rows, alike calls grouped, the viewer's snoozes left out. A
    member of a route's groups sees what the route sends them; a global approver sees everything."""
    _check_approves(request, "The dashboard is for approvers.")
    filters = Filters.from_query(request.GET)
    template = "partials/dashboard_rows.html" if request.htmx else "approvals/dashboard.html"
    return render(request, template, _inbox_context(request, filters))


def _inbox_context(request, filters: Filters) -> dict:
    user, powers = request.user, powers_for(request)
    approvals = inbox.inbox_approvals(user, filters, powers)
    rows = list(approvals[:DASHBOARD_ROWS])
    return {
        "items": inbox.inbox_items(user, rows, powers), "count": approvals.count(), "shown": len(rows), "filters": filters,
        "risks": Risk.values, "kinds": KINDS, "snoozed_count": inbox.snoozed_count(user),
        "inbox_count": inbox.pending_count(user, powers),
    }


@login_required
@require_GET
def history(request):
    _check_approves(request, "The history is for approvers.")
    filters = Filters.from_query(request.GET)
    page = Paginator(decided_approvals(filters, user=request.user, powers=powers_for(request)), 50).get_page(request.GET.get("page"))
    page.object_list = with_routes(list(page.object_list))  # the rows' votes and groups, read at once
    prefetch_related_objects(page.object_list, "tool_call__undos")  # each row's Undo (chat.undo), at once
    return render(request, "approvals/history.html", {"page": page, "filters": filters, "risks": Risk.values, "kinds": KINDS})


@login_required
@require_POST
def bulk_decide(request):
    _check_approves(request, "Bulk decisions are for approvers.")
    decision = request.POST.get("decision")
    try:
        shown = parse_shown(request.POST.getlist("approval_ids"))
    except BadInput as exc:
        return HttpResponse(str(exc), status=400)
    if decision not in ("approve", "reject") or not shown:
        return HttpResponse("Select approvals, then approve or reject them.", status=400)
    outcome = decide_many(
        shown, user=request.user, approve=decision == "approve", via=Approval.Via.DASHBOARD,
        reason=request.POST.get("reason", "")[:2000],
    )
    if not request.htmx:
        return redirect("approvals:dashboard")
    return render(request, "partials/bulk_outcome.html", {"outcome": outcome, "decision": decision})


class GroupRefused(Exception):
    """Not every call of a group could be decided as listed: nothing of it is."""

    def __init__(self, outcome):
        super().__init__("Nothing was decided.")
        self.outcome = outcome


@login_required
@require_POST
def group_decide(request):
    """A group of alike calls decided together: exactly the ids and versions its row listed, all or
    none (one edited, decided or made critical meanwhile: 409, nothing decided, the list re-read)."""
    _check_approves(request, "Group decisions are for approvers.")
    decision = request.POST.get("decision")
    listed = request.POST.getlist("approval_ids")
    try:
        shown = parse_shown(listed)
    except BadInput as exc:
        return HttpResponse(str(exc), status=400)
    if decision not in ("approve", "reject") or not shown:
        return HttpResponse("A group decision names its calls and approve or reject.", status=400)
    if len(shown) != len(listed) or not all(shown.values()):
        # A row lists each call once with its version: a bare id (whatever the call is now) or an
        # id at two versions is not what any row showed.
        return HttpResponse("A group decision names each call once, at the version its row listed.", status=400)
    try:
        with transaction.atomic():
            outcome = decide_many(
                shown, user=request.user, approve=decision == "approve", via=Approval.Via.DASHBOARD,
                reason=request.POST.get("reason", "")[:2000],
            )
            if len(outcome.decided) != len(shown):
                raise GroupRefused(outcome)
    except GroupRefused as refused:
        # Rolled back with the rest: what came after an expiry is kept all the same.
        record_late(refused.outcome.late, user=request.user, via=Approval.Via.DASHBOARD, approve=decision == "approve")
        context = {"outcome": refused.outcome, "decision": decision, "refused": True}
        response = render(request, "partials/bulk_outcome.html", context, status=409)
        response["HX-Trigger"] = "inbox-changed"  # nothing was decided, so no push: re-read the list here
        return response
    if not request.htmx:
        return redirect("approvals:dashboard")
    return render(request, "partials/bulk_outcome.html", {"outcome": outcome, "decision": decision})


@login_required
@require_POST
def snooze_view(request, approval_id: int):
    """Hide a pending approval from this approver's inbox for an hour (only theirs; it decides nothing)."""
    _check_channel(request, Approval.Via.DASHBOARD)
    _approval_for(request.user, approval_id)
    inbox.snooze(request.user, [approval_id])
    return _inbox_changed(request)


@login_required
@require_POST
def wake_view(request, approval_id: int):
    """A snoozed approval back into this approver's inbox now."""
    _check_channel(request, Approval.Via.DASHBOARD)
    inbox.wake(request.user, [approval_id])
    return _inbox_changed(request)


def _inbox_changed(request) -> HttpResponse:
    if not request.htmx:
        return _back(request)
    response = HttpResponse(status=204)
    response["HX-Trigger"] = "inbox-changed"
    return response


@login_required
@require_POST
def decide_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    _check_channel(request, via)
    decision = "respond" if request.POST.get("respond") else request.POST.get("decision")
    if decision not in ("approve", "reject", "respond"):
        return HttpResponse("Choose approve or reject.", status=400)
    decision_fields = {
        "user": request.user,
        "approve": decision == "approve",
        "via": via,
        "reason": request.POST.get("reason", "")[:2000],
        "confirmation": request.POST.get("confirmation", ""),
        "shown_hash": request.POST.get("shown_hash", ""),
        "comment": request.POST.get("comment", "")[:2000],
    }
    saved_rule = None
    try:
        if decision == "respond":  # the reason field's words, sent to the agent instead of a decision
            approval = respond(approval_id, user=request.user, via=via, shown_hash=decision_fields["shown_hash"], message=decision_fields["reason"])
        elif remember := _remember(request, approval_id):
            approval, saved_rule = decide_remembering(approval_id, remember=remember, **decision_fields)
        else:
            approval = decide(approval_id, steps=_steps(request) if decision == "approve" else None, **decision_fields)
    except BadInput as exc:
        return _refused(request, approval_id, InvalidAnswer(str(exc)), via)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except ScopeNotAllowed as exc:
        return HttpResponse(str(exc), status=403)
    except (DecisionError, InvalidRule, TargetNotFound) as exc:
        return _refused(request, approval_id, exc, via)
    return _decided(request, approval, via, saved_rule=saved_rule)


@login_required
@require_POST
def claim_view(request, approval_id: int, via: str = Approval.Via.CHAT, release: bool = False) -> HttpResponse:
    """Claim a pending approval ("I'm on it"), or with `release` end its claim: a signal to the
    other approvers, pushed to every inbox and card; it decides nothing."""
    _check_channel(request, via)
    try:
        approval = (unclaim if release else claim)(approval_id, user=request.user)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except DecisionError as exc:
        return _refused(request, approval_id, exc, via)
    return _decided(request, approval, via)  # the card's controls, its claim line with them


@login_required
@require_POST
def extend_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    """The warned card's Extend: its deadline pushed back once, by the agent's timeout, for its
    requester or someone who may approve it; the card shows the new deadline and who extended it."""
    return _changed_card(request, approval_id, via, extend)


@login_required
@require_POST
def ask_again_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    """The expired card's Ask again: a new approval for the same call and version, whose card the
    conversation's socket brings; this card then says it was asked again."""
    return _changed_card(request, approval_id, via, ask_again)


def _changed_card(request, approval_id: int, via: str, change) -> HttpResponse:
    """`change` (extend, ask_again) done as the user, and the card as it then stands, or why not."""
    _check_channel(request, via)
    try:
        change(approval_id, user=request.user, via=via)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except DecisionError as exc:
        return _refused(request, approval_id, exc, via)
    return _decided(request, _approval_for(request.user, approval_id), via)


def _remember(request, approval_id: int) -> dict | None:
    """The card's "Always…" form: the scope to remember the decision in, and its argument
    conditions (`cond:<argument>`; an emptied one is left out, matching any value); or its
    time-boxed grant (`grant`: approvals.forms.grant_from_form, refused for what a rule never approves)."""
    if request.POST.get("grant"):
        return grant_from_form(request.POST, _approval_for(request.user, approval_id))
    scope = request.POST.get("remember_scope", "")
    if not scope:
        return None
    conditions = {
        key.removeprefix("cond:"): value.strip()
        for key, value in request.POST.items()
        if key.startswith("cond:") and value.strip()
    }
    return {"scope": scope, "arguments": conditions, "note": request.POST.get("remember_note", "")[:500]}


@login_required
@require_POST
def answer_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    """A question's card: answer it (the form's `answer` field or fields, read by the question's
    type and checked on the server), or decline to answer (`decline`, with a `reason`)."""
    _check_channel(request, via)
    approval = _approval_for(request.user, approval_id)
    if int(request.META.get("CONTENT_LENGTH") or 0) > settings.HITL_MAX_UPLOAD_BYTES + 64 * 1024:  # refused before it is read
        return _refused(request, approval_id, InvalidAnswer(f"The file is larger than {settings.HITL_MAX_UPLOAD_BYTES} bytes, the most any question takes."), via)
    seen = {"user": request.user, "via": via, "shown_hash": request.POST.get("shown_hash", "")}
    try:
        if request.POST.get("decline"):
            approval = answer(approval_id, decline=True, reason=request.POST.get("reason", "")[:2000], **seen)
        elif (approval.question or {}).get("type") == "file":
            approval = _answer_with_file(approval, request.FILES.get("file"), seen)
        else:
            value = questions.from_form(approval.question or {}, request.POST) if approval.question else None
            approval = answer(approval_id, value=value, **seen)
    except DecisionError as exc:
        return _refused(request, approval_id, exc, via)
    return _decided(request, approval, via)


def _answer_with_file(approval: Approval, uploaded, seen: dict) -> Approval:
    """A file question answered with the file its card uploaded, stored in the sandbox once the
    uploader may answer it: a file it does not take, or an answer refused after it was stored
    (decided meanwhile), keeps nothing."""
    check_decidable(approval.pk, seen["user"], approve=True, shown_hash=seen["shown_hash"], via=seen["via"])
    try:
        stored = uploads.store(approval, uploaded)
    except questions.InvalidAnswer as exc:
        raise InvalidAnswer(str(exc)) from None
    try:
        return answer(approval.pk, value=stored, **seen)
    except BaseException:
        uploads.discard(approval, stored)
        raise


def _steps(request) -> list | None:
    """A plan's ticked steps (the form always says it is a plan's), in the order the card left them
    (`order`: every step's number, as moved), each with its words if the decider changed them
    (`action_<n>`), as plans.approve reads them; else None."""
    if not request.POST.get("plan"):
        return None
    ticked = parse_ids(request.POST.getlist("steps"), most=50)
    order = [i for i in parse_ids(request.POST.getlist("order"), most=50) if i in ticked] or ticked
    order += [i for i in ticked if i not in order]
    return [{"index": i, "action": request.POST[f"action_{i}"][:1000]} if f"action_{i}" in request.POST else i for i in order]


@login_required
@require_GET
def controls_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    """A card's decision controls as stored now (what Cancel on the edit form goes back to)."""
    _check_channel(request, via)
    approval = _approval_for(request.user, approval_id)
    return HttpResponse(_controls_html(request, approval, via))


@login_required
@require_http_methods(["GET", "POST"])
def edit_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> HttpResponse:
    """GET: the card's edit form, built from the tool's schema. POST: approve the edited arguments
    (validated and gated again: a stricter call stays pending for whoever must decide it)."""
    _check_channel(request, via)
    approval = _approval_for(request.user, approval_id)
    if approval.status != Approval.Status.PENDING:
        if request.method == "POST":  # an approve after the expiry is kept as late (LateDecision), then refused
            try:
                check_decidable(approval_id, request.user, approve=True, shown_hash=request.POST.get("shown_hash", ""), via=via)
            except DecisionError as exc:
                return _refused(request, approval_id, exc, via)
        return _refused(request, approval_id, AlreadyDecided(approval), via)
    if not can_decide(request.user, approval):
        return _refused(request, approval_id, NotAllowed("Only an approver other than the requester may approve this call."), via)
    shown = approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
    if request.method == "GET":
        return render(request, "partials/approval_edit.html", _edit_context(approval, shown, via))
    posted = shown
    try:
        posted = arguments_from_form(calls.checker().schema(approval), request.POST)
        approval = approve_edited(
            approval_id, user=request.user, arguments=posted, via=via,
            confirmation=request.POST.get("confirmation", ""), shown_hash=request.POST.get("shown_hash", ""),
        )
    except (InvalidArguments, ConfirmationRequired, EditForbidden) as exc:
        context = _edit_context(approval, posted, via) | {"error": str(exc)}
        return render(request, "partials/approval_edit.html", context, status=400)
    except DecisionError as exc:
        return _refused(request, approval_id, exc, via)
    return _decided(request, approval, via)


@login_required
@require_POST
def edit_title_view(request, approval_id: int, via: str = Approval.Via.CHAT) -> JsonResponse:
    """The card's title for the arguments an edit form holds now, as {"title"}: the form's live
    title (static/js/editdiff.js) while its decider types. It decides and stores nothing; after the
    submit, the card's title is the stored call's."""
    _check_channel(request, via)
    approval = _approval_for(request.user, approval_id)
    try:
        arguments = arguments_from_form(calls.checker().schema(approval), request.POST)
    except InvalidArguments as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"title": titles.shown_title(approval.tool_call.name, arguments, approval.annotations)})


def _approval_for(user, approval_id: int) -> Approval:
    """The approval if `user` may see it; 404 otherwise (its existence is not told)."""
    approval = Approval.objects.select_related("tool_call", "decided_by", "edited_by", "requested_by", "on_behalf_of").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Http404("No such approval.")
    return approval


def _edit_context(approval: Approval, arguments: dict, via: str) -> dict:
    return {"approval": approval, "fields": edit_fields(calls.checker().schema(approval), arguments), "via": via}


def _check_channel(request, via: str) -> None:
    """The dashboard's routes are the dashboard's: for approvers only, like the page."""
    if via == Approval.Via.DASHBOARD:
        _check_approves(request, "The dashboard is for approvers.")


def _check_approves(request, refusal: str) -> None:
    """The approvers' pages: a global approver's, a route group member's, a delegate's."""
    if not may_approve_anything(request.user, powers_for(request)):
        raise PermissionDenied(refusal)


def _controls_html(request, approval: Approval, via: str, **extra) -> str:
    """The card's controls as this viewer may use them: approve (unless their vote already counts),
    reject, and the votes so far."""
    user, powers = request.user, powers_for(request)
    voted = inbox.voted(user, approval)
    return approval_controls_html(
        approval, can_decide=not voted and can_decide(user, approval, powers=powers), via=via, voted=voted,
        can_reject=can_decide(user, approval, approve=False, powers=powers), **extra,
    )


def _decided(request, approval: Approval, via: str, saved_rule=None) -> HttpResponse:
    if not request.htmx:
        return _back(request)
    return HttpResponse(_controls_html(request, approval, via, saved_rule=saved_rule))


def _refused(request, approval_id: int, exc: Exception, via: str) -> HttpResponse:
    """The card again, as stored now, with why nothing was decided."""
    if isinstance(exc, NotAllowed):
        return HttpResponse(str(exc), status=403)
    status = 409 if isinstance(exc, (AlreadyDecided, AlreadyVoted, ArgumentsChanged, NotExtendable, NotExpired, CannotAskAgain)) else 400
    if not request.htmx:
        return HttpResponse(str(exc), status=status)
    approval = Approval.objects.select_related("tool_call", "decided_by", "edited_by", "on_behalf_of").get(pk=approval_id)
    # A decision that lost the race says so where it was pressed, above the card of the one that stands.
    error = races.lost_race(approval, _pressed(request)) if isinstance(exc, AlreadyDecided) else str(exc)
    html = _controls_html(request, approval, via, error=error)
    if isinstance(exc, AlreadyDecided) and via == Approval.Via.CHAT:
        # The whole card too (its status, its badge) and the conversation's status, swapped by id: a
        # tab that missed the pushes never shows "pending" around the decision that came first.
        call = approval.tool_call
        call.approval = approval
        html += render_to_string("partials/tool_call_card.html", {"call": call, "oob": True}, request=request)
        html += render_to_string("partials/conversation_status.html", {"conversation": approval.conversation, "oob": True}, request=request)
    return HttpResponse(html, status=status)


def _pressed(request) -> str:
    """What the person pressed, in the words of approvals.cards.races: approve, reject, respond, answer…"""
    if request.POST.get("respond"):
        return "respond"
    if request.POST.get("decline"):
        return "decline"
    page = (request.resolver_match.url_name or "").removeprefix("dashboard_")
    return request.POST.get("decision") or {"answer": "answer", "claim": "claim", "unclaim": "claim", "extend": "extension", "edit": "edit"}.get(page, "decision")


def _back(request) -> HttpResponse:
    """Without JavaScript the form posts plainly: go back to the page it came from."""
    target = request.META.get("HTTP_REFERER", "/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)
