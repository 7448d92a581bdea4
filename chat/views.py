"""Pages and posts of the chat: the conversation list, a conversation, messages, retry, approve all."""
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Approval
from approvals.permissions import is_approver
from approvals.services import decide_all

from . import services
from .llm import SUGGESTIONS
from .models import Agent
from .selectors import conversation_for, messages_for_page, recent_conversations


@login_required
@require_GET
def conversation_list(request):
    conversations = recent_conversations(request.user)
    agents = Agent.objects.order_by("name")
    return render(request, "chat/conversation_list.html", {"conversations": conversations, "agents": agents, "suggestions": SUGGESTIONS})


@login_required
@require_POST
def new_conversation(request):
    agent = get_object_or_404(Agent, slug=request.POST.get("agent", "demo"))
    try:
        conversation = services.start_conversation(user=request.user, agent=agent, content=request.POST.get("content", ""))
    except services.InvalidMessage as exc:
        return HttpResponse(str(exc), status=400)
    return redirect("chat:conversation", conversation_id=conversation.pk)


@login_required
@require_GET
def conversation_page(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    context = {
        "conversation": conversation,
        "messages": messages_for_page(conversation),
        "suggestions": SUGGESTIONS,
        # Four-eyes calls: this viewer may decide them only as an approver who is not the owner.
        "may_approve_others": is_approver(request.user) and conversation.owner_id != request.user.pk,
    }
    if request.htmx:  # the socket (re)connected: bring the page up to date from the database
        return render(request, "partials/conversation_live.html", context)
    return render(request, "chat/conversation.html", context)


@login_required
@require_POST
def post_message(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    content = request.POST.get("content", "")
    try:
        services.post_message(conversation=conversation, user=request.user, content=content)
    except (services.InvalidMessage, services.NotOwner) as exc:
        if not request.htmx:
            return HttpResponse(str(exc), status=400)
        context = {"conversation": conversation, "error": str(exc), "content": content}
        return render(request, "partials/composer.html", context, status=400)
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    return render(request, "partials/composer.html", {"conversation": conversation})


@login_required
@require_POST
def retry(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    try:
        services.retry(conversation=conversation, user=request.user)
    except services.NotOwner as exc:
        return HttpResponse(str(exc), status=403)
    if request.htmx:
        return HttpResponse(status=204)  # the status bar is pushed to every tab
    return redirect("chat:conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def approve_all(request, conversation_id):
    conversation = conversation_for(request.user, conversation_id)
    ids = [int(i) for i in request.POST.getlist("approval_ids") if i.isdigit()]
    decide_all(conversation_id=conversation.pk, user=request.user, via=Approval.Via.CHAT, approval_ids=ids)
    if request.htmx:
        return HttpResponse(status=204)  # each decided card is pushed to every tab
    return redirect("chat:conversation", conversation_id=conversation.pk)

