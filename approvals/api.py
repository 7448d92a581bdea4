"""Approvals in the JSON API: list what the caller may see, read one (waiting for its decision),
decide one, decide many, claim one, extend one's deadline, ask an expired one again."""
import asyncio
from collections import Counter
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import OuterRef, Prefetch, Subquery, prefetch_related_objects
from django.http import Http404
from ninja import Field, Router, Schema, Status
from pydantic import ConfigDict, StrictInt
from ninja.errors import HttpError

from core.db import release_connection, thread_pool
from core.inputs import is_storable
from core.live import Listening, conversation_group

from .deciders import routing, votes
from .pauses import questions
from .policy import explain
from .models import Approval, Vote
from .summary import summarize
from .services import (
    AlreadyVoted, CannotAskAgain, NotExpired, NotExtendable, answer, approve_edited, ask_again, claim, decide, decide_many,
    decide_remembering, extend, respond, unclaim,
)

router = Router(tags=["approvals"])
MAX_OFFSET = 10**9  # far past any real list, and far inside what every database's integers hold
MAX_REASON = 2000
MAX_IDS = 1000
ApprovalId = Annotated[int, Field(ge=1, le=2**63 - 1)]  # as the database stores them (64-bit)


class PreviewOut(Schema):
    kind: Literal["diff", "email", "file", "fetch", "text"]
    text: str


class QuestionOut(Schema):
    text: str
    type: Literal["text", "choice", "multi_choice", "number", "date", "confirm", "file"]
    options: list[str]
    min: float | None
    max: float | None
    default: Any = None
    required: bool
    details: str = Field("", description="A confirmation's details.")
    confirm_label: str | None = Field(None, description='A confirmation\'s yes button ("Delete"); null for other types.')
    cancel_label: str | None = Field(None, description='A confirmation\'s no button ("Go back"); null for other types.')
    accept: list[str] | None = Field(None, description='A file question\'s types (".csv", "text/csv", "image/*"; [] any); null for other types. Answered on the site only.')
    max_bytes: int | None = Field(None, description="A file question's size limit, in bytes; null for other types.")


class PlanStepOut(Schema):
    index: int
    action: str
    description: str
    optional: bool
    tool: str = Field("", description="The tool the step calls (\"\": none named): once approved, a call of a tool no approved step names waits for a person.")
    estimated_duration: int | None = Field(None, description="About how long the step takes, in seconds.")


class PlanStepChange(Schema):
    model_config = ConfigDict(extra="forbid")  # a step's tool, or whether it is optional, is the agent's: never changed here

    index: StrictInt = Field(description="The step, by its number in the plan as proposed (a number, not \"3\").")
    action: str | None = Field(None, description="The step's new words (what it does).")
    description: str | None = Field(None, description="The step's new details.")


class PlanOut(Schema):
    title: str
    steps: list[PlanStepOut]


class VoteOut(Schema):
    user: str
    decided_at: datetime
    via: str
    comment: str
    on_behalf_of: str | None


class CallOutcomeOut(Schema):
    status: Literal["succeeded", "failed"]
    result: str


class SummaryOut(Schema):
    sentence: str = Field(description="In words what approving does, naming its target: \"Write setup.sh (87 bytes)\", \"Fetch https://example.com/a?b=1\".")
    requester: str = Field(description="The username of the person who asked (for an outside agent: its token's user).")
    agent: str = Field(description="The agent that asks.")
    why: str = Field(description="Why a person is asked: the gate's, a rule's or the caller's words, or the risk.")


