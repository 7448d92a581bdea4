"""The audit chain: each decision stores a SHA-256 over its content and the previous decision's hash,
written by the very UPDATE that decides it; `verify()` walks the chain (`manage.py verify_audit`).

The triggers (`approvals.audit.triggers`) refuse to change or delete a decided approval, but whoever owns
the tables can drop them. The chain makes what they then do evident: a changed field no longer
matches its hash, a removed decision leaves a missing link, and a rewritten hash no longer matches
the next link's `previous_hash`. The arguments themselves are chained through their hashes: each
link covers `arguments_hash` (the requested arguments, stored on the tool call) and
`edited_arguments_hash` (an edit's), and `verify()` hashes the stored arguments again, so arguments
rewritten after the decision no longer match the link that covers them.

Linear under concurrency: every decider calls `lock_head()` first in its transaction. On PostgreSQL
that takes a transaction-scoped advisory lock, so deciders extend the chain one at a time, in commit
order, each reading the head its predecessor committed (READ COMMITTED: the read after the lock is a
new snapshot). On SQLite the IMMEDIATE transaction already holds the one write lock. Should anything
ever slip past the lock, the unique `chain_position` refuses the second link instead of forking.
Deciders take the chain lock before any approval row lock, always, so the two never deadlock.

Cost: one query on SQLite, two on PostgreSQL per deciding transaction, whatever the number of
approvals it decides (they get their links in one UPDATE, by CASE on the id).

Limits: the hash is unkeyed, so someone who can write the database can recompute every link from
the one they changed to the head, and deleting the newest decisions leaves no gap. Against that,
keep the head somewhere else (`verify_audit` prints it; the admin's CSV export carries every hash)
and check it later with `verify_audit --expect POSITION:HASH`.


In this package: `triggers`, the database triggers that keep decided rows final. May import
approvals' models only."""
import hashlib
import heapq
import json
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Case, Value, When
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from ..models import Approval, Delegation, Outcome, PolicyVersion, Vote

GENESIS = "0" * 64  # the previous hash of the first link
FORMAT = 1  # of the hashed content, hashed with it: a later format gets a new number, old links keep theirs
# The PostgreSQL advisory lock of the chain: any bigint nothing else in the database locks ("hitlaud").
CHAIN_LOCK = 0x686974_6C617564
CHAIN_FIELDS = ("chain_position", "previous_hash", "decision_hash")
OUTSIDE = "it is decided but not in the chain: decided around the services"
# What verify() reads of each approval (and its tool call's name): the hashed fields, no more.
HASHED_FIELDS = (
    "conversation", "tool_call", "tool_call__name", "requested_by", "reason", "risk", "approver_required",
    "arguments_hash", "edited_arguments_hash", "edited_by", "preview", "status", "requested_at", "expires_at",
    "decided_at", "decided_by", "decided_via", "rejection_reason", "comment", "responded", "step_up_assertion", "kind", "question", "plan", "answer", "rule",
    "tool_call__arguments", "edited_arguments", "policy_version", "reviewer_model", "reviewer_rationale", *CHAIN_FIELDS,
)


