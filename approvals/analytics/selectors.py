"""How approvals are decided over a window of days: per approver, agent and tool, a chart's days,
and the rubber-stamp suspects. Aggregated in SQL, so the number of queries never grows with rows.

Definitions (the page, the API and the tests share them):

- The window is the last `days` days, today included, from midnight (TIME_ZONE).
- A *decision* is a person's approve or reject (status approved or rejected, `decided_by` set),
  decided in the window. Rules', repeats' and expiries' outcomes are nobody's decision; answers to
  questions are not approvals, so they are left out too.
- Time to decide is `decided_at - requested_at`. Median and p95 are nearest-rank: of n times in
  ascending order, the ceil(p * n / 100)-th (the lower median for an even n).
- A vote toward a quorum is a decision (an approve) of its voter, unless it was also the deciding
  one (then the decision counts, once). Per agent and per tool, an approval counts once.
- Escalated: approvals that escalated to their route's escalation groups in the window.
- A rubber-stamp suspect made at least 20 decisions and either took a median under 2 seconds,
  whatever they decided (faster than a person reads a call: a script, or a hand on the key), or
  approved at least 95 % of them with a median under 3 seconds. Its reason says which, in words.
"""
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Case, Count, F, FloatField, Func, IntegerField, Q, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from ..models import Approval, Vote

DEFAULT_DAYS = 30
MAX_DAYS = 365
SUSPECT_MIN_DECISIONS = 20
SUSPECT_MIN_APPROVED_PERCENT = 95
SUSPECT_MAX_MEDIAN_SECONDS = 3.0
SUSPECT_BOT_MEDIAN_SECONDS = 2.0  # under this, a suspect whatever the approval share

# A person's approve or reject: not a rule's, a repeat's or an expiry's (those are by nobody).
HUMAN_DECISION = Q(
    decided_by__isnull=False, status__in=[Approval.Status.APPROVED, Approval.Status.REJECTED]
) & ~Q(decided_via__in=[Approval.Via.RULE, Approval.Via.REPEAT, Approval.Via.TIMEOUT])
EXPIRED = Q(status=Approval.Status.EXPIRED)


class InvalidWindow(ValueError):
    pass


@dataclass(frozen=True)
class Breakdown:
    """The decisions about one approver, agent or tool (`label`) in the window."""

    label: str
    decisions: int
    approved: int
    rejected: int
    expired: int  # approvals of this agent or tool that expired; always 0 for an approver
    median_seconds: float | None
    p95_seconds: float | None

    @property
    def approval_rate(self) -> float | None:
        return round(self.approved / self.decisions, 4) if self.decisions else None

    @property
    def rubber_stamp_reason(self) -> str:
        """Which rule makes this approver a rubber-stamp suspect, in words (the figures stand beside
        it); "" when they are not one."""
        median = self.median_seconds
        if self.decisions < SUSPECT_MIN_DECISIONS or median is None:
            return ""
        if median < SUSPECT_BOT_MEDIAN_SECONDS:
            return "a median under 2 s: faster than a call can be read"
        if self.approved * 100 >= SUSPECT_MIN_APPROVED_PERCENT * self.decisions and median < SUSPECT_MAX_MEDIAN_SECONDS:
            return "95 % or more approved, with a median under 3 s"
        return ""

    @property
    def is_rubber_stamp_suspect(self) -> bool:
        return bool(self.rubber_stamp_reason)


@dataclass(frozen=True)
class Day:
    date: date
    pending: int  # waiting at the end of the day (now, for today)
    decided: int  # decisions (as above) made that day


@dataclass(frozen=True)
class Analytics:
    days: int
    since: datetime
    by_approver: list[Breakdown]
    by_agent: list[Breakdown]
    by_tool: list[Breakdown]
    expired: int
    escalated: int
    per_day: list[Day]
    oversight: object = None  # approvals.analytics.oversight.Report: the reviewer, rules, people, shadow rules

    @property
    def rubber_stamp_suspects(self) -> list[Breakdown]:
        return [row for row in self.by_approver if row.is_rubber_stamp_suspect]

    @property
    def decisions(self) -> int:
        return sum(row.decisions for row in self.by_approver)


def parse_days(text: str | None) -> int:
    """The window asked for: a whole number of days from 1 to MAX_DAYS; none given: DEFAULT_DAYS."""
    if text is None or text == "":
        return DEFAULT_DAYS
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or not 1 <= int(text) <= MAX_DAYS:
        raise InvalidWindow(f"`days` must be a whole number of days from 1 to {MAX_DAYS} (default {DEFAULT_DAYS}).")
    return int(text)


def approval_analytics(*, days: int, now: datetime | None = None) -> Analytics:
    """Everything the page and the API show, in eleven queries."""
    from . import oversight  # it reads this module's definitions
    now = now or timezone.now()
    first_day = timezone.localtime(now).date() - timedelta(days=days - 1)
    since = timezone.make_aware(datetime.combine(first_day, datetime.min.time()))
    by_agent = breakdown(since, now, "conversation__agent__slug", with_expired=True)
    return Analytics(
        days=days,
        since=since,
        by_approver=breakdown(since, now, f"decided_by__{get_user_model().USERNAME_FIELD}", with_expired=False, votes=True),
        by_agent=by_agent,
        by_tool=breakdown(since, now, "tool_call__name", with_expired=True),
        expired=sum(row.expired for row in by_agent),  # every approval has an agent
        escalated=count_escalated(since, now),
        per_day=days_of(since, now, days),
        oversight=oversight.oversight(since, now),
    )