class ApprovalOut(Schema):
    id: int
    kind: Literal["action", "question", "plan"] = Field(
        description="What the agent waits for: leave for a tool call, an answer to `question`, or a go-ahead for `plan`."
    )
    status: str
    reason: str
    risk: str
    requested_at: datetime
    decided_by: str | None
    decided_via: str
    decided_at: datetime | None
    rejection_reason: str
    comment: str = Field(description="The decider's optional word on the decision (approving too), kept in the audit chain.")
    responded: str = Field(description="What a decider sent the agent instead of a decision (`respond`): the call was rejected, and the model read it. Empty otherwise.")
    arguments: dict = Field(description="The arguments as the model requested them.")
    approved_arguments: dict | None = Field(
        description="What was approved (and so runs): null until approved; equal to `arguments` unless edited."
    )
    edited_by: str | None
    preview: PreviewOut | None = Field(description="What the call will do, as the deciders were shown.")
    confirmation_required: bool = Field(description="Critical: approving needs `confirmation` equal to the hint.")
    confirmation_hint: str
    expires_at: datetime | None
    timeout_action: Literal["expire", "reject", "approve"] = Field(
        description="What `expires_at` does if no one decided by then: expire (nothing runs), reject (the model is told why), "
        "or approve (a low-risk call anyone may approve). Set from the agent's settings when it was requested."
    )
    question: QuestionOut | None = Field(description="A question's text, type and bounds; null for other kinds.")
    plan: PlanOut | None = Field(description="A plan's title and steps; null for other kinds.")
    answer: Any = Field(
        description='A question\'s answer once answered; an approved plan\'s {"approved_steps", "dropped_steps"}; else null.'
    )
    rule_id: int | None = Field(
        description="The rule that decided it at once (`decided_via: \"rule\"`), or the ask rule that made it wait for a human; else null."
    )
    annotations: dict | None = Field(
        description="A tool server's hints about the tool (MCP annotations, as the server gave them), or null: hints, not guarantees."
    )
    claimed_by: str | None = Field(
        description="Who said they are on it (POST /{id}/claim), while pending: a signal to the other approvers, not a lock; null once decided."
    )
    policy_version: int | None = Field(
        description="The number of the policy version in force when it was requested (manage.py export_policy shows the policy); null: before versions."
    )
    route: int | None = Field(description="The route that chose who decides it (GET /api/routes); null: the owner or any global approver.")
    quorum: int = Field(description="How many distinct eligible people must approve it (1 without a route).")
    votes: list[VoteOut] = Field(description="The approvals counted toward the quorum so far, oldest first (empty when the quorum is 1).")
    on_behalf_of: str | None = Field(description="Whose decision `decided_by` made, through a delegation; null: their own.")
    escalated_at: datetime | None = Field(description="When it escalated to the route's escalation groups; null: not (yet).")
    shown_hash: str = Field(
        description="The version a decider is shown now (the hash of the arguments as they stand): send it with a decision; it changes when the call is edited."
    )
    outcome: CallOutcomeOut | None = Field(
        None, description="How the approved call ended, once it ran (for a request from outside: as its caller reported); null while not known."
    )
    summary: SummaryOut = Field(description="The call in words, as every surface shows it (approvals.summary).")
    extended_at: datetime | None = Field(None, description="When its deadline was extended (once at most: POST /{id}/extend); null: never.")
    extended_by: str | None = Field(None, description="Who extended its deadline; null: nobody.")
    asked_again_from: int | None = Field(None, description="The expired approval this one asks again (POST /{id}/ask-again); null: a first ask.")
    asked_again: int | None = Field(None, description="Once expired: the approval that asks it again, if someone did; else null.")
    review_state: Literal["", "reviewing", "escalated", "decided"] = Field(
        "", description="Where the agent's AI reviewer is with it: reviewing (no one is asked yet; a person may still decide), "
        "escalated (it asked a person: see `reviewer_rationale`), decided (`decided_via: \"reviewer\"`); \"\": not reviewed."
    )
    reviewer_model: str = Field("", description="The reviewer's model, when it looked at the call; else \"\".")
    reviewer_rationale: str = Field(
        "", description="Why the reviewer approved the call, or asked a person about it; \"\" while reviewing or not reviewed."
    )


class ToolCallSummary(Schema):
    id: int
    name: str
    arguments: dict
    status: str


class ApprovalItem(ApprovalOut):
    conversation_id: str
    tool_call: ToolCallSummary


class ApprovalList(Schema):
    items: list[ApprovalItem]
    count: int


