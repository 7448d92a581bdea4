"""Writes on approvals: request one, decide one (first decision wins), decide several."""
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hitl import telemetry
from hitl.inputs import storable

from . import announcements, audit, calls, explain, plans, policy_versions, questions, routing, rulemaking, rules, webhooks
from .models import Approval, LateDecision, Risk, Route, Rule, Vote, Webhook
from .models import Outcome as ReportedOutcome  # `Outcome` here is what deciding several approvals did
from .permissions import can_decide, can_see
from .policy import RISKS
from .signals import approval_claimed, approval_edited, approval_extended, approval_requested, approval_voted, approvals_expiring

logger = logging.getLogger(__name__)


class DecisionError(Exception):
    pass


class AlreadyDecided(DecisionError):
    """Someone (or the timeout) decided first; the stored decision stands."""

    def __init__(self, approval: Approval):
        self.approval = approval
        super().__init__(f"Approval {approval.pk} was already {approval.status}.")


class ShownCut(DecisionError):
    """An approve through a message that showed the call cut (its arguments or preview did not fit):
    such a message can reject, never approve. The site shows the whole call and approves it."""

    def __init__(self):
        super().__init__(SHOWN_CUT)


SHOWN_CUT = (
    "This message showed the call cut, so it can only reject: open the site to see the whole call and approve it there."
)


class NotAllowed(DecisionError):
    """The user may see the approval but not decide it (four eyes: an approver must)."""


class AlreadyVoted(DecisionError):
    """This person's vote (or the vote of whom they act for) is already counted: one vote each."""


class ConfirmationRequired(DecisionError):
    """A critical call is approved only with its typed confirmation."""


class ArgumentsChanged(DecisionError):
    """The call was edited after the decider saw it: they would approve what they were not shown."""


class EditForbidden(DecisionError):
    """An edit the rules refuse (a deny rule, or the rejection contract): nothing is stored."""


CHANGED = "The call changed after you saw it (it was edited): look at it again before deciding."


class StepUpRequired(DecisionError):
    """Approving this call needs the approver's passkey on the site (the agent's step_up_from_risk):
    every other surface may only reject it."""


STEP_UP = "Approve on the site with your passkey: this call needs step-up."


@dataclass(frozen=True)
class StepUp:
    """Proof that `user_id` just passed a passkey ceremony (stepup.ceremony) whose challenge was
    issued for this approval at this version and consumed once: only the site's approve button
    makes one. `credential_id` is kept on the approval and hashed into its audit link."""

    approval_id: int
    shown_hash: str
    user_id: int
    credential_id: str


def needs_step_up(approval: Approval, *, risk: str = "") -> bool:
    """Whether approving it (at `risk`, an edit's, if given) needs a passkey: a tool call or plan at
    or above its agent's step_up_from_risk."""
    threshold = approval.conversation.agent.step_up_from_risk
    risk = risk or approval.risk
    return bool(threshold) and approval.kind != Approval.Kind.QUESTION and RISKS.index(risk) >= RISKS.index(threshold)


def _stepped_up(approval: Approval, user, step_up: "StepUp | None", *, risk: str = "") -> dict:
    """The decision's step-up field when approving needs one: the proof must be for this approval,
    this version and this user. Raises StepUpRequired otherwise."""
    if not needs_step_up(approval, risk=risk):
        return {}
    if step_up is None or (step_up.approval_id, step_up.shown_hash, step_up.user_id) != (approval.pk, approval.shown_hash, user.pk):
        raise StepUpRequired(STEP_UP)
    return {"step_up_assertion": step_up.credential_id}


class WrongKind(DecisionError):
    """A question is answered (or declined), not approved; an action or a plan is decided, not answered."""


class InvalidAnswer(DecisionError):
    """An answer the question does not take, or plan steps the plan does not allow; nothing is decided."""


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
) -> Approval:
    """A pause for a human: a gated call (`action`), or with `kind` and `request` a question or a
    plan (approvals.pauses). A gated call's `route` (approvals.routing.match) decides who approves
    it, how many must, and when they are reminded and it escalates; a routed call always needs an
    approver other than its requester. `rule`: the ask rule that holds it for a human; `explanation`:
    how it came to be asked (approvals.explain). `asked_again_from`: the expired approval this one
    asks again (ask_again): its edit, if any, is kept, so the version shown is the same."""
    now = timezone.now()
    edit = {}
    if asked_again_from is not None and asked_again_from.is_edited:
        edit = {name: getattr(asked_again_from, name) for name in ("edited_arguments", "edited_arguments_hash", "edited_by", "edited_at")}
    approval = Approval.objects.create(
        asked_again_from=asked_again_from,
        **edit,
        route=route,
        quorum=route.quorum if route is not None else 1,
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
    )
    telemetry.approval_requested(approval)
    transaction.on_commit(lambda: approval_requested.send(sender=Approval, approval=approval), robust=True)
    return approval


def warning_at(start, timeout_seconds: int | None):
    """When a deadline `timeout_seconds` after `start` is warned of: at HITL_EXPIRY_WARNING_AT of
    the wait (80 %), and at least a minute before it (at once, for a wait shorter than a minute)."""
    if not timeout_seconds:
        return None
    fraction = start + timedelta(seconds=timeout_seconds * settings.HITL_EXPIRY_WARNING_AT)
    return max(start, min(fraction, start + timedelta(seconds=timeout_seconds - 60)))