class SecondsBetween(Func):
    """Seconds from the second expression to the first, as a float, on SQLite and PostgreSQL."""

    arity = 2
    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s)) * 86400.0)", arg_joiner=") - julianday(", **extra
        )

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="CAST(EXTRACT(EPOCH FROM (%(expressions)s)) AS double precision)",
            arg_joiner=" - ", **extra,
        )


def breakdown(since: datetime, now: datetime, label: str, *, with_expired: bool, votes: bool = False) -> list[Breakdown]:
    """One query: the window's rows numbered by time to decide within their label (a window
    function over a subquery), then counted and picked per label by the outer GROUP BY, so the
    medians never bring rows to Python. `label` is an ORM path to the grouping text. `votes`: the
    labels are people, and each vote toward a quorum that was not also its voter's deciding one
    counts as one of their approvals (a vote's time: from the request to the vote)."""
    window = Q(decided_at__gte=since, decided_at__lte=now)
    rows = (
        Approval.objects.filter(window & ((HUMAN_DECISION | EXPIRED) if with_expired else HUMAN_DECISION))
        .order_by()
        .annotate(
            label=F(label),
            seconds=SecondsBetween(F("decided_at"), F("requested_at")),
            is_decision=one_if(HUMAN_DECISION),
            is_approved=one_if(HUMAN_DECISION & Q(status=Approval.Status.APPROVED)),
            is_rejected=one_if(HUMAN_DECISION & Q(status=Approval.Status.REJECTED)),
            is_expired=one_if(EXPIRED),
        )
        .values("label", "seconds", "is_decision", "is_approved", "is_rejected", "is_expired", "pk")
    )
    if votes:
        own = Q(approval__decided_by__isnull=False) & Q(approval__decided_by=F("user"))
        cast = (
            Vote.objects.filter(decided_at__gte=since, decided_at__lte=now).exclude(own).order_by()
            .annotate(
                label=F(f"user__{get_user_model().USERNAME_FIELD}"),
                seconds=SecondsBetween(F("decided_at"), F("approval__requested_at")),
                is_decision=Value(1), is_approved=Value(1), is_rejected=Value(0), is_expired=Value(0),
            )
            .values("label", "seconds", "is_decision", "is_approved", "is_rejected", "is_expired", "pk")
        )
        rows = rows.union(cast, all=True)
    inner, params = rows.query.sql_with_params()
    quantile = "MAX(CASE WHEN d.is_decision = 1 AND d.nth = (d.n * {p} + 99) / 100 THEN d.seconds END)"
    # Decisions are numbered apart from expiries, so a median is of decisions alone.
    sql = f"""
        SELECT d.label, SUM(d.is_decision), SUM(d.is_approved), SUM(d.is_rejected), SUM(d.is_expired),
               {quantile.format(p=50)}, {quantile.format(p=95)}
        FROM (
            SELECT u.*,
                   ROW_NUMBER() OVER (PARTITION BY u.label, u.is_decision ORDER BY u.seconds, u.pk) AS nth,
                   COUNT(*) OVER (PARTITION BY u.label, u.is_decision) AS n
            FROM ({inner}) u
        ) d
        GROUP BY d.label
        ORDER BY SUM(d.is_decision) DESC, d.label
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [
            Breakdown(str(label), int(decisions), int(approved), int(rejected), int(expired), _seconds(median), _seconds(p95))
            for label, decisions, approved, rejected, expired, median, p95 in cursor.fetchall()
        ]


def one_if(condition: Q) -> Case:
    return Case(When(condition, then=Value(1)), default=Value(0), output_field=IntegerField())


def _seconds(value) -> float | None:
    # To the millisecond: SQLite's julianday() is a double, off by some microseconds.
    return None if value is None else round(float(value), 3)


def count_escalated(since: datetime, now: datetime) -> int:
    """Approvals that escalated to their route's escalation groups in the window."""
    return Approval.objects.filter(escalated_at__gte=since, escalated_at__lte=now).count()


def days_of(since: datetime, now: datetime, days: int) -> list[Day]:
    """The chart: per day, the pending approvals at its end and the decisions made in it. The
    pending count is walked back from today's (the partial index of pending approvals counts it):
    at the end of the day before, add back what left pending that day and take away what came."""
    pending_now = Approval.objects.filter(status=Approval.Status.PENDING).count()
    requested = dict(
        Approval.objects.filter(requested_at__gte=since, requested_at__lte=now)
        .annotate(day=TruncDate("requested_at")).values("day").annotate(n=Count("pk")).values_list("day", "n")
    )
    left = {
        day: (n, decided)
        for day, n, decided in Approval.objects.filter(decided_at__gte=since, decided_at__lte=now)
        .annotate(day=TruncDate("decided_at")).values("day")
        .annotate(n=Count("pk"), decided=Count("pk", filter=HUMAN_DECISION)).values_list("day", "n", "decided")
    }
    first_day = timezone.localtime(since).date()
    result, pending = [], pending_now
    for offset in reversed(range(days)):
        day = first_day + timedelta(days=offset)
        left_that_day, decided = left.get(day, (0, 0))
        result.append(Day(day, pending, decided))
        pending = pending - requested.get(day, 0) + left_that_day
    return list(reversed(result))