class RememberIn(Schema):
    scope: Literal["conversation", "agent_user", "agent", "global"] = Field(
        description="Where the rule holds: this conversation, your conversations with this agent; agent and global: approvers only."
    )
    arguments: dict[str, Any] | None = Field(
        None, description="The rule's argument conditions ({name: glob}); left out: prefilled from the call; {}: any arguments."
    )
    note: str = ""
    expires_at: datetime | None = Field(
        None, description="When the rule stops deciding (ISO 8601; without a zone, UTC). With scope conversation: a "
        "time-boxed grant, as the card's 'Approve for 10 minutes in this conversation' makes (now + 10 minutes).",
    )
    max_uses: int | None = Field(None, ge=1, le=10**9)


SHOWN_HASH = Field("", max_length=64, description="The `shown_hash` you decided on: a decision on a call that changed since is refused (409). Required to approve a call edited since it was requested.")


class DecisionIn(Schema):
    decision: Literal["approve", "reject", "respond"] = Field(
        description="`respond`: send the agent `message` instead of a decision; the call is rejected and the model reads the message."
    )
    message: str = Field("", description="With `respond`: what the agent should do instead (\"use staging, not prod\").")
    shown_hash: str = SHOWN_HASH
    comment: str = Field("", description="Your word on the decision (approving too), kept in the audit chain and shown in history.")
    reason: str = ""
    steps: list[StrictInt | PlanStepChange] | None = Field(
        None, description="For a plan: the steps approved (every required one), in the order to take them, each a step number "
        "or a step as you changed it ({\"index\", \"action\", \"description\"}); all, as proposed, if left out."
    )
    arguments: dict | None = Field(None, description="Approve these arguments instead (checked by the tool's schema and the policy again).")
    confirmation: str = Field("", description="For a critical call: its `confirmation_hint`, typed.")
    remember: RememberIn | None = Field(
        None, description="Also save the decision as a rule: approving makes an allow rule, rejecting a deny rule, for this tool."
    )


class DecisionsIn(Schema):
    decision: Literal["approve", "reject"]
    reason: str = ""
    ids: list[ApprovalId]
    shown_hashes: dict[str, str] = Field(
        {}, description="{id: shown_hash} of the approvals as you listed them: one that changed since lands in `changed`. An id without one approves only a call never edited."
    )


class DecisionsOut(Schema):
    decided: list[ApprovalItem]
    already_decided: list[int]
    not_allowed: list[int]
    not_found: list[int]
    needs_confirmation: list[int] = Field(description="Critical calls: approved one at a time, with their confirmation.")
    changed: list[int] = Field(description="Edited by someone else while this decision was on its way.")
    voted: list[ApprovalItem] = Field([], description="Approvals that need several approvers: your vote is counted, they still wait for more.")


class AnswerIn(Schema):
    shown_hash: str = SHOWN_HASH
    answer: Any = Field(None, description="Text, a number, a YYYY-MM-DD date, an option, a list of options, or true/false, as the question's type says.")
    decline: bool = Field(False, description="Decline to answer (the agent is told, with `reason`).")
    reason: str = ""


def approval_out(approval: Approval) -> dict:
    """An approval as every surface of the API shows it (the tool call must be loaded with it)."""
    return {
        "id": approval.pk,
        "status": approval.status,
        "reason": approval.reason,
        "risk": approval.risk,
        "requested_at": approval.requested_at,
        "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
        "decided_via": approval.decided_via,
        "decided_at": approval.decided_at,
        "rejection_reason": approval.rejection_reason,
        "comment": approval.comment,
        "responded": approval.responded,
        "arguments": approval.tool_call.arguments,
        "approved_arguments": approval.approved_arguments,
        "edited_by": approval.edited_by.get_username() if approval.edited_by else None,
        "preview": approval.preview,
        "confirmation_required": approval.confirmation_required,
        "confirmation_hint": approval.confirmation_hint,
        "expires_at": approval.expires_at,
        "timeout_action": approval.timeout_action,
        "kind": approval.kind,
        "question": questions.as_shown(approval.question),
        "plan": approval.plan,
        "answer": approval.answer,
        "rule_id": approval.rule_id,
        "annotations": approval.annotations,
        "shown_hash": approval.shown_hash,
        "claimed_by": approval.claimed_by.get_username() if approval.claimed_by_id else None,
        "policy_version": approval.policy_version,
        "route": approval.route_id,
        "quorum": approval.quorum,
        "votes": votes.as_dicts(approval),
        "on_behalf_of": approval.on_behalf_of.get_username() if approval.on_behalf_of_id else None,
        "escalated_at": approval.escalated_at,
        "outcome": _outcome(approval.tool_call) if approval.status == Approval.Status.APPROVED else None,
        "summary": summarize(approval).as_json(),
        "extended_at": approval.extended_at,
        "extended_by": approval.extended_by.get_username() if approval.extended_by_id else None,
        "asked_again_from": approval.asked_again_from_id,
        "asked_again": _asked_again(approval),
        "review_state": approval.review_state,
        "reviewer_model": approval.reviewer_model,
        "reviewer_rationale": approval.reviewer_rationale,
    }