def decide(
    approval_id: int,
    *,
    user,
    approve: bool,
    via: str,
    shown_hash: str,
    reason: str = "",
    confirmation: str = "",
    steps: list[int] | None = None,
    comment: str = "",
    step_up: StepUp | None = None,
    shown_whole: bool = True,
) -> Approval:
    """Record one decision on a tool call or a plan (`steps`: the plan's approved steps, all if None). Raises Approval.DoesNotExist for an approval the user may not see.

    `shown_hash` is the version the decider was shown (`Approval.shown_hash` as the surface rendered
    it), required of every surface: if the call changed since, nothing is decided; "" (a surface that
    showed no version) approves only a call never edited. A critical call is approved only with
    `confirmation` equal to its hint. Past `expires_at` the approval expires now, whether or not the
    sweep ran. `comment` is the decider's optional word on it, kept and chained with the decision.
    Approving a call at or above its agent's step_up_from_risk needs `step_up` (StepUpRequired).
    `shown_whole` False: the surface showed the call cut (a channel's message too small for it),
    so approving raises ShownCut, whatever buttons it had.
    """
    approval = _decidable(approval_id, user, approve=approve, shown_hash=shown_hash, shown_whole=shown_whole, via=via)
    if approval.kind == Approval.Kind.QUESTION:
        raise WrongKind("This is a question: answer it, or decline to answer.")
    if steps is not None and approval.kind != Approval.Kind.PLAN:
        raise WrongKind("Only a plan has steps to choose.")
    if approve and approval.confirmation_required and not _confirms(approval, confirmation):
        raise ConfirmationRequired(f"Type {approval.confirmation_hint!r} to approve this critical call.")
    stepped_up = _stepped_up(approval, user, step_up) if approve else {}
    if approve and approval.quorum > 1:
        return _vote(approval, user=user, via=via, comment=comment, stepped_up=stepped_up)
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    decision = _decision(status, user, via, reason, comment=comment) | _on_behalf(approval, user) | stepped_up
    if approve and approval.kind == Approval.Kind.PLAN:
        decision["answer"] = _plan_answer(approval, steps)
    return _store_decision(approval, decision, user=user, via=via)


def _on_behalf(approval: Approval, user) -> dict:
    """Whose decision it is when `user` decides through a delegation (set by _decidable)."""
    acting = getattr(approval, "acting_as", None)
    return {"on_behalf_of": acting} if acting is not None and acting.pk != user.pk else {}


def _vote(approval: Approval, *, user, via: str, comment: str = "", stepped_up: dict | None = None) -> Approval:
    """Cast `user`'s approve toward the quorum, as whom they act for (approvals.routing.acting_as),
    at the version they saw; the quorum-th distinct vote approves the call. Votes are counted under
    the chain's lock, so two last votes never both decide, and one person never counts twice (a
    unique constraint says so too). Raises AlreadyVoted, AlreadyDecided or ArgumentsChanged."""
    voter = approval.acting_as
    with transaction.atomic():
        head = audit.lock_head()  # every decider and voter takes it first: the count below is exact
        if not _undecided(approval).exists():
            if _expire_if_overdue(approval.pk):
                record_late([approval.pk], user=user, via=via, approve=True)
            decided = None
        else:
            counted = list(Vote.objects.filter(approval=approval, shown_hash=approval.shown_hash))
            people = {vote.user_id for vote in counted} | {vote.voter_id for vote in counted}
            if user.pk in people or voter.pk in people:
                who = "you" if user.pk in people else voter.get_username()
                raise AlreadyVoted(f"{who.capitalize() if who == 'you' else who} already voted on this call: one vote each.")
            vote = Vote(
                approval=approval, user=user, on_behalf_of=None if voter.pk == user.pk else voter, voter=voter,
                shown_hash=approval.shown_hash, decided_at=timezone.now(), via=via,
                comment=storable(comment)[:MAX_WORDS].strip(),
            )
            audit.link_vote(head, vote)
            vote.save()
            decided = len(counted) + 1 >= approval.quorum
            if decided:
                decision = _decision(Approval.Status.APPROVED, user, via, comment=comment) | _on_behalf(approval, user) | (stepped_up or {})
                if not _undecided(approval).update(**decision, **head.extend([approval], decision)):
                    raise ArgumentsChanged(CHANGED)  # not reached: the lock is held since the check
                for name, value in decision.items():
                    setattr(approval, name, value)
                _announce_on_commit([approval])
            else:
                deliveries = webhooks.create_deliveries([approval], Webhook.Event.VOTED)  # an outbox, as for decisions
                transaction.on_commit(
                    lambda: approval_voted.send(sender=Approval, approval=approval, vote=vote, deliveries=deliveries), robust=True
                )
    if decided is None:
        return _stored(approval, 0, user=user, status="voted", via=via)
    logger.info("approval %s: %s voted%s via %s", approval.pk, user, " (the deciding vote)" if decided else "", via)
    return approval


def decide_by_rule(approval: Approval, rule) -> Approval:
    """Decide a just-requested approval at once by an allow or deny rule (approvals.rules.verdict):
    decided via `rule`, by nobody, naming the rule; in the audit chain like any decision."""
    approve = rule.effect == rule.Effect.ALLOW
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    decision = _decision(status, None, Approval.Via.RULE, "" if approve else rules.denial_reason(rule)) | {"rule": rule}
    return _store_decision(approval, decision, user=None, via=Approval.Via.RULE, announce_here=True)