def arguments_hash(arguments) -> str:
    """SHA-256 of the canonical JSON of a call's arguments, exactly as `chat.tools.arguments_hash`
    computes the hash an approval covers (a test pins the two together; approvals imports nothing
    from chat). Checked again here, on the arguments as stored, against the hash the chain covers."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def content(approval: Approval, changes: dict | None = None) -> dict:
    """What a decision's hash covers: the approval as it is, or as `changes` (the UPDATE's values)
    will leave it, with its place in the chain. The decider saw all of it, or set it."""
    changes = changes or {}

    def value(name: str):
        return changes[name] if name in changes else getattr(approval, name)

    def ident(name: str):
        return getattr(changes[name], "pk", changes[name]) if name in changes else getattr(approval, f"{name}_id")

    hashed = {
        "format": FORMAT,
        "position": approval.chain_position,
        "previous": approval.previous_hash,
        "approval": approval.pk,
        "conversation": str(approval.conversation_id),
        "tool_call": approval.tool_call_id,
        "tool": approval.tool_call.name,
        "requested_by": ident("requested_by"),
        "requested_at": _instant(value("requested_at")),
        "reason": value("reason"),
        "risk": value("risk"),
        "approver_required": value("approver_required"),
        "expires_at": _instant(value("expires_at")),
        "arguments_hash": value("arguments_hash"),
        "edited_arguments_hash": value("edited_arguments_hash"),
        "edited_by": ident("edited_by"),
        "preview": value("preview"),
        "status": value("status"),
        "decided_by": ident("decided_by"),
        "decided_via": value("decided_via"),
        "decided_at": _instant(value("decided_at")),
        "rejection_reason": value("rejection_reason"),
    }
    if (rule := ident("rule")) is not None:  # decided by a rule: which one (earlier links have none)
        hashed["rule"] = rule
    if (repeated := ident("repeat_of")) is not None:  # a repeat of a human's rejection: which one
        hashed["repeat_of"] = repeated
    if comment := value("comment"):  # the decider's word on it; a link without one hashes as it always did
        hashed["comment"] = comment
    if responded := value("responded"):  # words sent to the agent instead; earlier links have none
        hashed["responded"] = responded
    if assertion := value("step_up_assertion"):  # the passkey that proved the approver there; older links have none
        hashed["step_up_assertion"] = assertion
    if reviewer_model := value("reviewer_model"):  # the AI reviewer that looked at it, and what it said; older links have none
        hashed["reviewer"] = {"model": reviewer_model, "rationale": value("reviewer_rationale")}
        if value("decided_via") == Approval.Via.REVIEWER:
            hashed["actor"] = "ai"  # decided by the reviewer, a model, not a person
    if approval.policy_version is not None:  # the policy it was asked under; links before versions have none
        hashed["policy_version"] = approval.policy_version
    if approval.kind != Approval.Kind.ACTION:
        # A question or a plan also hashes what was asked and answered. An action's content is as it
        # always was, so the links stored before pauses had kinds still verify.
        hashed.update(kind=approval.kind, question=approval.question, plan=approval.plan, answer=value("answer"))
    return hashed


def decision_hash(approval: Approval, changes: dict | None = None) -> str:
    # ASCII JSON with sorted keys: one byte string for one content, whatever the text holds.
    canonical = json.dumps(content(approval, changes), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _instant(value: datetime | None) -> str | None:
    """A datetime as stored and read back: in UTC (a naive one is in the default time zone)."""
    if value is None:
        return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    return value.astimezone(dt_timezone.utc).isoformat()


@dataclass
class Head:
    """The newest link of the chain, as this transaction extends it."""

    position: int = 0
    hash: str = GENESIS

    def extend(self, approvals: list[Approval], changes: dict) -> dict:
        """Link `approvals`, in this order, as `changes` decide them: set their chain fields and
        return those as values for the UPDATE that stores the decision (by CASE on the id when
        there are several). That UPDATE must change only these rows, exactly as they are here."""
        for approval in approvals:
            self.position += 1
            approval.chain_position, approval.previous_hash = self.position, self.hash
            approval.decision_hash = self.hash = decision_hash(approval, changes)
        if len(approvals) <= 1:
            return {name: getattr(approval, name) for approval in approvals for name in CHAIN_FIELDS}
        return {
            name: Case(
                *[When(pk=approval.pk, then=Value(getattr(approval, name))) for approval in approvals],
                output_field=Approval._meta.get_field(name),
            )
            for name in CHAIN_FIELDS
        }


def vote_content(vote: Vote) -> dict:
    """What a vote's link covers: who voted, as whom, on which version of which approval, how, when."""
    return {
        "format": FORMAT,
        "kind": "vote",
        "position": vote.chain_position,
        "previous": vote.previous_hash,
        "approval": vote.approval_id,
        "user": vote.user_id,
        "on_behalf_of": vote.on_behalf_of_id,
        "voter": vote.voter_id,
        "shown_hash": vote.shown_hash,
        "via": vote.via,
        "decided_at": _instant(vote.decided_at),
        "comment": vote.comment,
    }


