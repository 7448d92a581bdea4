"""Approving a call as a human edited it, and deciding a call while remembering the decision as a rule."""
import logging

from django.db import transaction
from django.utils import timezone

from .. import audit
from ..models import Approval, Risk, Rule
from ..permissions import can_see
from ..policy import calls, explain, rulemaking, rules
from ..policy.gate import RISKS
from ..signals import approval_edited
from .deciding import (
    StepUp, _announce_on_commit, _confirms, _decidable, _decision, _expire_if_overdue, _save_rule, _stepped_up, _stored, _undecided,
    decide, decide_by_rule, record_late,
)
from .errors import ConfirmationRequired, EditForbidden, WrongKind

logger = logging.getLogger(__name__)


def decide_remembering(
    approval_id: int,
    *,
    user,
    approve: bool,
    via: str,
    remember: dict,
    shown_hash: str,
    reason: str = "",
    confirmation: str = "",
    arguments: dict | None = None,
    comment: str = "",
    step_up: StepUp | None = None,
) -> tuple[Approval, Rule | None]:
    """Decide a tool call (approve_edited() with `arguments`, else decide()) and save the rule the
    decider asked to remember (approvals.policy.rulemaking.draft_from_call: `remember` holds its scope and
    optionally its conditions, note, expiry and uses). The rule is checked before anything is decided;
    it is saved only if this decision was stored as asked (an edit left pending saves none)."""
    approval = Approval.objects.select_related("tool_call", "conversation__agent").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if approval.kind != Approval.Kind.ACTION:
        raise WrongKind("Only a tool call is remembered as a rule; a question or a plan is decided each time.")
    # The rule is drawn from the version decided: the edit being approved, or the call as shown.
    decided_arguments = arguments if approve and arguments is not None else (
        approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
    )
    rule = rulemaking.draft_from_call(user, approval, approve=approve, call_arguments=decided_arguments, **remember)
    # Saved in the deciding transaction, only if the decision is stored as asked: whoever hears of
    # the decision (after its commit) finds the rule with it.
    seen = {"confirmation": confirmation, "shown_hash": shown_hash, "comment": comment, "step_up": step_up, "saving": rule}
    if approve and arguments is not None:
        decided = approve_edited(approval_id, user=user, arguments=arguments, via=via, **seen)
    else:
        decided = decide(approval_id, user=user, approve=approve, via=via, reason=reason, **seen)
    if rule.pk is None:  # an edit left pending, a vote toward a quorum: nothing remembered
        return decided, None
    logger.info("approval %s remembered as rule %s by %s", approval_id, rule.pk, user)
    return decided, rule


