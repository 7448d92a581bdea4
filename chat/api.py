"""Conversations in the JSON API: start one, post a message, read it, approve all its pending calls."""
from datetime import datetime
from typing import Annotated
from uuid import UUID

from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from approvals.api import ApprovalOut, approval_out
from approvals.models import Approval
from approvals.deciders.routing import ASKING_TOKEN, asks_only
from approvals.services import NotAllowed, decide_all

from . import services, undo
from .models import Conversation, ToolCall
from .tools import registry
from .selectors import MAX_POSITION, MESSAGES_PER_PAGE, MessagePage, agent_for, conversation_for, messages_for_page

router = Router(tags=["conversations"])
MAX_MESSAGES_PER_PAGE = 200


class ConversationIn(Schema):
    agent: str
    message: str


class MessageIn(Schema):
    content: str
    approval_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] | None = Field(
        None, max_length=1000,
        description="While calls wait: the approvals this reply answers. A reply that reads as a decision decides nothing if another is pending.",
    )


class ApproveAllIn(Schema):
    # Approval ids as the database stores them (64-bit); at most one page of a dashboard at a time.
    ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] | None = Field(None, max_length=1000)
    shown_hashes: dict[str, str] = Field({}, description="{id: shown_hash} as you listed them: a call that changed since is left pending.")


class ToolCallOut(Schema):
    id: int
    call_id: str
    name: str
    arguments: dict
    status: str
    result: str
    error: str
    approval: ApprovalOut | None
    reversible: bool = Field(False, description="Its tool can undo its calls (POST /api/tool-calls/{id}/undo once it succeeded).")
    undo_until: datetime | None = Field(None, description="Once it succeeded: until when it may be undone; null otherwise.")
    undo_of: int | None = Field(None, description="For an undo: the tool call it undoes.")


class MessageOut(Schema):
    id: int
    position: int
    role: str
    content: str
    created_at: datetime
    tool_calls: list[ToolCallOut]


class MessagePageIn(Schema):
    limit: int = Field(MESSAGES_PER_PAGE, ge=1, le=MAX_MESSAGES_PER_PAGE, description="How many of the newest messages to return.")
    before: int | None = Field(
        None, ge=1, le=MAX_POSITION, description="Only messages before this position: the previous page's `earliest_position`."
    )


class ConversationOut(Schema):
    id: UUID
    agent: str
    title: str
    status: str
    error: str
    created_at: datetime
    updated_at: datetime
    messages: list[MessageOut] = Field(description="The newest messages (before `before`, if given), oldest first.")
    has_earlier: bool = Field(description="Whether the conversation has messages before these.")
    earliest_position: int | None = Field(
        description="The position of the first message returned (null if none): pass it as `before` for the previous page."
    )


class Accepted(Schema):
    message_id: int
    status: str


class ApprovedIds(Schema):
    approved: list[int]
    needs_confirmation: list[int] = Field(description="Critical calls, left pending: each is approved with its typed confirmation.")


class WouldDecide(Schema):
    detail: str
    would_decide: list[int] = Field(description="The pending approvals an approve-all without ids would have covered.")
    shown_hashes: dict[str, str] = Field(description="{id: shown_hash}: each one's version now.")


class Stopped(Schema):
    status: str
    cancelled: list[int] = Field(description="The approvals the Stop cancelled.")


def tool_call_out(call) -> dict:
    return {
        "id": call.pk,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "status": call.status,
        "result": call.result,
        "error": call.error,
        "approval": approval_out(call.approval) if call.is_gated else None,
        "reversible": undo.reversible(registry.get(call.name)),
        "undo_until": call.undo_until if call.status == ToolCall.Status.SUCCEEDED else None,
        "undo_of": call.undo_of_id,
    }


def conversation_out(
    conversation: Conversation, *, limit: int = MESSAGES_PER_PAGE, before: int | None = None, page: MessagePage | None = None
) -> dict:
    page = page or messages_for_page(conversation, limit=limit, before=before)
    return {
        "id": conversation.pk,
        "agent": conversation.agent.slug,
        "title": conversation.title,
        "status": conversation.status,
        "error": conversation.error,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "messages": [
            {
                "id": m.pk,
                "position": m.position,
                "role": m.role,
                "content": m.content,
                "created_at": m.created_at,
                "tool_calls": [tool_call_out(c) for c in m.tool_calls.all()],
            }
            for m in page.messages
        ],
        "has_earlier": page.has_earlier,
        "earliest_position": page.earliest_position,
    }