def approve_by_policy(approval: Approval) -> Approval:
    """Approve a just-requested call from outside at once, by nobody, via `policy`: the agent's
    policy does not gate it (chat.outside). In the audit chain like any decision."""
    decision = _decision(Approval.Status.APPROVED, None, Approval.Via.POLICY)
    return _store_decision(approval, decision, user=None, via=Approval.Via.POLICY, announce_here=True)


class OutcomeConflict(DecisionError):
    """An outcome that cannot be recorded for this approval: not approved, another version than
    the one approved, or reported already."""


def record_outcome(approval: Approval, *, user, status: str, result: str, shown_hash: str) -> ReportedOutcome:
    """Keep what the caller says happened when it ran the approved call, once, for the version
    approved, linked into the audit chain. In the caller's transaction."""
    if approval.status != Approval.Status.APPROVED:
        raise OutcomeConflict(f"Approval {approval.pk} is {approval.status}: only an approved call has an outcome to report.")
    if shown_hash != approval.shown_hash:
        raise OutcomeConflict("This is not the version that was approved: report the outcome with the approval's `shown_hash`.")
    with transaction.atomic():
        head = audit.lock_head()  # also what makes the check below exact: one report each
        if ReportedOutcome.objects.filter(approval=approval).exists():
            raise OutcomeConflict(f"The outcome of approval {approval.pk} was already reported.")
        outcome = ReportedOutcome(approval=approval, status=status, result=result, shown_hash=shown_hash, reported_by=user, reported_at=timezone.now())
        audit.link_outcome(head, outcome)
        outcome.save()
    logger.info("approval %s: outcome %s reported by %s", approval.pk, status, user)
    return outcome