def delegation_content(delegation: Delegation) -> dict:
    """What a delegation's link covers when it is made: who hands over to whom, for which window."""
    return {
        "format": FORMAT,
        "kind": "delegation",
        "position": delegation.chain_position,
        "previous": delegation.previous_hash,
        "delegator": delegation.delegator_id,
        "delegate": delegation.delegate_id,
        "starts_at": _instant(delegation.starts_at),
        "ends_at": _instant(delegation.ends_at),
        "created_at": _instant(delegation.created_at),
    }


def delegation_end_content(delegation: Delegation) -> dict:
    """What the link of a delegation ended early covers: which one, when, by whom."""
    return {
        "format": FORMAT,
        "kind": "delegation.end",
        "position": delegation.end_chain_position,
        "previous": delegation.end_previous_hash,
        "delegation": delegation.pk,
        "ended_at": _instant(delegation.ended_at),
        "ended_by": delegation.ended_by_id,
    }


def outcome_content(outcome: Outcome) -> dict:
    """What an outcome's link covers: which approval, at which version, what the caller says
    happened, who said it and when."""
    return {
        "format": FORMAT,
        "kind": "outcome",
        "position": outcome.chain_position,
        "previous": outcome.previous_hash,
        "approval": outcome.approval_id,
        "status": outcome.status,
        "result": outcome.result,
        "shown_hash": outcome.shown_hash,
        "reported_by": outcome.reported_by_id,
        "reported_at": _instant(outcome.reported_at),
    }


def policy_version_content(version: PolicyVersion) -> dict:
    """What a policy version's link covers: its number, who made it when, what changed, the whole
    policy's hash after it."""
    return {
        "format": FORMAT,
        "kind": "policy_version",
        "position": version.chain_position,
        "previous": version.previous_hash,
        "number": version.number,
        "created_at": _instant(version.created_at),
        "created_by": version.created_by_id,
        "note": version.note,
        "changes": version.changes,
        "policy_hash": version.policy_hash,
    }


def _hash_of(content_: dict) -> str:
    return hashlib.sha256(json.dumps(content_, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


START_FIELDS = ("chain_position", "previous_hash", "decision_hash")
END_FIELDS = ("end_chain_position", "end_previous_hash", "end_hash")


def _link(head: Head, row, content_of, fields: tuple[str, str, str]) -> dict:
    """Give `row` (a vote, a delegation, a delegation's end) the next link of the chain, in the
    `fields` named (position, previous hash, hash); the caller holds the chain lock. Returns them."""
    position, previous, hash_ = fields
    head.position += 1
    setattr(row, position, head.position)
    setattr(row, previous, head.hash)
    head.hash = _hash_of(content_of(row))
    setattr(row, hash_, head.hash)
    return {name: getattr(row, name) for name in fields}


def link_vote(head: Head, vote: Vote) -> None:
    """An unsaved vote's link."""
    _link(head, vote, vote_content, START_FIELDS)


def link_outcome(head: Head, outcome: Outcome) -> None:
    """An unsaved outcome's link."""
    _link(head, outcome, outcome_content, START_FIELDS)


def link_policy_version(head: Head, version: PolicyVersion) -> None:
    """An unsaved policy version's link."""
    _link(head, version, policy_version_content, START_FIELDS)


def link_delegation(head: Head, delegation: Delegation) -> None:
    """An unsaved delegation's link."""
    _link(head, delegation, delegation_content, START_FIELDS)


def link_delegation_end(head: Head, delegation: Delegation) -> dict:
    """The end's link for an ended delegation (ended_at, ended_by set): values for its UPDATE."""
    return _link(head, delegation, delegation_end_content, END_FIELDS)


# The newest link of the whole chain: decisions, votes, outcomes, delegations and their early ends share one
# sequence of positions. One statement, each table's newest found on its unique position's index.
_HEAD_SQL = " UNION ALL ".join(
    f"SELECT {position}, {hash_} FROM {{{table}}} WHERE {position} = (SELECT MAX({position}) FROM {{{table}}})"
    for table, position, hash_ in (
        ("approval", "chain_position", "decision_hash"),
        ("vote", "chain_position", "decision_hash"),
        ("outcome", "chain_position", "decision_hash"),
        ("delegation", "chain_position", "decision_hash"),
        ("delegation", "end_chain_position", "end_hash"),
        ("policy_version", "chain_position", "decision_hash"),
    )
)


def lock_head(using: str = DEFAULT_DB_ALIAS) -> Head:
    """Take the chain's lock for the rest of the transaction and read its newest link. Call it in
    the deciding transaction, before anything there locks an approval row."""
    connection = connections[using]
    if not connection.in_atomic_block:
        raise TransactionManagementError("The audit chain is extended only inside the deciding transaction.")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK])
    tables = {
        "approval": Approval._meta.db_table, "vote": Vote._meta.db_table, "outcome": Outcome._meta.db_table,
        "delegation": Delegation._meta.db_table, "policy_version": PolicyVersion._meta.db_table,
    }
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM ({_HEAD_SQL.format(**tables)}) AS links ORDER BY 1 DESC LIMIT 1")
        newest = cursor.fetchone()
    return Head(*newest) if newest else Head()


