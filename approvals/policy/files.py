"""The policy as a YAML file (manage.py export_policy / import_policy): written from
`policy_versions.policy_document()`, read back checked, compared with the database as a list of
changes, and applied in one transaction as one policy version.

A file manages the sections it has: a missing section is left as it is. Within a section it is the
whole truth: a standing rule (agent_user, agent or global scope) or a route not in the file is
disabled (a rule) or removed (a route), a link not in it is deleted. Agents and tool servers are
named, never made here (an agent is a security boundary, a server a command this host runs):
unknown names are errors. Pinned definitions are shown, never applied: an admin accepts a tool's
definition on the server's page, against what the server lists."""
import json
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from typing import Callable

import yaml
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import memory, versions as policy_versions, rulemaking
from ..models import Risk, Route, Rule
from ..deciders.routemaking import InvalidRoute, check_route

SECTIONS = ("agents", "rules", "routes", "tool_servers", "agent_tool_servers")
AGENT_KEYS = {"slug", "access", *policy_versions.AGENT_FIELDS} - {"open_to_everyone"}
RULE_KEYS = {"effect", "tool", "arguments", "scope", "agent", "user", "expires_at", "max_uses", "note", "mode", "after", "at_most"}
ROUTE_KEYS = {"agent", "tool", "min_risk", "approvers", "quorum", "remind_after_seconds", "escalate_after_seconds", "escalate_to"}
SERVER_KEYS = {"name", "enabled", "trusted", "pins"}
LINK_KEYS = {"agent", "server", "tools", "require_approval", "risks"}
STANDING_SCOPES = (Rule.Scope.AGENT_USER, Rule.Scope.AGENT, Rule.Scope.GLOBAL)


class PolicyFileError(ValueError):
    """The file cannot be applied: said with the line and key, nothing changed."""


@dataclass
class Change:
    text: str
    apply: Callable[[], None]


def dump(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)


class _Mapping(dict):
    line = 0


class _Loader(yaml.SafeLoader):
    """Safe YAML whose mappings remember their line, for errors that name it."""


