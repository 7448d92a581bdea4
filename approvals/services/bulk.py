"""Deciding several approvals at once, each only at the version its decider was shown."""
import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from .. import audit
from ..deciders import routing
from ..models import Approval
from ..permissions import can_see
from .deciding import _announce_on_commit, _decision, _unseen, decide, needs_step_up, record_late, timed_out
from .errors import AlreadyDecided, AlreadyVoted, ArgumentsChanged, NotAllowed

logger = logging.getLogger(__name__)


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
        locked = Approval.objects.select_for_update(of=("self",)).select_related("tool_call", "conversation__agent")
        locked = locked.filter(pk__in=allowed, status=Approval.Status.PENDING)
        pending, overdue = [], []
        for approval in locked.order_by("pk"):
            if approval.expires_at is not None and approval.expires_at <= now:
                overdue.append(approval)  # past its deadline: it expires now, not approved late
            elif approval.edited_arguments_hash != approvals[approval.pk].edited_arguments_hash:
                outcome.changed.append(approval.pk)  # never approve an edit nobody here saw
            else:
                pending.append(approval)
        decision = _decision(status, user, via, reason)
        # A question rejected in bulk is declined, with the same reason.
        questions_ = [a for a in pending if a.kind == Approval.Kind.QUESTION]
        others = [a for a in pending if a.kind != Approval.Kind.QUESTION]
        declined = _decision(Approval.Status.DECLINED, user, via, reason)
        # One UPDATE for all the rows decided alike, each with its own link of the audit chain.
        together = [(others, decision), (questions_, declined)]
        together += [([approval], timed_out(approval, now)) for approval in overdue]  # each as its deadline says
        for rows, fields in together:
            if rows:
                Approval.objects.filter(pk__in=[a.pk for a in rows]).update(**fields, **head.extend(rows, fields))
        for approvals_, fields in together:
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