def approve_edited(
    approval_id: int, *, user, arguments, via: str, shown_hash: str, confirmation: str = "", comment: str = "",
    step_up: StepUp | None = None, saving: Rule | None = None,
) -> Approval:
    """Approve the call with arguments a human changed. They are validated with the tool's schema,
    gated again and screened by the rules like the model's own call (approvals.policy.rules.screen): an
    edit a deny rule forbids, or that repeats a call a human just rejected, is refused. If the edit
    makes the call stricter (riskier, four eyes, critical), or the call needs four eyes (whoever
    writes an edit does not also check it), the edit is stored and the approval stays pending for
    whoever may decide it. Returns the approval, approved or still pending. Raises InvalidArguments
    (nothing stored) for arguments the tool refuses, EditForbidden for an edit the rules refuse."""
    approval = _decidable(approval_id, user, approve=True, shown_hash=shown_hash, via=via)
    if approval.kind != Approval.Kind.ACTION:
        raise WrongKind("Only a tool call's arguments are edited; a question is answered and a plan's steps chosen.")
    checked = calls.checker().check(approval, arguments)
    if checked.arguments_hash == approval.shown_hash:  # no change after all: a plain approval
        return decide(
            approval_id, user=user, approve=True, via=via, shown_hash=shown_hash, confirmation=confirmation, comment=comment,
            step_up=step_up,
        )
    risk = max(checked.risk, approval.risk, key=RISKS.index)
    conversation = approval.conversation
    candidate = rules.Call(
        tool=approval.tool_call.name, arguments=checked.arguments, risk=risk,
        approver_required=approval.approver_required or checked.approver_required,
        max_auto_approve_risk=conversation.agent.max_auto_approve_risk,
        always_ask=rules.patterns_for(conversation.agent.always_ask, approval.tool_call.name), routed=approval.route_id is not None,
        step_up_from_risk=conversation.agent.step_up_from_risk,
    )
    screening = _screen_edit(approval, candidate, checked.arguments_hash)
    # An edit an ask rule (or always-ask pattern) matches is stored and waits for a human, as a stricter one.
    stricter = _is_stricter(checked, approval) or approval.approver_required or checked.approver_required or bool(screening.asks)
    edit = {
        "edited_arguments": checked.arguments,
        "edited_arguments_hash": checked.arguments_hash,
        "edited_by": user,
        "edited_at": timezone.now(),
        "risk": risk,
        "approver_required": approval.approver_required or checked.approver_required,
        "preview": checked.preview,
        "preview_state": checked.preview_state,
        "confirmation_hint": checked.confirmation_hint if risk == Risk.CRITICAL else "",
    }
    if stricter and approval.rule_suggestion is not None:  # what "Always…" offers: the edit, not the request
        edit["rule_suggestion"] = rules.suggestion(conversation, candidate, trust_after=conversation.agent.trust_after)
    if not stricter and approval.confirmation_required and not _confirms(approval, confirmation):
        raise ConfirmationRequired(f"Type {approval.confirmation_hint!r} to approve this critical call.")
    # The edit's own risk counts: one that approves needs the step-up its (possibly raised) risk asks.
    stepped_up = {} if stricter else _stepped_up(approval, user, step_up, risk=risk)
    decision = {} if stricter else _decision(Approval.Status.APPROVED, user, via, comment=comment) | stepped_up
    if decision and saving is not None:
        decision["remembered"] = True
    with transaction.atomic():
        if rule := rules.first_deny(screening):
            raise EditForbidden(f"Edit not saved. {rules.denial_reason(rule)}")
        asked = rules.first_ask(screening) if screening.asks else None
        applied = rules.Applied(rules.ASK, rule=None if isinstance(asked, rules.AlwaysAsk) else asked, asked=asked) if asked else rules.Applied()
        if applied.rule is not None:
            edit["rule"] = applied.rule  # the ask rule that holds the edit for a human
        edit["explanation"] = _explained_edit(approval, user, checked, screening, applied, decided=bool(decision))
        # An edit that decides is linked into the audit chain as it leaves the approval.
        link = audit.lock_head().extend([approval], {**edit, **decision}) if decision else {}
        updated = _undecided(approval).update(**edit, **decision, **link)
        if updated:
            approval.refresh_from_db()
        if updated and decision:
            _save_rule(saving, approval)
            _announce_on_commit([approval])
        elif updated:
            transaction.on_commit(lambda: approval_edited.send(sender=Approval, approval=approval), robust=True)
        elif _expire_if_overdue(approval_id):
            record_late([approval_id], user=user, via=via, approve=True)
    approval = _stored(approval, updated, user=user, status=Approval.Status.APPROVED if decision else "edited", via=via)
    if not decision and not screening.asks:
        # A stricter edit left pending meets the allow rules as the model's call would have (an ask beats
        # them): the use taken (and an at_most counted, under the rule's lock) in the deciding transaction.
        with transaction.atomic():
            rule = rules.first_allow(screening)
            if rule is not None:
                approval = decide_by_rule(approval, rule)
    else:
        rule = None
    if rule is not None:
        explanation = _explained_edit(approval, user, checked, screening, rules.Applied(rules.ALLOW, rule=rule), decided=False)
        Approval.objects.filter(pk=approval.pk).update(explanation=explanation)
        approval.explanation = explanation
    return approval


def _explained_edit(approval: Approval, user, checked, screening, applied, *, decided: bool) -> list[dict]:
    """The approval's explanation with the edit's own path after it (approvals.policy.explain)."""
    before = approval.explanation if isinstance(approval.explanation, list) else explain.summary(approval)
    path = explain.edit(user.get_username(), checked) + explain.rules(screening, applied, agent_name=approval.conversation.agent.name)
    if decided:
        last = explain.step("outcome", "approved", f"Approved as edited by {user.get_username()}.")
    else:
        last = explain.outcome(applied, gated=True)
    return before + path + [last]


def _screen_edit(approval: Approval, candidate: "rules.Call", arguments_hash: str) -> "rules.Screening":
    """What the rules say of an edited version, read before any write transaction (a condition never
    runs under the write lock). The rejection contract is enforced here at once: an edit into a call a
    human just rejected in this conversation is refused, naming that rejection."""
    screening = rules.screen(
        rules.applicable(approval.conversation, recently_expired=True), candidate, conversation_id=approval.conversation_id, arguments_hash=arguments_hash
    )
    if earlier := screening.repeats:
        who = earlier.decided_by.get_username() if earlier.decided_by else "someone"
        raise EditForbidden(f"{who} just rejected this same call in this conversation: {earlier.rejection_reason or 'no reason given'}")
    return screening


def _is_stricter(checked: calls.CheckedCall, approval: Approval) -> bool:
    return (
        RISKS.index(checked.risk) > RISKS.index(approval.risk)
        or (checked.approver_required and not approval.approver_required)
    )