def _construct_mapping(loader, node):
    mapping = _Mapping(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load(text: str) -> dict:
    try:
        document = yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise PolicyFileError(f"{where}not valid YAML: {getattr(error, 'problem', None) or error}") from None
    if not isinstance(document, dict):
        raise PolicyFileError("line 1: the file is a mapping of sections: " + ", ".join(SECTIONS))
    for key, value in document.items():
        if key not in SECTIONS:
            raise PolicyFileError(f"line {document.line}: unknown section {key!r} (sections: {', '.join(SECTIONS)})")
        if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
            raise PolicyFileError(f"line {document.line}: {key} is a list of mappings")
    return document


def plan(document: dict) -> tuple[list[Change], list[str]]:
    """(the changes that make the database hold `document`, notes on what is shown but not applied).
    Raises PolicyFileError at the first entry that cannot be applied."""
    changes, notes = [], []
    if "agents" in document:
        changes += _agent_changes(document["agents"])
    if "rules" in document:
        changes += _rule_changes(document["rules"])
    if "routes" in document:
        changes += _route_changes(document["routes"])
    if "tool_servers" in document:
        server_changes, notes = _server_changes(document["tool_servers"])
        changes += server_changes
    if "agent_tool_servers" in document:
        changes += _link_changes(document["agent_tool_servers"])
    return changes, notes


def apply(changes: list[Change], *, user=None, note: str = "") -> None:
    """All of them in one transaction, recorded as one policy version."""
    with policy_versions.recording(user=user, note=note):
        for change in changes:
            change.apply()


# --- Entries ---------------------------------------------------------------------------------------


def _where(entry, section: str, index: int) -> str:
    return f"line {getattr(entry, 'line', '?')} ({section}[{index}])"


def _keys(entry: dict, allowed: set, required: tuple, where: str) -> None:
    if unknown := sorted(set(entry) - allowed):
        raise PolicyFileError(f"{where}: unknown key {unknown[0]!r}")
    if missing := [key for key in required if key not in entry]:
        raise PolicyFileError(f"{where}: {missing[0]!r} is required")


def _names(value, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise PolicyFileError(f"{where}: {key} is a list of names")
    return value


def _user(username, where: str, key: str = "user"):
    user = get_user_model().objects.filter(username=username).first() if isinstance(username, str) else None
    if user is None:
        raise PolicyFileError(f"{where}: {key}: unknown user {username!r}")
    return user


def _agent(slug, where: str, key: str = "agent"):
    agent = apps.get_model("chat", "Agent").objects.filter(slug=slug).first() if isinstance(slug, str) else None
    if agent is None:
        raise PolicyFileError(f"{where}: {key}: unknown agent {slug!r}")
    return agent


def _show(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _agent_changes(entries: list) -> list[Change]:
    changes = []
    for index, entry in enumerate(entries):
        where = _where(entry, "agents", index)
        _keys(entry, AGENT_KEYS, ("slug",), where)
        agent = _agent(entry["slug"], where, "slug")
        current = policy_versions.agent_entry(agent)
        fields = {name: entry[name] for name in AGENT_KEYS - {"slug", "access"} if name in entry and entry[name] != current[name]}
        for name in ("tools", "require_approval", "fetch_allowlist"):
            if name in fields:
                _names(fields[name], where, name)
        if "always_ask" in fields and not (  # as the agent admin checks them (chat.admin.AgentForm)
            isinstance(fields["always_ask"], dict)
            and all(
                isinstance(tool, str) and tool.strip() and isinstance(patterns, list)
                and all(isinstance(p, str) and p.strip() and len(p) <= 200 for p in patterns)
                for tool, patterns in fields["always_ask"].items()
            )
        ):
            raise PolicyFileError(f"{where}: always_ask is {{tool: [patterns]}}, each pattern text of 1 to 200 characters")
        candidate = apps.get_model("chat", "Agent")(**{f.attname: getattr(agent, f.attname) for f in agent._meta.concrete_fields})
        for name, value in fields.items():
            setattr(candidate, name, value)
        try:
            candidate.clean_fields(exclude=[f.name for f in agent._meta.fields if f.name not in fields])
        except ValidationError as error:
            name, messages = next(iter(error.message_dict.items()))
            raise PolicyFileError(f"{where}: {name}: {' '.join(messages)}") from None
        access = _access(entry.get("access"), current["access"], where) if "access" in entry else None
        for name, value in fields.items():
            changes.append(Change(f"~ agent {agent.slug}: {name}: {_show(current[name])} → {_show(value)}", _set(agent, name, value)))
        if access is not None:
            changes.append(Change(f"~ agent {agent.slug}: access: {_show(current['access'])} → {_show(entry['access'])}", _set_access(agent, *access)))
    return changes


def _access(value, current: dict, where: str):
    if not isinstance(value, dict) or set(value) - {"open_to_everyone", "users", "groups"}:
        raise PolicyFileError(f"{where}: access is {{open_to_everyone, users, groups}}")
    wanted = {"open_to_everyone": value.get("open_to_everyone", False), "users": sorted(value.get("users") or []), "groups": sorted(value.get("groups") or [])}
    if not isinstance(wanted["open_to_everyone"], bool):
        raise PolicyFileError(f"{where}: access.open_to_everyone is true or false")
    if wanted == current:
        return None
    users = [_user(name, where, "access.users") for name in _names(wanted["users"], where, "access.users")]
    groups = list(Group.objects.filter(name__in=_names(wanted["groups"], where, "access.groups")))
    if missing := sorted(set(wanted["groups"]) - {group.name for group in groups}):
        raise PolicyFileError(f"{where}: access.groups: unknown group {missing[0]!r}")
    return wanted["open_to_everyone"], users, groups


def _set(row, name: str, value):
    def run():
        setattr(row, name, value)
        row.save(update_fields=[name])
    return run


def _set_access(agent, open_to_everyone: bool, users: list, groups: list):
    def run():
        agent.open_to_everyone = open_to_everyone
        agent.save(update_fields=["open_to_everyone"])
        agent.allowed_users.set(users)
        agent.allowed_groups.set(groups)
    return run


def _rule_key(entry: dict) -> str:
    memory = [entry.get("mode", "live"), entry.get("after"), entry.get("at_most")]
    return json.dumps([entry[key] for key in ("effect", "tool", "arguments", "scope", "agent", "user")] + memory, sort_keys=True)


def _rule_changes(entries: list) -> list[Change]:
    standing = list(
        Rule.objects.filter(enabled=True, deleted_at__isnull=True, scope__in=STANDING_SCOPES).select_related("agent", "created_by").order_by("id")
    )
    unmatched: dict[str, list[Rule]] = {}
    for rule in standing:
        unmatched.setdefault(_rule_key(policy_versions.rule_entry(rule)), []).append(rule)
    changes = []
    for index, entry in enumerate(entries):
        where = _where(entry, "rules", index)
        wanted = _checked_rule(entry, where)
        same = unmatched.get(_rule_key(wanted))
        if not same:
            changes.append(Change(f"+ rule: {_describe_rule(wanted)}", _create_rule(wanted)))
            continue
        rule = same.pop(0)
        current = policy_versions.rule_entry(rule)
        for name in ("expires_at", "max_uses", "note"):
            if wanted[name] != current[name]:
                value = _parse_instant(wanted[name]) if name == "expires_at" else wanted[name]
                changes.append(Change(f"~ rule #{rule.pk}: {name}: {_show(current[name])} → {_show(wanted[name])}", _set(rule, name, value)))
    for rules in unmatched.values():
        for rule in rules:
            changes.append(Change(f"- rule #{rule.pk}: {_describe_rule(policy_versions.rule_entry(rule))} (disabled)", _set(rule, "enabled", False)))
    return changes


def _checked_rule(entry: dict, where: str) -> dict:
    _keys(entry, RULE_KEYS, ("effect", "tool", "scope", "user"), where)
    wanted = {"arguments": {}, "agent": None, "expires_at": None, "max_uses": None, "note": ""} | dict(entry)
    if wanted["effect"] not in Rule.Effect.values:
        raise PolicyFileError(f"{where}: effect is allow, deny or ask")
    if wanted.get("mode", Rule.Mode.LIVE) not in Rule.Mode.values:
        raise PolicyFileError(f"{where}: mode is live or shadow")
    try:
        wanted["after"] = memory.check_after(wanted.get("after"))
        wanted["at_most"] = memory.check_at_most(wanted.get("at_most"))
    except memory.InvalidMemory as error:
        raise PolicyFileError(f"{where}: {error}") from None
    wanted = {name: value for name, value in wanted.items() if value is not None or name not in ("after", "at_most")}
    if wanted["scope"] not in STANDING_SCOPES:
        raise PolicyFileError(f"{where}: scope is one of {', '.join(STANDING_SCOPES)} (a conversation's rules stay with it)")
    try:
        wanted["tool"] = rulemaking.check_tool(wanted["tool"])
        wanted["arguments"] = rulemaking.check_conditions(wanted["arguments"])
    except rulemaking.InvalidRule as error:
        raise PolicyFileError(f"{where}: {error}") from None
    if (wanted["scope"] == Rule.Scope.GLOBAL) != (wanted["agent"] is None):
        raise PolicyFileError(f"{where}: agent: a global rule names no agent, an agent's rule names one")
    if wanted["agent"] is not None:
        _agent(wanted["agent"], where)
    _user(wanted["user"], where)
    if wanted["max_uses"] is not None and not (isinstance(wanted["max_uses"], int) and wanted["max_uses"] >= 1):
        raise PolicyFileError(f"{where}: max_uses is a whole number from 1, or null")
    if not isinstance(wanted["note"], str) or len(wanted["note"]) > rulemaking.MAX_NOTE_CHARS:
        raise PolicyFileError(f"{where}: note is text of at most {rulemaking.MAX_NOTE_CHARS} characters")
    if wanted["expires_at"] is not None:
        instant = _parse_instant(wanted["expires_at"])
        if instant is None:
            raise PolicyFileError(f"{where}: expires_at is an ISO 8601 date and time, or null")
        wanted["expires_at"] = instant.astimezone(dt_timezone.utc).isoformat()
    return wanted


def _parse_instant(value) -> datetime | None:
    if value is None:
        return None
    instant = value if isinstance(value, datetime) else parse_datetime(value) if isinstance(value, str) else None
    if instant is not None and timezone.is_naive(instant):
        instant = timezone.make_aware(instant, dt_timezone.utc)
    return instant


def _describe_rule(entry: dict) -> str:
    scope = {"global": "every agent"}.get(entry["scope"], f"{entry['scope']} {entry['agent']}")
    conditions = f" {_show(entry['arguments'])}" if entry["arguments"] else ""
    return f"{entry['effect']} {entry['tool']}{conditions} ({scope}, by {entry['user']})"


def _create_rule(wanted: dict):
    def run():
        Rule.objects.create(
            effect=wanted["effect"], tool=wanted["tool"], arguments=wanted["arguments"], scope=wanted["scope"],
            agent=_agent(wanted["agent"], "") if wanted["agent"] else None, created_by=_user(wanted["user"], ""),
            expires_at=_parse_instant(wanted["expires_at"]), max_uses=wanted["max_uses"], note=wanted["note"],
            mode=wanted.get("mode", Rule.Mode.LIVE), after=wanted.get("after"), at_most=wanted.get("at_most"),
        )
    return run


def _route_changes(entries: list) -> list[Change]:
    live = list(Route.objects.filter(deleted_at__isnull=True).select_related("agent").prefetch_related("approvers", "escalate_to").order_by("id"))
    unmatched: dict[str, list[Route]] = {}
    for route in live:
        unmatched.setdefault(json.dumps(policy_versions.route_entry(route), sort_keys=True), []).append(route)
    changes = []
    for index, entry in enumerate(entries):
        where = _where(entry, "routes", index)
        _keys(entry, ROUTE_KEYS, ("agent", "approvers"), where)
        wanted = {"tool": "*", "min_risk": Risk.LOW, "quorum": 1, "remind_after_seconds": None, "escalate_after_seconds": None, "escalate_to": []} | dict(entry)
        wanted["approvers"], wanted["escalate_to"] = sorted(_names(wanted["approvers"], where, "approvers")), sorted(_names(wanted["escalate_to"], where, "escalate_to"))
        try:
            checked = check_route(**{key: wanted[key] for key in ROUTE_KEYS})
        except (InvalidRoute, TypeError) as error:
            raise PolicyFileError(f"{where}: {error}") from None
        key = json.dumps(_route_entry_of(wanted), sort_keys=True)
        if unmatched.get(key):
            unmatched[key].pop(0)
            continue
        changes.append(Change(f"+ route: {_describe_route(wanted)}", _create_route(wanted, checked)))
    for routes in unmatched.values():
        for route in routes:
            changes.append(Change(f"- route #{route.pk}: {_describe_route(policy_versions.route_entry(route))} (removed)", _set(route, "deleted_at", timezone.now())))
    return changes


def _route_entry_of(wanted: dict) -> dict:
    return {name: wanted[name] for name in ("agent", "tool", "min_risk", "approvers", "quorum", "remind_after_seconds", "escalate_after_seconds", "escalate_to")}


def _describe_route(entry: dict) -> str:
    return f"{entry['agent']} {entry['tool']} from {entry['min_risk']} risk: {', '.join(entry['approvers'])}, quorum {entry['quorum']}"


def _create_route(wanted: dict, checked: tuple):
    agent, approvers, escalation = checked

    def run():
        route = Route.objects.create(
            agent=agent, tool=wanted["tool"], min_risk=wanted["min_risk"], quorum=wanted["quorum"],
            remind_after_seconds=wanted["remind_after_seconds"], escalate_after_seconds=wanted["escalate_after_seconds"],
        )
        route.approvers.set(approvers)
        route.escalate_to.set(escalation)
    return run


def _server_changes(entries: list) -> tuple[list[Change], list[str]]:
    ToolServer = apps.get_model("toolservers", "ToolServer")
    servers = {server.name: server for server in ToolServer.objects.prefetch_related("pins")}
    changes, notes = [], []
    for index, entry in enumerate(entries):
        where = _where(entry, "tool_servers", index)
        _keys(entry, SERVER_KEYS, ("name",), where)
        server = servers.get(entry["name"]) if isinstance(entry["name"], str) else None
        if server is None:
            raise PolicyFileError(f"{where}: name: unknown tool server {entry['name']!r} (servers are added in the admin)")
        for name in ("enabled", "trusted"):
            if name in entry and not isinstance(entry[name], bool):
                raise PolicyFileError(f"{where}: {name} is true or false")
            if name in entry and entry[name] != getattr(server, name):
                changes.append(Change(f"~ tool server {server.name}: {name}: {_show(getattr(server, name))} → {_show(entry[name])}", _set(server, name, entry[name])))
        if "pins" in entry:
            pinned = {pin.name: pin.definition_hash for pin in server.pins.all()}
            wanted = {pin.get("tool"): pin.get("definition_hash") for pin in entry["pins"] if isinstance(pin, dict)}
            for tool in sorted(set(pinned) | set(wanted), key=str):
                if pinned.get(tool) != wanted.get(tool):
                    notes.append(f"pin {server.name}/{tool} differs (not applied: accept a definition on the tool server's admin page)")
    return changes, notes


def _link_changes(entries: list) -> list[Change]:
    AgentToolServer = apps.get_model("toolservers", "AgentToolServer")
    ToolServer = apps.get_model("toolservers", "ToolServer")
    links = {(link.agent.slug, link.server.name): link for link in AgentToolServer.objects.select_related("agent", "server")}
    changes = []
    for index, entry in enumerate(entries):
        where = _where(entry, "agent_tool_servers", index)
        _keys(entry, LINK_KEYS, ("agent", "server"), where)
        agent = _agent(entry["agent"], where)
        server = ToolServer.objects.filter(name=entry["server"]).first() if isinstance(entry["server"], str) else None
        if server is None:
            raise PolicyFileError(f"{where}: server: unknown tool server {entry['server']!r}")
        link = links.pop((agent.slug, server.name), None)
        candidate = AgentToolServer(
            pk=link.pk if link else None, agent=agent, server=server, tools=entry.get("tools", []),
            require_approval=entry.get("require_approval"), risks=entry.get("risks", {}),
        )
        try:
            candidate.clean()
        except ValidationError as error:
            name, messages = next(iter(error.message_dict.items()))
            raise PolicyFileError(f"{where}: {name}: {' '.join(messages)}") from None
        if link is None:
            changes.append(Change(f"+ agent {agent.slug} uses {server.name}", candidate.save))
            continue
        for name in ("tools", "require_approval", "risks"):
            if getattr(candidate, name) != getattr(link, name):
                changes.append(Change(f"~ agent {agent.slug} uses {server.name}: {name}: {_show(getattr(link, name))} → {_show(getattr(candidate, name))}", _set(link, name, getattr(candidate, name))))
    for (slug, name), link in sorted(links.items()):
        changes.append(Change(f"- agent {slug} uses {name} (deleted)", link.delete))
    return changes
