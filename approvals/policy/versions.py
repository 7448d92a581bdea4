"""Policy versions: every change to what decides calls (agents' gates and tools, rules, routes, tool
servers' trust, links and pinned definitions) gets a numbered `PolicyVersion`, with who, when, what
changed and a hash of the whole policy after it, linked into the audit chain (approvals.audit).

django-simple-history keeps each row's history (the admin's History); this module listens to the
record it writes (`post_create_historical_record`, sent from the rows' post_save, post_delete and
m2m_changed) and numbers the policy. A save outside `recording()` makes its own version at once,
in the saving transaction when there is one; inside `recording()` (the admin's forms, import_policy,
routes made with their groups) the changes are gathered and written as one version when the block
ends, in its transaction. A change that leaves every policy field as it was (an agent renamed, a
server's listing refreshed) makes no version; QuerySet.update() and bulk_create() send no signals,
so code that changes policy rows saves them.

Lock order: `recording()` takes the audit chain's lock when it starts, before it changes any row,
as deciders do, so a decider that holds the chain lock and bumps a rule's uses never waits on an
editor that holds that rule's row and waits for the chain.
"""
import contextvars
import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Max, Prefetch
from django.dispatch import receiver
from django.utils import timezone
from simple_history.models import HistoricalRecords
from simple_history.signals import post_create_historical_record
from simple_history.utils import get_m2m_reverse_field_name

from .. import audit
from ..models import PolicyVersion, Route, Rule

ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}

# model label → (the fields that decide calls, the many-to-many ones among them)
AGENT_FIELDS = (
    "tools", "require_approval", "all_tools_need_approval", "owner_max_risk", "max_auto_approve_risk",
    "approval_timeout_seconds", "timeout_action", "timeout_actions", "approval_valid_seconds", "always_ask", "step_up_from_risk", "trust_after",
    "fetch_allowlist", "allow_private_fetch", "open_to_everyone", "reviewer_model", "reviewer_max_risk",
)
TRACKED = {
    "chat.agent": (AGENT_FIELDS, ("allowed_users", "allowed_groups")),
    "approvals.rule": (
        ("effect", "mode", "tool", "arguments", "after", "at_most", "scope", "conversation_id", "agent_id", "created_by_id", "expires_at", "max_uses",
         "note", "enabled", "deleted_at"),
        (),
    ),
    "approvals.route": (
        ("agent_id", "tool", "min_risk", "quorum", "remind_after_seconds", "escalate_after_seconds", "deleted_at"),
        ("approvers", "escalate_to"),
    ),
    "toolservers.toolserver": (("name", "enabled", "trusted"), ()),
    "toolservers.agenttoolserver": (("agent_id", "server_id", "tools", "require_approval", "risks"), ()),
    "toolservers.toolpin": (("server_id", "name", "definition_hash", "approved_by_id", "approved_at"), ()),
}


@dataclass
class _Recording:
    user: object = None
    note: str = ""
    changes: list = field(default_factory=list)
    users: list = field(default_factory=list)  # who made the gathered changes, as their history says


_recording: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar("hitl_policy_recording", default=None)


@contextmanager
def recording(*, user=None, note: str = "") -> Iterator[None]:
    """Gather the policy changes made in this block into one version, written as the block ends, in
    its transaction (nothing is written if it raises). `user` is who made them (else the history's)."""
    if _recording.get() is not None:  # inside another recording: its version takes these changes too
        yield
        return
    current = _Recording(user=user, note=note)
    token = _recording.set(current)
    try:
        with transaction.atomic():
            head = audit.lock_head()  # before any policy row is touched (see the lock order above)
            yield
            if current.changes:
                _write(current.changes, user=current.user or next(iter(current.users), None), note=note, head=head)
    finally:
        _recording.reset(token)


def current_number() -> int | None:
    """The number of the policy version in force now, or None before the first one."""
    return PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first()


@receiver(post_create_historical_record, dispatch_uid="approvals.policy.versions")
def on_history_recorded(sender, instance, history_instance, **kwargs) -> None:
    if (tracked := TRACKED.get(instance._meta.label_lower)) is None:
        return
    change = _change(instance, history_instance, *tracked)
    if change is None:
        return
    user = history_instance.history_user
    if (current := _recording.get()) is not None:
        current.changes.append(change)
        if user is not None:
            current.users.append(user)
        return
    with transaction.atomic():
        _write([change], user=user, note="", head=audit.lock_head())


def _write(changes: list[dict], *, user, note: str, head: audit.Head) -> PolicyVersion:
    number = (PolicyVersion.objects.aggregate(newest=Max("number"))["newest"] or 0) + 1  # under the chain lock
    version = PolicyVersion(
        number=number, created_at=timezone.now(), created_by=user if getattr(user, "pk", None) else None, note=note[:200],
        changes=changes, policy_hash=policy_hash(policy_document()),
    )
    audit.link_policy_version(head, version)
    version.save()
    return version


def _change(instance, record, fields: tuple, m2m_fields: tuple) -> dict | None:
    """What `record` (a history row just written) changed of the policy fields since the row's
    previous record: {"model", "object", "action", "fields": {name: [before, after]}}, or None."""
    action = ACTIONS[record.history_type]
    previous = None
    if action != "created":
        previous = (
            type(record).objects.filter(id=record.id, history_id__lt=record.history_id).order_by("-history_id").first()
        )
    changed = {}
    for name in fields:
        before = _plain(getattr(previous, name)) if previous is not None else None
        after = _plain(getattr(record, name))
        if (after not in (None, "", [], {})) if action == "created" else before != after:
            changed[name] = [before, after]
    for name in m2m_fields:
        before, after = _members(instance, name, previous, record)
        if before != after:
            changed[name] = [before, after]
    if action == "changed" and not changed:
        return None
    return {"model": instance._meta.label_lower, "object": label(instance), "action": action, "fields": changed}