def reject_as_repeat(approval: Approval, earlier: Approval) -> Approval:
    """The rejection contract: a call identical to one a human just rejected in the conversation
    (approvals.rules.recent_rejection) is rejected at once, by nobody, via `repeat`, with the earlier
    rejection's reason, pointing at the human rejection it repeats."""
    original = earlier.repeat_of or earlier
    decision = _decision(Approval.Status.REJECTED, None, Approval.Via.REPEAT, original.rejection_reason) | {"repeat_of": original}
    return _store_decision(approval, decision, user=None, via=Approval.Via.REPEAT, announce_here=True)


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
    decider asked to remember (approvals.rulemaking.draft_from_call: `remember` holds its scope and
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
    seen = {"confirmation": confirmation, "shown_hash": shown_hash, "comment": comment, "step_up": step_up}
    if approve and arguments is not None:
        decided = approve_edited(approval_id, user=user, arguments=arguments, via=via, **seen)
    else:
        decided = decide(approval_id, user=user, approve=approve, via=via, reason=reason, **seen)
    if decided.status != (Approval.Status.APPROVED if approve else Approval.Status.REJECTED):
        return decided, None
    rule.save()
    logger.info("approval %s remembered as rule %s by %s", approval_id, rule.pk, user)
    return decided, rule


def option_at(approval: Approval, index: int):
    """The answer a channel's button at `index` gives to a question (questions.option_at); a place
    that is none of its options is refused as InvalidAnswer (nothing decided, the question stays open)."""
    try:
        return questions.option_at(approval.question, index)
    except questions.InvalidAnswer as exc:
        raise InvalidAnswer(str(exc)) from None


def answer(
    approval_id: int, *, user, via: str, shown_hash: str, value=None, decline: bool = False, reason: str = "",
    shown_whole: bool = True,
) -> Approval:
    """Answer a question with `value` (checked against its type), or decline to answer it, with a
    reason. Raises InvalidAnswer (nothing decided, the question stays open) and whatever decide()
    raises: first answer wins. `shown_hash` and `shown_whole` as for decide(): a question shown cut
    can be declined, not answered."""
    approval = _decidable(approval_id, user, approve=not decline, shown_hash=shown_hash, shown_whole=shown_whole, via=via)
    if approval.kind != Approval.Kind.QUESTION:
        raise WrongKind(f"This is {'a plan' if approval.kind == Approval.Kind.PLAN else 'a tool call'}: approve or reject it.")
    if decline:
        return _store_decision(approval, _decision(Approval.Status.DECLINED, user, via, reason), user=user, via=via)
    try:
        stored = questions.validate_answer(approval.question, value)
    except questions.InvalidAnswer as exc:
        raise InvalidAnswer(str(exc)) from None
    decision = _decision(Approval.Status.ANSWERED, user, via) | {"answer": stored}
    return _store_decision(approval, decision, user=user, via=via)


def _plan_answer(approval: Approval, steps: list[int] | None) -> dict:
    """The approved and dropped steps of a plan; without `steps`, all of them."""
    chosen = [step["index"] for step in approval.plan["steps"]] if steps is None else steps
    try:
        approved = plans.approved_steps(approval.plan, chosen)
    except plans.InvalidSteps as exc:
        raise InvalidAnswer(str(exc)) from None
    return {"approved_steps": approved, "dropped_steps": plans.dropped_steps(approval.plan, approved)}


def _store_decision(approval: Approval, decision: dict, *, user, via: str, announce_here: bool = False) -> Approval:
    """`announce_here`: for a decision made in the loop (a rule's, a repeat's), already in a worker,
    whose receivers run right after its commit rather than in another task."""
    with transaction.atomic():
        head = audit.lock_head()  # the chain's lock before the row's, as every decider takes them
        # The conditional update is the whole race: of two deciders (or a decider, a Stop and the
        # expiry) exactly one matches `pending`; the others update 0 rows and are told who won.
        # The same statement writes the decision's link of the audit chain.
        updated = _undecided(approval).update(**decision, **head.extend([approval], decision))
        if updated:
            # The row is now the approval as read (the update's filter) with the decision and its
            # link (which extend() set here): no need to read it back.
            for name, value in decision.items():
                setattr(approval, name, value)
            _announce_on_commit([approval], here=announce_here)
        elif _expire_if_overdue(approval.pk):  # the deadline passed while it was on its way: late
            record_late([approval.pk], user=user, via=via, approve=decision["status"] in (Approval.Status.APPROVED, Approval.Status.ANSWERED))
    return _stored(approval, updated, user=user, status=decision["status"], via=via)


def approve_edited(
    approval_id: int, *, user, arguments, via: str, shown_hash: str, confirmation: str = "", comment: str = "",
    step_up: StepUp | None = None,
) -> Approval:
    """Approve the call with arguments a human changed. They are validated with the tool's schema,
    gated again and screened by the rules like the model's own call (approvals.rules.screen): an
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
            _announce_on_commit([approval])
        elif updated:
            transaction.on_commit(lambda: approval_edited.send(sender=Approval, approval=approval), robust=True)
        elif _expire_if_overdue(approval_id):
            record_late([approval_id], user=user, via=via, approve=True)
    approval = _stored(approval, updated, user=user, status=Approval.Status.APPROVED if decision else "edited", via=via)
    if not decision and not screening.asks and (rule := rules.first_allow(screening)):
        # A stricter edit left pending meets the allow rules as the model's call would have (an ask beats them).
        approval = decide_by_rule(approval, rule)
        explanation = _explained_edit(approval, user, checked, screening, rules.Applied(rules.ALLOW, rule=rule), decided=False)
        Approval.objects.filter(pk=approval.pk).update(explanation=explanation)
        approval.explanation = explanation
    return approval


def _explained_edit(approval: Approval, user, checked, screening, applied, *, decided: bool) -> list[dict]:
    """The approval's explanation with the edit's own path after it (approvals.explain)."""
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


def cancel_pending(*, conversation_id, user, via: str) -> list[Approval]:
    """Stop: cancel every pending approval of a conversation, decided by `user` via `via`. Each one
    is a conditional update like any decision, so a decision racing the Stop either wins (and the
    Stop leaves that call alone) or finds it cancelled."""
    pending = Approval.objects.select_for_update(of=("self",)).filter(
        conversation_id=conversation_id, status=Approval.Status.PENDING
    )
    with transaction.atomic():
        head = audit.lock_head()  # the chain's lock before the rows', as every decider takes them
        approvals = list(pending.select_related("tool_call").order_by("pk"))
        decision = _decision(Approval.Status.CANCELLED, user, via, "Stopped")
        Approval.objects.filter(pk__in=[a.pk for a in approvals], status=Approval.Status.PENDING).update(
            **decision, **head.extend(approvals, decision)
        )
        for approval in approvals:
            for name, value in decision.items():
                setattr(approval, name, value)
        if approvals:
            _announce_on_commit(approvals)
    return approvals


def claim(approval_id: int, *, user) -> Approval:
    """Say "I'm on it" on a pending approval: a signal to the other approvers, not a lock. Whoever may
    decide it still may, and a claim by someone else replaces this one. It ends with the decision
    (every deciding update clears it) or on unclaim(). Not in the audit chain: it decides nothing.
    Raises Approval.DoesNotExist (not theirs to see), NotAllowed or AlreadyDecided."""
    return _set_claim(approval_id, user=user, claimed_by=user)


def unclaim(approval_id: int, *, user) -> Approval:
    """End the claim on a pending approval, whoever made it: anyone who may decide it may clear a
    claim (a colleague's left behind, too), as anyone may replace one. Raises as claim() does."""
    return _set_claim(approval_id, user=user, claimed_by=None)


def _set_claim(approval_id: int, *, user, claimed_by) -> Approval:
    approval = Approval.objects.filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if not can_decide(user, approval):
        raise NotAllowed(routing.ASKING_TOKEN if routing.asks_only(user) else "Only someone who may decide this call may claim it.")
    _refuse_if_settled(approval)
    claim_ = {"claimed_by": claimed_by, "claimed_at": timezone.now() if claimed_by else None}
    # Conditional on pending: a decision that lands first wins, and its update cleared the claim.
    if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(**claim_):
        approval.refresh_from_db()
        raise AlreadyDecided(approval)
    for name, value in claim_.items():
        setattr(approval, name, value)
    transaction.on_commit(lambda: approval_claimed.send(sender=Approval, approval=approval), robust=True)
    logger.info("approval %s %s by %s", approval.pk, "claimed" if claimed_by else "unclaimed", user)
    return approval


def check_decidable(
    approval_id: int, user, *, approve: bool, shown_hash: str, shown_whole: bool = True, via: str = ""
) -> Approval:
    """Raise now what deciding it this way would raise (hidden, not allowed, settled, changed, shown
    cut, a step-up it cannot give), deciding nothing: for a surface that asks for more (a reason, a
    confirmation) before it decides, or that decides inside a transaction of its own (with `via`, a
    decision after the expiry is kept as a LateDecision, which that transaction would roll back)."""
    approval = _decidable(approval_id, user, approve=approve, shown_hash=shown_hash, shown_whole=shown_whole, via=via)
    if approve:
        _stepped_up(approval, user, None)
    return approval


def _decidable(approval_id: int, user, *, approve: bool, shown_hash: str, shown_whole: bool = True, via: str = "") -> Approval:
    """The approval, once `user` may decide it this way and it still waits, showing what they saw.
    Raises Approval.DoesNotExist (not theirs to see), NotAllowed, AlreadyDecided (a decision after
    the expiry is kept as a LateDecision), ArgumentsChanged or ShownCut."""
    # The tool's name is hashed; the agent says whether approving needs a step-up.
    approval = Approval.objects.select_related("tool_call", "conversation__agent").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    approval.acting_as = routing.acting_as(user, approval, approve=approve)
    if approval.acting_as is None:
        raise NotAllowed(_why_not(approval, user))
    try:
        _refuse_if_settled(approval)
    except AlreadyDecided:
        if approval.status == Approval.Status.EXPIRED:
            record_late([approval.pk], user=user, via=via, approve=approve)
        raise
    if _unseen(approval, shown_hash, approve=approve):
        raise ArgumentsChanged(CHANGED)
    if approve and not shown_whole:
        raise ShownCut
    return approval


MAX_LATE_KEPT = 10  # late decisions kept per person and approval


def record_late(approval_ids: list[int], *, user, via: str, approve: bool) -> None:
    """Keep decisions that came after their approvals expired (LateDecision): refused, the expiry
    stands, and the audit says "they answered, too late", never "nobody answered". Only a person's
    decision through a surface (`via`) is one."""
    if not (approval_ids and via and user is not None):
        return
    decision = "approve" if approve else "reject"
    logger.info("approvals %s: a late %s by %s via %s, after they expired", approval_ids, decision, user, via)
    # A few per person and approval say all there is to say; more (a script pressing on) are only logged.
    kept = Counter(LateDecision.objects.filter(approval_id__in=approval_ids, user=user).values_list("approval_id", flat=True))
    LateDecision.objects.bulk_create(
        LateDecision(approval_id=pk, user=user, via=via, decision=decision) for pk in approval_ids if kept[pk] < MAX_LATE_KEPT
    )


def _why_not(approval: Approval, user) -> str:
    if routing.asks_only(user):
        return routing.ASKING_TOKEN
    if approval.route_id is not None:
        return "This call is routed: only members of its approver groups (once escalated, its escalation groups) may decide it, never its requester."
    return "This call needs an approver other than the requester and whoever edited it (four eyes)."


def _unseen(approval: Approval, shown_hash: str, *, approve: bool) -> bool:
    """A stated version that is not the current one decides nothing; nor does an approval that
    states none of a call edited since it was requested: the decider never saw the edit."""
    return shown_hash != approval.shown_hash and bool(shown_hash or (approve and approval.is_edited))


def _refuse_if_settled(approval: Approval) -> None:
    """Raise AlreadyDecided for an approval that is no longer pending, or whose deadline has
    passed: that one expires now, in a transaction of its own, whether or not the sweep has run."""
    if approval.status == Approval.Status.PENDING and approval.expires_at and approval.expires_at <= timezone.now():
        with transaction.atomic():
            _expire_if_overdue(approval.pk)
        approval.refresh_from_db()
    if approval.status != Approval.Status.PENDING:
        raise AlreadyDecided(approval)


def _confirms(approval: Approval, confirmation: str) -> bool:
    return bool(approval.confirmation_hint) and (confirmation or "").strip() == approval.confirmation_hint


def _is_stricter(checked: calls.CheckedCall, approval: Approval) -> bool:
    return (
        RISKS.index(checked.risk) > RISKS.index(approval.risk)
        or (checked.approver_required and not approval.approver_required)
    )


# A claim ends with the decision: every deciding update clears it (a decided row is final after).
CLAIM_ENDS = {"claimed_by": None, "claimed_at": None}
MAX_WORDS = 2000  # a reason's or a comment's length, as the decision keeps it


def _decision(status: str, user, via: str, reason: str = "", *, comment: str = "") -> dict:
    """A decision's fields. A reason and a comment are kept as a column can hold them, whatever the
    surface let through (a NUL that PostgreSQL refuses, a lone surrogate), and at most MAX_WORDS long."""
    reason, comment = storable(reason)[:MAX_WORDS], storable(comment)[:MAX_WORDS]
    decision = {
        "status": status,
        "decided_at": timezone.now(),
        "decided_by": user,
        "decided_via": via,
        "rejection_reason": "" if status in (Approval.Status.APPROVED, Approval.Status.ANSWERED) else reason.strip(),
        **CLAIM_ENDS,
    }
    if comment.strip():
        decision["comment"] = comment.strip()
    return decision


def _undecided(approval: Approval):
    """The approval if still undecided, before its deadline, and as we read it: as the conditional
    update's filter, this is the whole race."""
    return _as_read(approval).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def _as_read(approval: Approval):
    """The approval if still pending and as we read it: showing the arguments it showed (an edit
    stored in between is never approved unseen), under the risk and four-eyes rule the decider was
    checked against, which is also what the decision's audit hash says."""
    return Approval.objects.filter(
        pk=approval.pk,
        status=Approval.Status.PENDING,
        edited_arguments_hash=approval.edited_arguments_hash,
        risk=approval.risk,
        approver_required=approval.approver_required,
    )


def _stored(approval: Approval, updated: int, *, user, status: str, via: str) -> Approval:
    """After the conditional update: the approval as stored (as its transaction left it, when it
    was decided there), or why nothing was."""
    if not updated:
        approval.refresh_from_db()
        if approval.status == Approval.Status.PENDING:
            raise ArgumentsChanged(CHANGED)
        raise AlreadyDecided(approval)
    logger.info("approval %s %s by %s via %s", approval.pk, status, user, via)
    return approval


def _expire_if_overdue(approval_id: int) -> bool:
    """A decision that came after the deadline expires the approval itself, in its transaction."""
    now = timezone.now()
    overdue = Approval.objects.select_related("tool_call").filter(
        pk=approval_id, status=Approval.Status.PENDING, expires_at__lte=now
    )
    approval = overdue.first()
    return approval is not None and _expire(approval, now)


def _expire(approval: Approval, now, *, announce_here: bool = False) -> bool:
    """Expire one overdue approval, read a moment ago, in the caller's transaction, with its link of
    the audit chain. False if it was decided, or edited, since it was read. `announce_here`: as for
    _store_decision (the expiry sweep runs in a worker)."""
    expiry = _expiry(now)
    head = audit.lock_head()
    if not _as_read(approval).filter(expires_at__lte=now).update(**expiry, **head.extend([approval], expiry)):
        return False
    for name, value in expiry.items():
        setattr(approval, name, value)
    _announce_on_commit([approval], here=announce_here)
    return True


def _expiry(now) -> dict:
    return {"status": Approval.Status.EXPIRED, "decided_at": now, "decided_via": Approval.Via.TIMEOUT, **CLAIM_ENDS}


def _announce_on_commit(approvals: list[Approval], *, here: bool = False) -> None:
    # In the deciding transaction: the webhook outbox is written with the decisions, and one task
    # tells everyone else after the commit (approvals.announcements).
    announcements.announce_on_commit(approvals, in_worker=not here)
    telemetry.approvals_decided(approvals)  # each one's approval.wait span and metrics, once committed


def expire_overdue(*, now=None, limit: int = 500) -> list[int]:
    """Expire pending approvals past their deadline: decided by nobody, via `timeout`. A decision
    racing the expiry meets the same conditional update, so exactly one of them wins."""
    now = now or timezone.now()
    overdue = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now).select_related("tool_call")
    expired = []
    for approval in overdue.order_by("expires_at")[:limit]:
        with transaction.atomic():
            if not _expire(approval, now, announce_here=True):
                continue  # decided a moment ago (or edited: then it expires at the next sweep)
        expired.append(approval.pk)
    if expired:
        logger.info("expired approvals %s", expired)
    return expired


@dataclass
class Outcome:
    """What deciding several approvals did: each id lands in exactly one list."""

    decided: list[Approval] = field(default_factory=list)
    already_decided: list[int] = field(default_factory=list)  # decided, cancelled or expired first
    not_allowed: list[int] = field(default_factory=list)
    not_found: list[int] = field(default_factory=list)  # unknown, or hidden from the user
    # Critical calls, which are approved one at a time with their typed confirmation, never in bulk;
    # and calls that need a step-up (approvals.services.needs_step_up), approved only with a passkey.
    needs_confirmation: list[int] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)  # edited while the bulk decision was on its way
    # Questions and plans, which are answered (a plan's steps chosen) one at a time, never approved in
    # bulk. Rejecting in bulk declines a question and rejects a whole plan.
    needs_answer: list[int] = field(default_factory=list)
    # Approvals this decision voted on toward their quorum: still pending, waiting for more votes.
    voted: list[Approval] = field(default_factory=list)
    # Of `already_decided`, those that had expired: the decision came too late (kept as LateDecision).
    late: list[int] = field(default_factory=list)


