"""Pages and posts of the chat: the conversation list, a conversation, messages, retry, approve all."""
import math
import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch, prefetch_related_objects
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Approval, Outcome
from approvals.permissions import may_approve_anything
from approvals.selectors import powers_for
from approvals.services import decide_all
from core.inputs import BadInput, parse_shown

from . import services, undo
from .quotas import QuotaExceeded
from .scripted import SUGGESTIONS
from .models import Conversation, ToolCall
from .selectors import MAX_POSITION, agent_for, conversation_for, messages_for_page, recent_conversations, usable_agents


@login_required
@require_GET
def conversation_list(request):
    conversations = recent_conversations(request.user)
    agents = usable_agents(request.user).order_by("name")
    return render(request, "chat/conversation_list.html", {"conversations": conversations, "agents": agents, "suggestions": SUGGESTIONS})


@login_required
@require_POST
def new_conversation(request):
    agent = agent_for(request.user, request.POST.get("agent", "demo"))
    if agent is None:
        raise Http404("Unknown agent.")
    try:
        conversation = services.start_conversation(user=request.user, agent=agent, content=request.POST.get("content", ""))
    except services.InvalidMessage as exc:
        return HttpResponse(str(exc), status=400)
    except QuotaExceeded as exc:
        return _too_many(request, exc)
    return redirect("chat:conversation", conversation_id=conversation.pk)


BAD_BEFORE = f"“before” must be a message position: a whole number from 1 to {MAX_POSITION}."


def before_position(request) -> int | None:
    """`?before=<position>` of "Load earlier messages"; ValueError unless ASCII digits in range
    (int() alone would take "٣", and a 5,000-digit string before refusing it)."""
    value = request.GET.get("before", "")
    if not value:
        return None
    if not re.fullmatch(r"[0-9]{1,10}", value) or not 1 <= int(value) <= MAX_POSITION:
        raise ValueError(BAD_BEFORE)
    return int(value)


@login_required
@require_GET
def conversation_page(request, conversation_id):
    """The newest messages; with `?before=`, the page before that position: its fragment, which
    replaces the "Load earlier messages" control (so it is prepended), or, without JavaScript, a page."""
    conversation = conversation_for(request.user, conversation_id, powers_for(request))
    try:
        before = before_position(request)
    except ValueError as exc:
        return HttpResponse(str(exc), status=400)
    page = messages_for_page(conversation, before=before)
    if conversation.source == Conversation.Source.API:
        _with_reported_outcomes(page.messages)
    context = {
        "conversation": conversation,
        "page": page,
        "before": before,
        "suggestions": SUGGESTIONS,
        # Four-eyes and routed calls pushed to every viewer: this one may decide them only as an
        # approver (global, a route's group, a delegate) who is not the owner.
        "may_approve_others": conversation.owner_id != request.user.pk and may_approve_anything(request.user, powers_for(request)),
    }
    # A routed card pushed to every viewer offers Approve only to the route's people (its escalation
    # groups' once escalated): the page says which routes this viewer decides (partials/routed_cards_style.html).
    context["deciding_routes"], context["escalation_routes"] = powers_for(request).deciding_routes() if context["may_approve_others"] else (set(), set())
    if request.htmx and before is not None:
        return render(request, "partials/messages_page.html", context)
    if request.htmx:  # the socket (re)connected: bring the page up to date from the database
        return render(request, "partials/conversation_live.html", context)
    return render(request, "chat/conversation.html", context)


def _with_reported_outcomes(messages: list) -> None:
    """What the callers of an approval-request conversation reported of the calls they ran (the
    cards say who reported it), read for the whole page at once: one query, none per card."""
    finished = (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED)
    calls = [call for message in messages for call in message.tool_calls.all() if call.status in finished]
    approvals = [approval for call in calls if (approval := getattr(call, "approval", None)) is not None]
    prefetch_related_objects(approvals, Prefetch("outcome", queryset=Outcome.objects.select_related("reported_by")))


