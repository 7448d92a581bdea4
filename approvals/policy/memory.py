"""Rules with memory: conditions on what happened before in the conversation or in a window of time.

- `after`: {"tool", "status", "same", "within_seconds"}: the rule applies only once an earlier call
  of the same conversation, of `tool` (a name or a glob), ended `status` (succeeded by default) within
  the window, with the same value of each argument named in `same` ("only after fraud_check
  succeeded for the same order_id").
- `at_most`: {"count", "within_seconds"}: the rule decides at most `count` calls in any such window
  ("at most 3 send_email an hour without asking"); past it, calls are asked as if the rule were not
  there. Counted from the approvals the rule made, with the rule's row locked in the gate's
  transaction (PostgreSQL; SQLite's transactions hold the file's lock from their BEGIN): two calls
  racing for its last place never both get it.

The live gate (approvals.policy.rules.screen and its use-taking), the shadow
(approvals.policy.shadow) and the simulator (approvals.policy.simulate) read them here."""
import fnmatch
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from core.inputs import is_storable

from ..models import Approval, Rule

AFTER = "after"  # the `unmet` name of a rule whose `after` is not met (approvals.policy.explain)
STATUSES = ("succeeded", "failed", "rejected")
MAX_SECONDS = 366 * 24 * 3600
MAX_COUNT = 1_000_000
MAX_SAME = 10
MAX_LOOKED_AT = 500  # earlier calls of the tool read for `after` (the newest)


class InvalidMemory(ValueError):
    """A memory condition that says nothing valid (rulemaking raises it as InvalidRule)."""


def check_after(after) -> dict | None:
    if after is None:
        return None
    if not isinstance(after, dict) or not set(after) <= {"tool", "status", "same", "within_seconds"}:
        raise InvalidMemory('`after` is {"tool": ..., "status": "succeeded", "same": [argument names], "within_seconds": n}.')
    tool = after.get("tool")
    if not isinstance(tool, str) or not tool.strip() or len(tool) > 200 or not is_storable(tool):
        raise InvalidMemory("`after.tool` is a tool's name or a glob, at most 200 characters.")
    status = after.get("status", "succeeded")
    if status not in STATUSES:
        raise InvalidMemory(f"`after.status` is one of {', '.join(STATUSES)}.")
    same = after.get("same", [])
    if (not isinstance(same, list) or len(same) > MAX_SAME
            or not all(isinstance(name, str) and name and len(name) <= 100 and is_storable(name) for name in same)):
        raise InvalidMemory(f"`after.same` is a list of at most {MAX_SAME} argument names.")
    return {"tool": tool.strip(), "status": status, "same": list(dict.fromkeys(same)), "within_seconds": _seconds(after, "after")}


def check_at_most(at_most) -> dict | None:
    if at_most is None:
        return None
    if not isinstance(at_most, dict) or set(at_most) != {"count", "within_seconds"}:
        raise InvalidMemory('`at_most` is {"count": n, "within_seconds": n}.')
    count = at_most["count"]
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise InvalidMemory(f"`at_most.count` is a whole number from 1 to {MAX_COUNT}.")
    return {"count": count, "within_seconds": _seconds(at_most, "at_most")}


def _seconds(spec: dict, name: str) -> int:
    seconds = spec.get("within_seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_SECONDS:
        raise InvalidMemory(f"`{name}.within_seconds` is a whole number of seconds from 1 to {MAX_SECONDS}.")
    return seconds


def after_met(rule: Rule, *, conversation_id, arguments: dict, at=None, before_call_id: int | None = None) -> bool:
    """Whether the conversation has the earlier call the rule's `after` asks for, ended within its
    window before `at` (now); `before_call_id`: only calls before that one (the simulator's replay)."""
    after = rule.after
    if not after:
        return True
    same = after.get("same") or []
    if any(name not in arguments for name in same):
        return False
    at = at or timezone.now()
    ToolCall = Approval.tool_call.field.related_model  # approvals never imports chat
    earlier = ToolCall.objects.filter(
        message__conversation_id=conversation_id, status=after.get("status", "succeeded"),
        finished_at__gte=at - timedelta(seconds=after["within_seconds"]), finished_at__lte=at,
    )
    if before_call_id is not None:
        earlier = earlier.filter(pk__lt=before_call_id)
    if not any(mark in after["tool"] for mark in "*?["):
        earlier = earlier.filter(name=after["tool"])
    for name, values in earlier.order_by("-pk").values_list("name", "arguments")[:MAX_LOOKED_AT]:
        if fnmatch.fnmatchcase(name, after["tool"]) and isinstance(values, dict) and all(
            name_ in values and values[name_] == arguments[name_] for name_ in same
        ):
            return True
    return False


def under_limit(rule: Rule, now=None) -> bool:
    """In the gate's transaction: whether the rule has decided fewer than its `at_most.count` calls in
    the window ending now. Locks the rule's row first (PostgreSQL), so that the count holds until
    this transaction's approval is stored and committed."""
    at_most = rule.at_most
    if not at_most:
        return True
    now = now or timezone.now()
    with transaction.atomic(savepoint=False):  # the caller's: the lock lasts until its approval is committed
        list(Rule.objects.select_for_update().filter(pk=rule.pk).values_list("pk"))
        since = now - timedelta(seconds=at_most["within_seconds"])
        return Approval.objects.filter(rule_id=rule.pk, requested_at__gt=since).count() < at_most["count"]


def limit_reached(rule: Rule) -> str:
    """Why a rule matched and did not decide: its at_most, in words (approvals.policy.explain)."""
    at_most = rule.at_most
    return f"it already decided its {at_most['count']} call{'s' if at_most['count'] != 1 else ''} in {_window(at_most['within_seconds'])}"


def after_unmet(rule: Rule) -> str:
    after = rule.after
    same = f" with the same {', '.join(after['same'])}" if after.get("same") else ""
    return f"no earlier `{after['tool']}` call {after.get('status', 'succeeded')}{same} in this conversation in {_window(after['within_seconds'])}"


def _window(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"the last {unit}" if count == 1 else f"the last {count} {unit}s"
    return f"the last {seconds} s"


def within_window(times: list, at_most: dict) -> list[bool]:
    """For times oldest first (the simulator's replay): whether each would have been decided under
    `at_most`, counting only those decided."""
    window = timedelta(seconds=at_most["within_seconds"])
    decided, kept = [], []
    for at in times:
        recent = [t for t in decided if t > at - window]
        ok = len(recent) < at_most["count"]
        if ok:
            decided.append(at)
        kept.append(ok)
    return kept