def decide_many(shown: dict[int, str], *, user, approve: bool, via: str, reason: str = "") -> Outcome:
    """Decide each approval of `shown` (id → the version the decider was shown, "" for none) that
    `user` may decide, with the same rules as decide(), in one transaction and a number of queries
    that does not grow with the ids. One whose version moved on lands in `changed`."""
    if routing.asks_only(user):
        raise NotAllowed(routing.ASKING_TOKEN)  # not even the ones it may not see: it decides nothing
    outcome = Outcome()
    ids = sorted(set(shown))
    approvals = {a.pk: a for a in Approval.objects.select_related("conversation__agent").filter(pk__in=ids)}
    powers = routing.Powers(user)  # read once for the batch, not once per approval
    allowed, one_by_one, found_expired = [], [], []
    for approval_id in ids:
        approval = approvals.get(approval_id)
        acting = routing.acting_as(user, approval, approve=approve, powers=powers) if approval is not None else None
        if approval is None or not can_see(user, approval, powers):
            outcome.not_found.append(approval_id)
        elif acting is None:
            outcome.not_allowed.append(approval_id)
        elif approval.status != Approval.Status.PENDING:
            outcome.already_decided.append(approval_id)
            if approval.status == Approval.Status.EXPIRED:
                found_expired.append(approval_id)
        elif _unseen(approval, shown[approval_id], approve=approve):
            outcome.changed.append(approval_id)
        elif approve and approval.kind != Approval.Kind.ACTION:
            outcome.needs_answer.append(approval_id)
        elif approve and (approval.confirmation_required or needs_step_up(approval)):
            outcome.needs_confirmation.append(approval_id)  # one at a time, on the site (a passkey for a step-up)
        elif (approve and approval.quorum > 1) or acting.pk != user.pk:
            one_by_one.append(approval_id)  # a vote toward a quorum, or a decision on someone's behalf
        else:
            allowed.append(approval_id)
    record_late(found_expired, user=user, via=via, approve=approve)
    outcome.late.extend(found_expired)
    if allowed:
        _decide_together(approvals, allowed, outcome, user=user, approve=approve, via=via, reason=reason)
    for approval_id in one_by_one:
        _decide_alone(approval_id, shown[approval_id], outcome, user=user, approve=approve, via=via, reason=reason)
    return outcome