@login_required
@require_POST
def post_message(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    content = request.POST.get("content", "")
    try:
        # The composer sends the pending cards the page rendered (each card's `shown` input
        # belongs to the composer's form): a typed reply decides only those.
        shown = parse_shown(request.POST.getlist("shown")) if request.POST.get("page_shows") else None
        services.post_message(conversation=conversation, user=request.user, content=content, shown=shown)
    except BadInput as exc:
        return HttpResponse(str(exc), status=400)
    except services.UnknownAgent as exc:
        raise Http404(str(exc)) from None
    except (services.InvalidMessage, services.NotOwner, QuotaExceeded) as exc:
        status = 429 if isinstance(exc, QuotaExceeded) else 400
        if not request.htmx:
            return _too_many(request, exc) if status == 429 else HttpResponse(str(exc), status=status)
        context = {"conversation": conversation, "error": str(exc), "content": content}
        response = render(request, "partials/composer.html", context, status=status)
        if status == 429:
            response["Retry-After"] = str(exc.retry_after)
        return response
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    return render(request, "partials/composer.html", {"conversation": conversation})


@login_required
@require_POST
def retry(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    try:
        services.retry(conversation=conversation, user=request.user)
    except services.UnknownAgent as exc:
        raise Http404(str(exc)) from None
    except services.NotOwner as exc:
        return HttpResponse(str(exc), status=403)
    except services.InvalidMessage as exc:  # an outside conversation: no model runs in it
        return HttpResponse(str(exc), status=400)
    except QuotaExceeded as exc:
        return _too_many(request, exc)
    if request.htmx:
        return HttpResponse(status=204)  # the status bar is pushed to every tab
    return redirect("chat:conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def undo_call(request, tool_call_id: int):
    """Undo, from the history: the undo's own card, in its conversation, waits for a decision."""
    try:
        made = undo.request_undo(request.user, tool_call_id)
    except ToolCall.DoesNotExist:
        raise Http404("No such tool call.") from None
    except undo.CannotUndo as exc:
        messages.error(request, str(exc))
        return redirect("approvals:history")
    return redirect(reverse("chat:conversation", args=[made.message.conversation_id]) + f"#tool-call-{made.pk}")


@login_required
@require_POST
def approve_all(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    try:
        shown = parse_shown(request.POST.getlist("approval_ids"))
    except BadInput as exc:
        return HttpResponse(str(exc), status=400)
    decide_all(conversation_id=conversation.pk, user=request.user, via=Approval.Via.CHAT, shown=shown)
    if request.htmx:
        return HttpResponse(status=204)  # each decided card is pushed to every tab
    return redirect("chat:conversation", conversation_id=conversation.pk)



@login_required
@require_POST
def stop(request, conversation_id, via: str = Approval.Via.CHAT):
    """Stop the agent (owner, or an approver from the dashboard): see services.stop_conversation."""
    conversation = conversation_for(request.user, conversation_id)
    if via == Approval.Via.DASHBOARD and not may_approve_anything(request.user, powers_for(request)):
        return HttpResponse("The dashboard is for approvers.", status=403)
    try:
        services.stop_conversation(conversation=conversation, user=request.user, via=via)
    except services.NotOwner as exc:
        return HttpResponse(str(exc), status=403)
    if request.htmx:
        return HttpResponse(status=204)  # the status bar, the cards and the notice are pushed to every tab
    return redirect("chat:conversation", conversation_id=conversation.pk)


def _too_many(request, exc: QuotaExceeded) -> HttpResponse:
    """The quota page: which limit, how long to wait, and that nothing typed was lost or sent."""
    seconds = exc.retry_after
    wait = f"{seconds} s" if seconds < 120 else f"{math.ceil(seconds / 60)} minutes"
    response = render(request, "chat/quota.html", {"what": exc.what, "wait": wait}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response
