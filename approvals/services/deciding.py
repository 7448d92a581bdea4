"""Deciding one approval: who may, at which version, and the conditional update that is the whole
race (first decision wins), with its link of the audit chain and its announcement; a vote toward a
quorum, an answer, a rule's or the policy's decision, a Stop, a reported outcome, a late decision.
The other modules of approvals.services decide through the helpers here."""
import logging
from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import telemetry
from core.inputs import storable

from .. import announcements, audit
from ..announcements import webhooks
from ..deciders import routing
from ..models import Approval, LateDecision, Rule, Vote, Webhook
from ..models import Outcome as ReportedOutcome
from ..pauses import plans, questions
from ..permissions import can_see
from ..policy import rules, timeouts
from ..policy.gate import RISKS
from ..signals import approval_voted
from .errors import (
    CHANGED, STEP_UP, AlreadyDecided, AlreadyVoted, ArgumentsChanged, ConfirmationRequired, InvalidAnswer, NotAllowed,
    OutcomeConflict, ShownCut, StepUpRequired, WrongKind,
)


logger = logging.getLogger(__name__)


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


def decide(
    approval_id: int,
    *,
    user,
    approve: bool,
    via: str,
    shown_hash: str,
    reason: str = "",
    confirmation: str = "",
    steps: list | None = None,
    comment: str = "",
    step_up: StepUp | None = None,
    shown_whole: bool = True,
    saving: Rule | None = None,
) -> Approval:
    """Record one decision on a tool call or a plan (`steps`: the plan's approved steps, all if None). Raises Approval.DoesNotExist for an approval the user may not see.

    `shown_hash` is the version the decider was shown (`Approval.shown_hash` as the surface rendered
    it), required of every surface: if the call changed since, nothing is decided; "" (a surface that
    showed no version) approves only a call never edited. A critical call is approved only with
    `confirmation` equal to its hint. Past `expires_at` the approval expires now, whether or not the
    sweep ran. `comment` is the decider's optional word on it, kept and chained with the decision.
    Approving a call at or above its agent's step_up_from_risk needs `step_up` (StepUpRequired).
    `shown_whole` False: the surface showed the call cut (a channel's message too small for it),
    so approving raises ShownCut, whatever buttons it had. `saving`: a rule saved in the deciding
    transaction if the decision is stored (decide_remembering), which the card offers to undo.
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
    if saving is not None:
        decision["remembered"] = True
    if approve and approval.kind == Approval.Kind.PLAN:
        decision["answer"] = _plan_answer(approval, steps)
    return _store_decision(approval, decision, user=user, via=via, saving=saving)


def respond(approval_id: int, *, user, via: str, shown_hash: str, message: str, shown_whole: bool = True) -> Approval:
    """Answer a call with words instead of a decision (LangChain Agent Inbox's "response"): the call
    is rejected, as any rejection is (whoever may reject may respond), and the model reads `message`
    as the decider's instruction ("use staging, not prod"), kept in `responded` and in the chain."""
    message = storable(message).strip()[:MAX_WORDS]
    if not message:
        raise InvalidAnswer("Write what the agent should do instead.")
    approval = _decidable(approval_id, user, approve=False, shown_hash=shown_hash, shown_whole=shown_whole, via=via)
    if approval.kind != Approval.Kind.ACTION:
        raise WrongKind("Only a tool call takes a response: answer a question, or reject a plan with a reason.")
    decision = _decision(Approval.Status.REJECTED, user, via) | {"responded": message} | _on_behalf(approval, user)
    return _store_decision(approval, decision, user=user, via=via)


def _on_behalf(approval: Approval, user) -> dict:
    """Whose decision it is when `user` decides through a delegation (set by _decidable)."""
    acting = getattr(approval, "acting_as", None)
    return {"on_behalf_of": acting} if acting is not None and acting.pk != user.pk else {}


def _vote(approval: Approval, *, user, via: str, comment: str = "", stepped_up: dict | None = None) -> Approval:
    """Cast `user`'s approve toward the quorum, as whom they act for (approvals.deciders.routing.acting_as),
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
    """Decide a just-requested approval at once by an allow or deny rule (approvals.policy.rules.verdict):
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
    (approvals.policy.rules.recent_rejection) is rejected at once, by nobody, via `repeat`, with the earlier
    rejection's reason, pointing at the human rejection it repeats."""
    original = earlier.repeat_of or earlier
    decision = _decision(Approval.Status.REJECTED, None, Approval.Via.REPEAT, original.rejection_reason) | {"repeat_of": original}
    return _store_decision(approval, decision, user=None, via=Approval.Via.REPEAT, announce_here=True)


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
    if isinstance(value, questions.StoredFile) and value.approval_id != approval.pk:
        raise InvalidAnswer("That file was uploaded for another question.")
    try:
        stored = questions.validate_answer(approval.question, value)
    except questions.InvalidAnswer as exc:
        raise InvalidAnswer(str(exc)) from None
    decision = _decision(Approval.Status.ANSWERED, user, via) | {"answer": stored}
    return _store_decision(approval, decision, user=user, via=via)


def _plan_answer(approval: Approval, steps: list | None) -> dict:
    """The approved and dropped steps of a plan, as the decider changed them (plans.approve); without
    `steps`, all of them as proposed."""
    chosen = [step["index"] for step in approval.plan["steps"]] if steps is None else steps
    try:
        return plans.approve(approval.plan, chosen)
    except plans.InvalidSteps as exc:
        raise InvalidAnswer(str(exc)) from None


def _store_decision(
    approval: Approval, decision: dict, *, user, via: str, announce_here: bool = False, saving=None, only_if: dict | None = None,
) -> Approval:
    """`announce_here`: for a decision made in the loop (a rule's, a repeat's), already in a worker,
    whose receivers run right after its commit rather than in another task. `only_if`: what else the
    row must still say for this decision to be the one (the reviewer's: still reviewing)."""
    with transaction.atomic():
        head = audit.lock_head()  # the chain's lock before the row's, as every decider takes them
        # The conditional update is the whole race: of two deciders (or a decider, a Stop and the
        # expiry) exactly one matches `pending`; the others update 0 rows and are told who won.
        # The same statement writes the decision's link of the audit chain.
        updated = _undecided(approval).filter(**(only_if or {})).update(**decision, **head.extend([approval], decision))
        if updated:
            # The row is now the approval as read (the update's filter) with the decision and its
            # link (which extend() set here): no need to read it back.
            for name, value in decision.items():
                setattr(approval, name, value)
            _save_rule(saving, approval)
            _announce_on_commit([approval], here=announce_here)
        elif _expire_if_overdue(approval.pk):  # the deadline passed while it was on its way: late
            record_late([approval.pk], user=user, via=via, approve=decision["status"] in (Approval.Status.APPROVED, Approval.Status.ANSWERED))
    return _stored(approval, updated, user=user, status=decision["status"], via=via)


def _save_rule(rule, approval: Approval) -> None:
    """The rule a decision remembers ("Always"), saved with it, naming it."""
    if rule is not None:
        rule.made_from = approval
        rule.save()


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
    overdue = Approval.objects.select_related("tool_call", "conversation__agent").filter(
        pk=approval_id, status=Approval.Status.PENDING, expires_at__lte=now
    )
    approval = overdue.first()
    return approval is not None and _expire(approval, now)


def _expire(approval: Approval, now, *, announce_here: bool = False) -> bool:
    """Expire one overdue approval, read a moment ago, in the caller's transaction, with its link of
    the audit chain. False if it was decided, or edited, since it was read. `announce_here`: as for
    _store_decision (the expiry sweep runs in a worker)."""
    expiry = timed_out(approval, now)
    head = audit.lock_head()
    if not _as_read(approval).filter(expires_at__lte=now).update(**expiry, **head.extend([approval], expiry)):
        return False
    for name, value in expiry.items():
        setattr(approval, name, value)
    _announce_on_commit([approval], here=announce_here)
    return True


def _expiry(now) -> dict:
    return {"status": Approval.Status.EXPIRED, "decided_at": now, "decided_via": Approval.Via.TIMEOUT, **CLAIM_ENDS}


def timed_out(approval: Approval, now) -> dict:
    """What its deadline decides, by nobody, via `timeout`: the action stored when it was requested
    (approvals.policy.timeouts), its cause in the words the audit chain keeps. An approve is checked
    again against the row as it is now (an edit may have raised its risk): what it may not approve expires."""
    action = approval.timeout_action
    agent = approval.conversation.agent
    if action == timeouts.APPROVE and timeouts.why_not_approve(
        kind=approval.kind, risk=approval.risk, approver_required=approval.approver_required, routed=approval.route_id is not None,
        quorum=approval.quorum, confirmation=approval.confirmation_required, step_up=needs_step_up(approval),
    ):
        action = timeouts.EXPIRE
    deadline = f"by its deadline ({approval.expires_at:%H:%M} UTC)"
    tool = approval.tool_call.name
    if action == timeouts.REJECT:
        reason = f"No one decided {deadline}, and {agent.name} rejects {tool} calls that no one decides in time."
        return _expiry(now) | {"status": Approval.Status.REJECTED, "rejection_reason": reason}
    if action == timeouts.APPROVE:
        comment = f"No one decided {deadline}, and {agent.name} approves low-risk {tool} calls that no one decides in time."
        return _expiry(now) | {"status": Approval.Status.APPROVED, "comment": comment}
    return _expiry(now)


def _announce_on_commit(approvals: list[Approval], *, here: bool = False) -> None:
    # In the deciding transaction: the webhook outbox is written with the decisions, and one task
    # tells everyone else after the commit (approvals.announcements).
    announcements.announce_on_commit(approvals, in_worker=not here)
    telemetry.approvals_decided(approvals)  # each one's approval.wait span and metrics, once committed