def _asked_again(approval: Approval) -> int | None:
    """Only an expired approval is asked again: read from visible_approvals()' annotation, else looked up."""
    if approval.status != Approval.Status.EXPIRED:
        return None
    if hasattr(approval, "asked_again_id"):
        return approval.asked_again_id
    return Approval.objects.filter(asked_again_from=approval).values_list("pk", flat=True).first()


def _outcome(call) -> dict | None:
    if call.status == "succeeded":
        return {"status": "succeeded", "result": call.result}
    if call.status == "failed":
        return {"status": "failed", "result": call.error or call.result}
    return None


def approval_item(approval: Approval) -> dict:
    call = approval.tool_call
    return approval_out(approval) | {
        "conversation_id": str(approval.conversation_id),
        "tool_call": {"id": call.pk, "name": call.name, "arguments": call.arguments, "status": call.status},
    }


def visible_approvals(user):
    approvals = Approval.objects.select_related(
        "tool_call", "decided_by", "edited_by", "claimed_by", "on_behalf_of", "requested_by", "extended_by", "conversation__agent"
    )
    # Which approval asks each one again, in the same query as the page (only expired ones are).
    asked_again = Approval.objects.filter(asked_again_from=OuterRef("pk")).order_by().values("pk")[:1]
    return approvals.filter(routing.visible_filter(user)).annotate(asked_again_id=Subquery(asked_again)).prefetch_related(VOTES)


# Each approval's votes with their voters, in one query for a page of approvals.
VOTES = Prefetch("votes", queryset=Vote.objects.select_related("user", "on_behalf_of"))


@router.get("", response=ApprovalList)
def list_approvals(
    request,
    status: Approval.Status | None = None,
    kind: Approval.Kind | None = None,
    agent: str = "",
    tool: str = "",
    thread: str = "",
    requester: str = "",
    since: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
):
    """The approvals the caller may see (their own, or all for an approver), oldest first.
    `thread` keeps those of one outside thread (the `thread` of POST /api/approval-requests),
    `requester` those one user asked for (a username); `since` keeps those requested at or after
    it; `limit` is at most 500."""
    if not all(is_storable(text) for text in (agent, tool, thread, requester)):
        raise HttpError(400, "`agent`, `tool`, `thread` and `requester` must be text without NUL characters.")
    approvals = visible_approvals(request.auth)
    if thread:
        approvals = approvals.filter(conversation__external_thread=thread)
    if requester:
        approvals = approvals.filter(requested_by__username=requester)
    if status:
        approvals = approvals.filter(status=status)
    if kind:
        approvals = approvals.filter(kind=kind)
    if agent:
        approvals = approvals.filter(conversation__agent__slug=agent)
    if tool:
        approvals = approvals.filter(tool_call__name=tool)
    if since:
        try:
            approvals = approvals.filter(requested_at__gte=since.astimezone(dt_timezone.utc))
        except OverflowError:
            raise HttpError(400, "`since` is outside the range of dates this API handles.") from None
    limit = max(1, min(limit, 500))
    offset = max(0, min(offset, MAX_OFFSET))
    page = approvals.order_by("requested_at", "pk")[offset : offset + limit]
    return {"items": [approval_item(a) for a in page], "count": approvals.count()}