def _members(instance, name: str, previous, record) -> tuple[list, list]:
    """The names of a many-to-many field's members in the previous record and in this one."""
    m2m_field = instance._meta.get_field(name)
    history_model = HistoricalRecords.m2m_models[m2m_field]
    target = get_m2m_reverse_field_name(m2m_field)
    ids = [record.history_id] + ([previous.history_id] if previous is not None else [])
    rows = history_model.objects.filter(history_id__in=ids).values_list("history_id", f"{target}_id")
    members = {history_id: set() for history_id in ids}
    for history_id, member in rows:
        members[history_id].add(member)
    before = members.get(previous.history_id, set()) if previous is not None else set()
    after = members[record.history_id]
    if before == after:
        return [], []
    related = m2m_field.related_model
    key = "username" if related is get_user_model() else "name"
    names = dict(related.objects.filter(pk__in=before | after).values_list("pk", key))
    return sorted(names.get(pk, str(pk)) for pk in before), sorted(names.get(pk, str(pk)) for pk in after)


def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value) if isinstance(value, uuid.UUID) else value


def label(instance) -> str:
    """A row of the policy named as people (and export_policy) name it."""
    name = instance._meta.label_lower
    if name == "chat.agent":
        return f"agent {instance.slug}"
    if name == "toolservers.toolserver":
        return f"tool server {instance.name}"
    if name == "toolservers.agenttoolserver":
        return f"agent {instance.agent.slug} uses {instance.server.name}"
    if name == "toolservers.toolpin":
        return f"pin {instance.server.name}/{instance.name}"
    return f"{instance._meta.model_name} #{instance.pk}"


# --- The whole policy, as export_policy writes it and as its hash covers it ----------------------


def policy_document() -> dict:
    """The policy as plain data, in a stable order, ids replaced by natural keys (agent slugs, group
    names, usernames, server names). Conversation rules are left out: they belong to their
    conversation, as its decisions do (they are versioned all the same)."""
    Agent = apps.get_model("chat", "Agent")
    ToolServer = apps.get_model("toolservers", "ToolServer")
    AgentToolServer = apps.get_model("toolservers", "AgentToolServer")
    ToolPin = apps.get_model("toolservers", "ToolPin")
    agents = Agent.objects.order_by("slug").prefetch_related(
        Prefetch("allowed_users", queryset=get_user_model().objects.only("username")),
        Prefetch("allowed_groups", queryset=Group.objects.only("name")),
    )
    rules = (
        Rule.objects.filter(enabled=True, deleted_at__isnull=True).exclude(scope=Rule.Scope.CONVERSATION)
        .select_related("agent", "created_by").order_by("id")
    )
    routes = (
        Route.objects.filter(deleted_at__isnull=True).select_related("agent").order_by("id")
        .prefetch_related(Prefetch("approvers", queryset=Group.objects.only("name")), Prefetch("escalate_to", queryset=Group.objects.only("name")))
    )
    servers = ToolServer.objects.order_by("name").prefetch_related(Prefetch("pins", queryset=ToolPin.objects.order_by("name")))
    links = AgentToolServer.objects.select_related("agent", "server").order_by("agent__slug", "server__name")
    return {
        "agents": [agent_entry(agent) for agent in agents],
        "rules": sorted((rule_entry(rule) for rule in rules), key=_sort_key),
        "routes": sorted((route_entry(route) for route in routes), key=_sort_key),
        "tool_servers": [
            {
                "name": server.name,
                "enabled": server.enabled,
                "trusted": server.trusted,
                "pins": [{"tool": pin.name, "definition_hash": pin.definition_hash} for pin in server.pins.all()],
            }
            for server in servers
        ],
        "agent_tool_servers": [
            {"agent": link.agent.slug, "server": link.server.name, "tools": link.tools, "require_approval": link.require_approval, "risks": link.risks}
            for link in links
        ],
    }


def agent_entry(agent) -> dict:
    entry = {"slug": agent.slug}
    entry.update({name: getattr(agent, name) for name in AGENT_FIELDS if name != "open_to_everyone"})
    entry["access"] = {
        "open_to_everyone": agent.open_to_everyone,
        "users": sorted(user.username for user in agent.allowed_users.all()),
        "groups": sorted(group.name for group in agent.allowed_groups.all()),
    }
    return entry


def rule_entry(rule: Rule) -> dict:
    return {
        "effect": rule.effect,
        "tool": rule.tool,
        "arguments": rule.arguments,
        "scope": rule.scope,
        "agent": rule.agent.slug if rule.agent_id else None,
        "user": rule.created_by.username,
        "expires_at": _instant(rule.expires_at),
        "max_uses": rule.max_uses,
        "note": rule.note,
    } | {  # what older rules do not have is left out: their entries are as they always were
        name: value for name, value in (("mode", rule.mode if rule.mode != Rule.Mode.LIVE else None), ("after", rule.after), ("at_most", rule.at_most))
        if value
    }


def route_entry(route: Route) -> dict:
    return {
        "agent": route.agent.slug,
        "tool": route.tool,
        "min_risk": route.min_risk,
        "approvers": sorted(group.name for group in route.approvers.all()),
        "quorum": route.quorum,
        "remind_after_seconds": route.remind_after_seconds,
        "escalate_after_seconds": route.escalate_after_seconds,
        "escalate_to": sorted(group.name for group in route.escalate_to.all()),
    }


def _instant(value: datetime | None) -> str | None:
    return value.astimezone(dt_timezone.utc).isoformat() if value else None


def _sort_key(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True, default=str)


def policy_hash(document: dict) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