@router.post("", response={201: ConversationOut})
def create_conversation(request, payload: ConversationIn):
    agent = agent_for(request.auth, payload.agent)
    if agent is None:  # or not one this user may use: the same answer
        raise HttpError(400, f"Unknown agent {payload.agent!r}.")
    conversation = services.start_conversation(user=request.auth, agent=agent, content=payload.message)
    # As stored, from memory: the owner may read it, the agent is in hand, and its one message too.
    first_page = MessagePage(list(conversation.messages.all()), has_earlier=False)
    return Status(201, conversation_out(conversation, page=first_page))


@router.get("/{conversation_id}", response=ConversationOut)
def get_conversation(request, conversation_id: UUID, paging: Query[MessagePageIn]):
    """The conversation with a page of its messages: the newest `limit` (default 50, at most 200),
    oldest first. `before=<position>` returns only messages before that position, so passing the
    response's `earliest_position` as `before` reads the page before, until `has_earlier` is false.
    A `limit` or `before` out of range or not a whole number is a 422."""
    conversation = conversation_for(request.auth, conversation_id)
    return conversation_out(conversation, limit=paging.limit, before=paging.before)


@router.post("/{conversation_id}/messages", response={202: Accepted})
def post_message(request, conversation_id: UUID, payload: MessageIn):
    conversation = conversation_for(request.auth, conversation_id)
    shown = None if payload.approval_ids is None else dict.fromkeys(payload.approval_ids, "")
    message = services.post_message(conversation=conversation, user=request.auth, content=payload.content, shown=shown)
    conversation.refresh_from_db(fields=["status"])
    return Status(202, {"message_id": message.pk, "status": conversation.status})


@router.post("/{conversation_id}/retry", response={202: Accepted})
def retry(request, conversation_id: UUID):
    conversation = conversation_for(request.auth, conversation_id)
    if conversation.status != Conversation.Status.FAILED:
        raise HttpError(409, "Only a failed conversation can be retried.")
    services.retry(conversation=conversation, user=request.auth)
    last = conversation.messages.order_by("-position").first()
    return Status(202, {"message_id": last.pk if last else 0, "status": Conversation.Status.RUNNING})


@router.post("/{conversation_id}/approve-all", response={200: ApprovedIds, 409: WouldDecide})
def approve_all(request, conversation_id: UUID, payload: ApproveAllIn | None = None):
    """Approve the pending calls listed in `ids` (with `shown_hashes`, the versions you were shown).
    Without `ids`, nothing is decided: a decision covers only what its decider listed, so while
    calls are pending the answer is a 409 naming them (`would_decide`) and their versions
    (`shown_hashes`), to post back as `ids` and `shown_hashes` once you have looked at them."""
    conversation = conversation_for(request.auth, conversation_id)
    if asks_only(request.auth):
        raise NotAllowed(ASKING_TOKEN)  # 403 before it names what it would decide
    if payload is None or payload.ids is None:
        pending = list(
            Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING)
            .only("pk", "arguments_hash", "edited_arguments", "edited_arguments_hash").order_by("pk")
        )
        if pending:
            return Status(409, {
                "detail": f"Name the calls to approve: {len(pending)} pending. Post them as ids (and shown_hashes) to approve exactly those.",
                "would_decide": [a.pk for a in pending], "shown_hashes": {str(a.pk): a.shown_hash for a in pending},
            })
        return {"approved": [], "needs_confirmation": []}
    outcome = decide_all(
        conversation_id=conversation.pk,
        user=request.auth,
        via=Approval.Via.API,
        shown={pk: payload.shown_hashes.get(str(pk), "") for pk in payload.ids},
    )
    return {"approved": [a.pk for a in outcome.decided], "needs_confirmation": outcome.needs_confirmation}


@router.post("/{conversation_id}/stop", response=Stopped)
def stop(request, conversation_id: UUID):
    """Stop the agent: cancel every pending approval and every call not yet started, discard a
    model answer in flight, let a running tool finish; the conversation is left `idle` (a failed
    one with nothing to stop stays `failed`). `cancelled`: the approvals whose calls were cancelled."""
    conversation = conversation_for(request.auth, conversation_id)
    cancelled = services.stop_conversation(conversation=conversation, user=request.auth, via=Approval.Via.API)
    conversation.refresh_from_db(fields=["status"])
    return {"status": conversation.status, "cancelled": cancelled}