@router.post("/decisions", response=DecisionsOut)
def decide_approvals(request, payload: DecisionsIn):
    """Decide 1 to 1000 approvals in one request. Each id lands in one list: `decided` (with the
    stored decision), `already_decided` (someone decided first), `not_allowed` (four eyes: an
    approver other than the requester must decide it; or a question or plan, which is answered on
    its own: POST /{id}/answer, or a plan's decision with its steps) or `not_found` (unknown, or
    not yours). Rejecting declines a question and rejects a whole plan."""
    if not 1 <= len(payload.ids) <= MAX_IDS:
        raise HttpError(400, f"Send between 1 and {MAX_IDS} approval ids.")
    if len(payload.reason) > MAX_REASON:
        raise HttpError(400, f"The reason is longer than {MAX_REASON} characters.")
    outcome = decide_many(
        {pk: payload.shown_hashes.get(str(pk), "") for pk in payload.ids},
        user=request.auth,
        approve=payload.decision == "approve",
        via=Approval.Via.API,
        reason=payload.reason,
    )
    # The approvals as their decision stored them, calls loaded (decide_many locked them so), in id order.
    answered = outcome.decided + outcome.voted
    prefetch_related_objects(answered, "requested_by", "conversation__agent")  # their summaries, in a few queries
    prefetch_related_objects([a for a in answered if a.edited_by_id], "edited_by")
    prefetch_related_objects([a for a in answered if a.extended_by_id], "extended_by")
    return {
        "decided": [approval_item(a) for a in outcome.decided],
        "already_decided": outcome.already_decided,
        # Questions and plans are answered one at a time (POST /{id}/answer, a plan's decision with
        # its steps): approving one in bulk is not allowed.
        "not_allowed": sorted(outcome.not_allowed + outcome.needs_answer),
        "not_found": outcome.not_found,
        "needs_confirmation": outcome.needs_confirmation,
        "changed": outcome.changed,
        "voted": [approval_item(a) for a in outcome.voted],
    }


@router.post("/{approval_id}/decision", response=ApprovalItem)
def decide_approval(request, approval_id: ApprovalId, payload: DecisionIn):
    """Approve or reject one call. With `arguments`, approve those instead: they are validated by
    the tool's schema (400 naming the field) and gated again; an edit that makes the call stricter
    is stored and the approval stays `pending` for whoever must decide it. A critical call needs
    `confirmation` (400 without it). 409 when it was decided, cancelled or expired first (past
    `expires_at` it expires now), or edited since you last read it."""
    if len(payload.reason) > MAX_REASON or len(payload.comment) > MAX_REASON:
        raise HttpError(400, f"The reason and the comment are at most {MAX_REASON} characters each.")
    approve = payload.decision == "approve"
    seen = {"user": request.auth, "via": Approval.Via.API, "shown_hash": payload.shown_hash, "confirmation": payload.confirmation, "comment": payload.comment}
    try:
        if payload.decision == "respond":
            if len(payload.message) > MAX_REASON:
                raise HttpError(400, f"The message is at most {MAX_REASON} characters.")
            return approval_item(respond(approval_id, user=request.auth, via=Approval.Via.API, shown_hash=payload.shown_hash, message=payload.message))
        if payload.remember is not None:
            decide_remembering(
                approval_id, approve=approve, remember=payload.remember.dict(), reason=payload.reason, arguments=payload.arguments, **seen
            )
        elif approve and payload.arguments is not None:
            approve_edited(approval_id, arguments=payload.arguments, **seen)
        else:
            # The approval as its decision stored it, its call loaded: answered without reading it again.
            return approval_item(decide(approval_id, approve=approve, reason=payload.reason, steps=_plan_steps(payload.steps) if approve else None, **seen))
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    return approval_item(visible_approvals(request.auth).get(pk=approval_id))