def _decide_alone(approval_id: int, shown_hash: str, outcome: Outcome, *, user, approve: bool, via: str, reason: str) -> None:
    """One approval of a bulk decision that is decided on its own: a vote, or on someone's behalf."""
    try:
        approval = decide(approval_id, user=user, approve=approve, via=via, shown_hash=shown_hash, reason=reason)
    except AlreadyDecided as exc:
        outcome.already_decided.append(approval_id)
        if exc.approval.status == Approval.Status.EXPIRED:
            outcome.late.append(approval_id)  # decide() kept it as a LateDecision
    except AlreadyVoted:
        outcome.already_decided.append(approval_id)
    except ArgumentsChanged:
        outcome.changed.append(approval_id)
    except (NotAllowed, Approval.DoesNotExist):
        outcome.not_allowed.append(approval_id)
    else:
        (outcome.decided if approval.status != Approval.Status.PENDING else outcome.voted).append(approval)


def _decide_together(approvals: dict, allowed: list[int], outcome: Outcome, *, user, approve: bool, via: str, reason: str) -> None:
    """The approvals of a bulk decision decided alike, in one transaction and UPDATE."""
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    now = timezone.now()
    with transaction.atomic():
        head = audit.lock_head()  # the chain's lock before the rows', as every decider takes them
        # Lock what is still pending, then decide exactly those rows. On PostgreSQL a row another
        # decider holds is waited for and its status checked again, so it drops out once decided;
        # SQLite's IMMEDIATE transaction holds the one write lock from the start. Either way the
        # first decision wins, as with decide()'s conditional update.
        locked = Approval.objects.select_for_update(of=("self",)).select_related("tool_call")
        locked = locked.filter(pk__in=allowed, status=Approval.Status.PENDING)
        pending, overdue = [], []
        for approval in locked.order_by("pk"):
            if approval.expires_at is not None and approval.expires_at <= now:
                overdue.append(approval)  # past its deadline: it expires now, not approved late
            elif approval.edited_arguments_hash != approvals[approval.pk].edited_arguments_hash:
                outcome.changed.append(approval.pk)  # never approve an edit nobody here saw
            else:
                pending.append(approval)
        decision, expiry = _decision(status, user, via, reason), _expiry(now)
        # A question rejected in bulk is declined, with the same reason.
        questions_ = [a for a in pending if a.kind == Approval.Kind.QUESTION]
        others = [a for a in pending if a.kind != Approval.Kind.QUESTION]
        declined = _decision(Approval.Status.DECLINED, user, via, reason)
        # One UPDATE for all the rows decided alike, each with its own link of the audit chain.
        for rows, fields in ((others, decision), (questions_, declined), (overdue, expiry)):
            if rows:
                Approval.objects.filter(pk__in=[a.pk for a in rows]).update(**fields, **head.extend(rows, fields))
        for approvals_, fields in ((others, decision), (questions_, declined), (overdue, expiry)):
            for approval in approvals_:
                for name, value in fields.items():
                    setattr(approval, name, value)
        if pending or overdue:
            _announce_on_commit(pending + overdue)
        record_late([a.pk for a in overdue], user=user, via=via, approve=approve)  # they expire now: this came too late
        outcome.late.extend(a.pk for a in overdue)
    decided_ids = {a.pk for a in pending} | set(outcome.changed)
    outcome.decided = pending
    outcome.already_decided = sorted(outcome.already_decided + [i for i in allowed if i not in decided_ids])
    for approval in pending:
        logger.info("approval %s %s by %s via %s", approval.pk, approval.status, user, via)