@dataclass
class Verdict:
    decisions: int  # links checked: decisions, votes, outcomes, delegations made and ended early
    head: Head
    broken_at: int | None = None  # the approval id of the first broken link
    position: int | None = None
    why: str = ""
    what: str = ""  # the broken link, named: an approval, a vote or a delegation

    @property
    def is_intact(self) -> bool:
        return not self.why


def verify(*, using: str = DEFAULT_DB_ALIAS, expect: tuple[int, str] | None = None) -> Verdict:
    """Walk the chain from its first link and report the first one that is broken: missing (a
    decision, vote or delegation removed), not following its predecessor's hash (a hash rewritten),
    whose content no longer matches its hash (a field changed), or whose stored arguments, requested
    or edited, no longer hash to what it covers (arguments rewritten). A decided approval outside the
    chain (made or decided around the services) breaks it too. `expect` is a (position, hash) kept elsewhere."""
    approvals = Approval.objects.using(using)
    head = Head()
    for position, kind, row in _links(using):
        if why := _why_broken(kind, row, head):
            return Verdict(head.position, head, _approval_of(kind, row), position, why, what=_label(kind, row))
        head = Head(position, _stored_hash(kind, row))
    outside = approvals.exclude(status=Approval.Status.PENDING).filter(chain_position__isnull=True)
    if stray := outside.order_by("decided_at", "pk").values_list("pk", flat=True).first():
        return Verdict(head.position, head, stray, None, OUTSIDE)
    if ended := Delegation.objects.using(using).filter(ended_at__isnull=False, end_chain_position__isnull=True).first():
        return Verdict(head.position, head, None, None, "it was ended early around the services (its end is not in the chain)", what=_label("delegation", ended))
    if expect is not None:
        position, expected_hash = expect
        if position > head.position:
            why = f"link {position} is missing: the chain ends at {head.position}"
            return Verdict(head.position, head, None, position, why)
        stored_hash = next((_stored_hash(kind, row) for at, kind, row in _links(using) if at == position), None)
        if stored_hash != expected_hash:
            return Verdict(head.position, head, None, position, f"link {position} has another hash than expected")
    return Verdict(head.position, head)