@router.post("/{approval_id}/answer", response=ApprovalItem)
def answer_question(request, approval_id: ApprovalId, payload: AnswerIn):
    """Answer a question (`answer`, checked against its type: 400 saying why, and it stays pending),
    or decline to answer it (`decline: true`, with a `reason`). 409 when it was answered, declined,
    cancelled or expired first; 404 for a question you may not see."""
    if len(payload.reason) > MAX_REASON:
        raise HttpError(400, f"The reason is longer than {MAX_REASON} characters.")
    if not payload.decline and payload.answer is None:
        raise HttpError(400, "Send `answer`, or `decline: true` with a `reason`.")
    try:
        answer(
            approval_id, user=request.auth, via=Approval.Via.API, shown_hash=payload.shown_hash, value=payload.answer,
            decline=payload.decline, reason=payload.reason,
        )
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    return approval_item(visible_approvals(request.auth).get(pk=approval_id))


@router.post("/{approval_id}/claim", response=ApprovalItem)
def claim_approval(request, approval_id: ApprovalId):
    """Say you are on it: `claimed_by` becomes you, on every inbox and card, live. A signal, not a
    lock: whoever may decide still may, and another's claim replaces yours. It ends with the
    decision. 403 if you may see it but not decide it; 404 if you may not see it; 409 once decided."""
    return _claimed(request, approval_id, claim)


@router.delete("/{approval_id}/claim", response=ApprovalItem)
def unclaim_approval(request, approval_id: ApprovalId):
    """End the claim (yours, or a colleague's left behind): `claimed_by` null. As for the claim: 403, 404, 409."""
    return _claimed(request, approval_id, unclaim)


def _claimed(request, approval_id: int, change) -> dict:
    try:
        change(approval_id, user=request.auth)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    return approval_item(visible_approvals(request.auth).get(pk=approval_id))


class ExtendIn(Schema):
    seconds: int | None = Field(
        None, ge=1, le=10**9, description="How much later it expires; left out: by the agent's approval timeout, which is also the most."
    )


@router.post("/{approval_id}/extend", response=ApprovalItem)
def extend_approval(request, approval_id: ApprovalId, payload: ExtendIn | None = None):
    """Push a pending approval's deadline back, once (by `seconds`, at most and by default the
    agent's approval timeout): for its requester or someone who may approve it. It gets a new
    warning before the new deadline. 409 when it has no deadline, was extended already, or is
    decided or expired (ask it again instead: POST /{id}/ask-again); 403 if you may see it but not
    extend it; 404 if you may not see it."""
    try:
        extend(approval_id, user=request.auth, via=Approval.Via.API, seconds=payload.seconds if payload else None)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except NotExtendable as exc:
        raise HttpError(409, str(exc)) from None
    return approval_item(visible_approvals(request.auth).get(pk=approval_id))


@router.post("/{approval_id}/ask-again", response={201: ApprovalItem})
def ask_approval_again(request, approval_id: ApprovalId):
    """Ask an expired approval again: a new pending approval (201) for the same call and version
    (the same `shown_hash`, `asked_again_from` the old one, which then names it in `asked_again`),
    without asking the model again; once decided, the call runs as any call does. For its requester
    or someone who may approve it. 409 when it is not expired, was asked again already, or its
    conversation is busy (a turn running, other calls waiting), or for an MCP client's call (its
    client was told it timed out); 403, 404 as for a decision."""
    try:
        asked = ask_again(approval_id, user=request.auth, via=Approval.Via.API)
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except (NotExpired, CannotAskAgain) as exc:
        raise HttpError(409, str(exc)) from None
    return Status(201, approval_item(visible_approvals(request.auth).get(pk=asked.pk)))


RECHECK_SECONDS = 1.0
_database = thread_pool("api-wait", 4)  # long polls read here, between waits that hold no thread
# Long polls waiting now, per user, in this process: one user's hundreds never crowd out another's reads.
_waiting: Counter = Counter()


class TooManyWaiting(Exception):
    """More long polls of one user at once than HITL_LONG_POLLS_PER_USER: a 429 (hitl.api)."""

    retry_after = 1

    def __init__(self):
        super().__init__(
            f"You have {settings.HITL_LONG_POLLS_PER_USER} requests waiting (?wait=) already: "
            "wait on fewer approvals at once, or read without ?wait."
        )


class ApprovalWithConversation(ApprovalItem):
    conversation: str = Field(description="The conversation it belongs to (for a request from outside: one per thread of the caller).")