def decide_all(
    *,
    conversation_id,
    user,
    via: str,
    shown: dict[int, str] | None,
    approve: bool = True,
    reason: str = "",
) -> Outcome:
    """Decide the pending approvals of a conversation that `user` was shown (`shown`: id → version,
    as decide_many() takes them) and may decide. A call that became pending later is left alone.
    `shown=None` (a program that names none) means every pending call, its version unstated: then
    a call edited since it was requested is not approved (`changed`). Critical calls are never
    approved this way (`needs_confirmation`)."""
    pending = Approval.objects.filter(conversation_id=conversation_id, status=Approval.Status.PENDING)
    if shown is not None:
        pending = pending.filter(pk__in=list(shown))
    ids = list(pending.values_list("pk", flat=True))
    return decide_many({pk: (shown or {}).get(pk, "") for pk in ids}, user=user, approve=approve, via=via, reason=reason)


class NotExtendable(DecisionError):
    """Its deadline cannot be pushed back: it has none, it was extended once already, or it is decided."""


def extend(approval_id: int, *, user, via: str, seconds: int | None = None) -> Approval:
    """Push a pending approval's deadline back, once, by `seconds` (by default, and at most, its
    agent's timeout), for its requester or someone who may approve it. The new deadline gets its own
    warning. Raises Approval.DoesNotExist (not theirs to see), NotAllowed, AlreadyDecided (an
    expired one: ask again instead) or NotExtendable."""
    approval = _requesters_or_deciders(approval_id, user, "extend its deadline")
    if routing.asks_only(user):
        raise NotAllowed(routing.ASKING_TOKEN)  # a deadline held open is a decision deferred: a person's to make
    _refuse_if_settled(approval)
    if approval.expires_at is None:
        raise NotExtendable("This approval has no deadline to extend.")
    if approval.extended_at is not None:
        raise NotExtendable(f"This approval's deadline was already extended once, by {approval.extended_by}.")
    most = approval.conversation.agent.approval_timeout_seconds or int((approval.expires_at - approval.requested_at).total_seconds())
    by = most if seconds is None else min(max(int(seconds), 1), most)
    now = timezone.now()
    deadline = approval.expires_at + timedelta(seconds=by)
    extended = Approval.objects.filter(
        pk=approval.pk, status=Approval.Status.PENDING, extended_at__isnull=True, expires_at=approval.expires_at, expires_at__gt=now
    ).update(
        expires_at=deadline, extended_at=now, extended_by=user, warned_at=None,
        warn_at=warning_at(now, int((deadline - now).total_seconds())),
    )
    approval.refresh_from_db()
    if not extended:
        _refuse_if_settled(approval)
        raise NotExtendable("This approval's deadline was already extended once.")
    logger.info("approval %s: deadline extended by %s s to %s by %s via %s", approval.pk, by, deadline.isoformat(), user, via)
    transaction.on_commit(lambda: approval_extended.send(sender=Approval, approval=approval), robust=True)
    return approval


