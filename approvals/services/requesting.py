"""Requesting an approval: the pause for a human that a gated call, a question or a plan makes."""
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import telemetry
from hitl.celery import enqueue_on_commit

from ..deciders import routing
from ..models import Approval, Route, Rule
from ..policy import explain, timeouts
from ..policy import versions as policy_versions
from ..signals import approval_requested
from .deadlines import warning_at
from .reviewing import REVIEWING


def request_approval(
    *,
    tool_call_id: int,
    conversation_id,
    requested_by_id: int,
    reason: str,
    risk: str,
    arguments_hash: str,
    approver_required: bool = False,
    timeout_seconds: int | None = None,
    timeout_action: str = timeouts.EXPIRE,
    preview: dict | None = None,
    preview_state: str = "",
    confirmation_hint: str = "",
    kind: str = Approval.Kind.ACTION,
    request: dict | None = None,
    rule_suggestion: dict | None = None,
    annotations: dict | None = None,
    route: Route | None = None,
    rule: Rule | None = None,
    explanation: list | None = None,
    asked_again_from: Approval | None = None,
    review_by: str = "",
) -> Approval:
    """A pause for a human: a gated call (`action`), or with `kind` and `request` a question or a
    plan (approvals.pauses). A gated call's `route` (approvals.deciders.routing.match) decides who approves
    it, how many must, and when they are reminded and it escalates; a routed call always needs an
    approver other than its requester. `rule`: the ask rule that holds it for a human; `explanation`:
    how it came to be asked (approvals.policy.explain). `asked_again_from`: the expired approval this one
    asks again (ask_again): its edit, if any, is kept, so the version shown is the same. `timeout_action`:
    what its deadline does if no one decided (approvals.policy.timeouts); an approve it may not do is
    stored as expire, with the reason in its explanation. `review_by`: the agent's AI reviewer model,
    for a call it may decide (approvals.reviewer.may_review): it waits for the reviewer first, and no
    one is asked (approval_requested) unless the reviewer escalates it."""
    now = timezone.now()
    quorum = route.quorum if route is not None else 1
    timeout_action, refused = timeouts.resolved(
        timeout_action if timeout_seconds else timeouts.EXPIRE,
        kind=kind, risk=risk, approver_required=approver_required or route is not None, routed=route is not None,
        quorum=quorum, confirmation=bool(confirmation_hint),  # step-up starts at high risk: never a low-risk call's
    )
    if timeout_action != timeouts.EXPIRE or refused:
        explanation = [*(explanation or []), explain.timeout(timeout_action, refused)]
    edit = {}
    if asked_again_from is not None and asked_again_from.is_edited:
        edit = {name: getattr(asked_again_from, name) for name in ("edited_arguments", "edited_arguments_hash", "edited_by", "edited_at")}
    approval = Approval.objects.create(
        asked_again_from=asked_again_from,
        **edit,
        route=route,
        quorum=quorum,
        **routing.deadlines(route, now),
        requested_at=now,
        tool_call_id=tool_call_id,
        conversation_id=conversation_id,
        requested_by_id=requested_by_id,
        reason=reason,
        risk=risk,
        arguments_hash=arguments_hash,
        approver_required=approver_required or route is not None,
        expires_at=now + timedelta(seconds=timeout_seconds) if timeout_seconds else None,
        warn_at=warning_at(now, timeout_seconds),
        timeout_action=timeout_action,
        preview=preview,
        preview_state=preview_state,
        confirmation_hint=confirmation_hint,
        kind=kind,
        question=request if kind == Approval.Kind.QUESTION else None,
        plan=request if kind == Approval.Kind.PLAN else None,
        rule_suggestion=rule_suggestion,
        annotations=annotations,
        rule=rule,
        explanation=explanation,
        policy_version=policy_versions.current_number(),
        trace_context=telemetry.trace_context(),  # its wait and decision join the trace of the step that asked
        **_reviewing(review_by, now),
    )
    telemetry.approval_requested(approval)
    if review_by:
        from ..tasks import review_call  # lazily: the tasks import the services

        enqueue_on_commit(review_call, approval.pk)
    else:
        transaction.on_commit(lambda: approval_requested.send(sender=Approval, approval=approval), robust=True)
    return approval


def _reviewing(model: str, now) -> dict:
    if not model:
        return {}
    until = now + timedelta(seconds=settings.HITL_REVIEWER_SECONDS)
    return {"review_state": REVIEWING, "reviewer_model": model[:200], "review_until": until}