def approval_object(user, approval_id: int) -> dict | None:
    """An approval as GET /{id} and the approval requests answer it, or None if `user` may not see it."""
    approval = visible_approvals(user).filter(pk=approval_id).first()
    return None if approval is None else approval_item(approval) | {"conversation": str(approval.conversation_id)}


def _approval_object_now(user_id: int, approval_id: int) -> dict | None:
    """approval_object() for the user as they are now, not as the request found them: whoever is
    deactivated, or loses a permission or a route's group, while a long poll waits stops seeing it."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return None if user is None else approval_object(user, approval_id)


def _still_pending(approval_id: int) -> bool:
    """What a long poll re-reads each second: one small query (hundreds of polls share 4 threads);
    the approval itself, and whether its poller may still see it, are read once, when it answers."""
    return Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING).exists()


class ExplainStep(Schema):
    step: str = Field(description="What was applied: gate, risk, four eyes, route, a rule (`rule #N (effect tool)`), repeat check, outcome…")
    outcome: str
    detail: str


class Explanation(Schema):
    steps: list[ExplainStep]


@router.get("/{approval_id}/explain", response=Explanation)
def explain_approval(request, approval_id: ApprovalId):
    """How the call came to be asked, or decided at once: its decision path in the order applied
    (the gate and why, each rule considered and why it matched or was skipped, the route, the repeat
    check, the outcome). 404 if you may not see the approval."""
    approval = Approval.objects.filter(routing.visible_filter(request.auth), pk=approval_id).first()
    if approval is None:
        raise Http404("No such approval.")
    return {"steps": explain.steps_of(approval)}


# Last: its path would take "/decisions" too, were it declared before that route.
@router.get("/{approval_id}", response=ApprovalWithConversation)
async def get_approval(request, approval_id: ApprovalId, wait: int = 0):
    """One approval (404 if you may not see it). With `wait=N` (at most 60 s), answered as soon as it
    is decided or after N seconds, whichever is first: a long poll that holds no database connection
    and no thread of a shared pool while it waits (it listens for the conversation's pushes, and reads
    the row again every second in case one was lost, on the few threads of `_database`). Django's
    sync middleware keeps the request's own thread until it answers: one per poll, never shared."""
    # The token's user was read on this request's own thread (Django runs the middleware there, and
    # django-ninja the authentication): give that connection back to the pool first. Kept, each
    # waiting poll would hold one, and so would each request waiting for `_database`'s threads,
    # whose reads need connections of the same pool: 300 at once held all 20 (HITL_DB_POOL_SIZE)
    # and waited for one another until the pool's timeout (503s for everyone).
    await sync_to_async(release_connection)()
    wait = max(0, min(wait, settings.HITL_API_MAX_WAIT_SECONDS))
    if not wait:
        return _found(await _database(approval_object)(request.auth, approval_id))
    user_id = request.auth.pk
    if _waiting[user_id] >= settings.HITL_LONG_POLLS_PER_USER:
        raise TooManyWaiting  # before any read: the extra ones cost no database thread
    # Counted before the first read, not after it: polls that arrive together all await that read
    # at once, and counted after it each would pass the check above (300 at once let ~250 wait).
    _waiting[user_id] += 1
    try:
        item = _found(await _database(approval_object)(request.auth, approval_id))
        if item["status"] != Approval.Status.PENDING:
            return item
        async with Listening(conversation_group(item["conversation_id"])) as listening:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            while (left := deadline - loop.time()) > 0:
                await listening.wait(min(left, RECHECK_SECONDS))
                if not await _database(_still_pending)(approval_id):
                    break
    finally:
        _waiting[user_id] -= 1
        if _waiting[user_id] <= 0:
            del _waiting[user_id]
    return _found(await _database(_approval_object_now)(user_id, approval_id))  # as its poller may see it now


def _found(item: dict | None) -> dict:
    if item is None:
        raise Http404("No such approval.")
    return item


def _plan_steps(steps: list | None) -> list | None:
    """The steps as plans.approve reads them: numbers, or changes without the words left out."""
    if steps is None:
        return None
    return [step if isinstance(step, int) else step.model_dump(exclude_none=True) for step in steps]