def _requesters_or_deciders(approval_id: int, user, doing: str) -> Approval:
    """The approval, for its requester or someone who may approve it (what extend and ask_again
    allow). Raises Approval.DoesNotExist (not theirs to see) or NotAllowed."""
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "route").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if approval.requested_by_id != user.pk and routing.acting_as(user, approval, approve=True) is None:
        raise NotAllowed(f"Only its requester or someone who may approve it can {doing}.")
    return approval


def warn_expiring(*, now=None, limit: int = 500) -> list[int]:
    """Mark pending approvals whose warning is due (warn_at passed, deadline not yet) as warned,
    each by a conditional update on the warning it was read with, and send approvals_expiring once
    with them after the commit: two sweeps, or a sweep restarted midway, never warn twice, and an
    extend that moved the warning meanwhile wins (its own warning comes later)."""
    now = now or timezone.now()
    due = Approval.objects.filter(
        status=Approval.Status.PENDING, warned_at__isnull=True, warn_at__lte=now, expires_at__gt=now
    ).select_related("tool_call", "conversation__agent", "requested_by", "extended_by")
    warned = []
    with transaction.atomic():
        for approval in due.order_by("warn_at")[:limit]:
            if Approval.objects.filter(
                pk=approval.pk, status=Approval.Status.PENDING, warned_at__isnull=True, warn_at=approval.warn_at, expires_at=approval.expires_at
            ).update(warned_at=now):
                approval.warned_at = now
                warned.append(approval)
        if warned:
            transaction.on_commit(lambda: _tell_expiring(warned))
    if warned:
        logger.info("warned that approvals %s expire soon", [a.pk for a in warned])
    return [a.pk for a in warned]


def _tell_expiring(warned: list[Approval]) -> None:
    """Every channel hears of the warnings, whichever of them fails (each one's sweep catches up)."""
    for receiver, error in approvals_expiring.send_robust(sender=Approval, approvals=warned):
        if isinstance(error, Exception):
            logger.error("approvals_expiring: %s failed for %s: %r", receiver, [a.pk for a in warned], error, exc_info=error)


class NotExpired(DecisionError):
    """Only an expired approval is asked again (a pending one waits still; a decided one was decided)."""


class CannotAskAgain(DecisionError):
    """An expired approval that cannot be asked again: asked again already, its conversation is busy,
    or its caller was told it timed out (an MCP client's call)."""


# Makes the new call and approval that ask an expired approval again: chat registers it (chat.apps),
# since the call lives in a conversation, and approvals never imports chat (as approvals.calls' checker).
AskAgain = Callable[..., Approval]
_asker: AskAgain | None = None


def register_asker(asker: AskAgain) -> None:
    global _asker
    _asker = asker


def ask_again(approval_id: int, *, user, via: str) -> Approval:
    """Ask an expired approval again, for its requester or someone who may approve it: a new pending
    approval for the same call and version (`asked_again_from` the old one), without asking the model
    again; once decided, the call runs (or its rejection is reported) as any call does. An approval
    past its deadline that the sweep has not reached yet expires now. Raises Approval.DoesNotExist,
    NotAllowed, NotExpired or CannotAskAgain."""
    approval = _requesters_or_deciders(approval_id, user, "ask it again")
    try:
        _refuse_if_settled(approval)  # one past its deadline expires now, whether or not the sweep ran
    except AlreadyDecided:
        pass  # settled: expired (asked again below) or decided (refused below)
    if approval.status != Approval.Status.EXPIRED:
        raise NotExpired(f"Approval {approval.pk} is {approval.status}: only an expired approval is asked again.")
    if _asker is None:
        raise RuntimeError("Nothing asks approvals again (the chat app registers it in ready()).")
    asked = _asker(approval, user=user)
    logger.info("approval %s asked again as %s by %s via %s", approval.pk, asked.pk, user, via)
    return asked