def _links(using: str):
    """Every link of the chain, in order of position: (position, kind, row)."""
    chain = Approval.objects.using(using).filter(chain_position__isnull=False).select_related("tool_call").only(*HASHED_FIELDS)
    delegations = Delegation.objects.using(using)
    streams = (
        ((a.chain_position, "approval", a) for a in chain.order_by("chain_position").iterator(chunk_size=2000)),
        ((v.chain_position, "vote", v) for v in Vote.objects.using(using).order_by("chain_position").iterator(chunk_size=2000)),
        ((o.chain_position, "outcome", o) for o in Outcome.objects.using(using).order_by("chain_position").iterator(chunk_size=2000)),
        ((d.chain_position, "delegation", d) for d in delegations.order_by("chain_position").iterator()),
        (
            (d.end_chain_position, "delegation.end", d)
            for d in delegations.filter(end_chain_position__isnull=False).order_by("end_chain_position").iterator()
        ),
        ((p.chain_position, "policy_version", p) for p in PolicyVersion.objects.using(using).order_by("chain_position").iterator()),
    )
    return heapq.merge(*streams, key=lambda link: link[0])


def _stored_hash(kind: str, row) -> str:
    return row.end_hash if kind == "delegation.end" else row.decision_hash


def _approval_of(kind: str, row) -> int | None:
    return row.pk if kind == "approval" else getattr(row, "approval_id", None)


def _label(kind: str, row) -> str:
    if kind == "approval":
        return f"approval #{row.pk}"
    if kind in ("vote", "outcome"):
        return f"{kind} #{row.pk} on approval #{row.approval_id}"
    if kind == "policy_version":
        return f"policy version {row.number}"
    return f"{'the end of ' if kind == 'delegation.end' else ''}delegation #{row.pk}"


def _why_broken(kind: str, row, head: Head) -> str:
    """Why the link `row` does not extend the chain that ends at `head`, or "" if it does."""
    if kind == "delegation.end":
        position, previous = row.end_chain_position, row.end_previous_hash
    else:
        position, previous = row.chain_position, row.previous_hash
    expected = head.position + 1
    if position > expected:
        last = position - 1
        missing = f"{expected}" if last == expected else f"{expected} to {last}"
        return f"link {missing} before it is missing: the decision there was removed"
    if position != expected:
        return f"its position is out of place: link {expected} was expected"
    if previous != head.hash:
        return "it does not follow the previous link's hash: a hash was rewritten"
    if kind == "vote":
        changed = _hash_of(vote_content(row)) != row.decision_hash
    elif kind == "outcome":
        changed = _hash_of(outcome_content(row)) != row.decision_hash
    elif kind == "delegation":
        changed = _hash_of(delegation_content(row)) != row.decision_hash
    elif kind == "delegation.end":
        changed = _hash_of(delegation_end_content(row)) != row.end_hash
    elif kind == "policy_version":
        changed = _hash_of(policy_version_content(row)) != row.decision_hash
    else:
        if row.status == Approval.Status.PENDING:
            return "it is in the chain but pending again: its decision was undone"
        if decision_hash(row) != row.decision_hash:
            return "its content no longer matches its hash: it was changed after the decision"
        return _arguments_changed(row)
    return "its content no longer matches its hash: it was changed after it was made" if changed else ""


def _arguments_changed(approval: Approval) -> str:
    """Which stored arguments of a chained decision no longer hash to what its link covers, or "".
    A question a tool asks mid-call (an input request) covers no arguments: its hash is empty, and
    its call's arguments must stay empty."""
    requested = approval.tool_call.arguments
    if (arguments_hash(requested) if requested or approval.arguments_hash else "") != approval.arguments_hash:
        return (
            "its requested arguments (tool_call.arguments) no longer match the arguments_hash it chains: "
            "they were changed after the decision"
        )
    edited = approval.edited_arguments
    if (arguments_hash(edited) if edited is not None else "") != approval.edited_arguments_hash:
        return (
            "its edited arguments (edited_arguments) no longer match the edited_arguments_hash it chains: "
            "they were changed after the decision"
        )
    return ""
