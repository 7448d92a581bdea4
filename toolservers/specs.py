"""A tool server's tools as the loop's tools (chat.tools.ToolSpec): named `<server>__<tool>`, their
arguments checked against the server's JSON schema, gated by the agent's link to the server (its
`require_approval` list, else a trusted server's annotations; an untrusted server's tools all ask),
and run through the MCP client. The loop finds them through the registry's sources
(chat.tools.Registry.add_source) and treats them exactly as the built-in tools: the same validation,
gate, rules, previews, approval, claim and audit. A tool whose definition is not the one an admin
approved (pins) is found but never offered, and refuses every call."""
import hashlib
import json
import re
from dataclasses import dataclass, field

import jsonschema

from approvals.cards.hints import server_hints
from chat.tools import InputRequired, Preview, ToolArgumentsError, ToolError, ToolSpec

from . import client, inputs, pins
from .models import AgentToolServer, ToolServer

SEPARATOR = "__"
# A read-only tool of the same server that shows what a tool would act on: (that tool, the
# arguments passed on to it). A commit shows the staged diff it would commit.
PREVIEWED_BY = {"git_commit": ("git_diff_staged", ("repo_path",))}
MAX_NAME = 64  # what OpenAI-style providers accept for a function's name


def model_name(server_name: str, tool_name: str) -> str:
    """The name the model calls: `<server>__<tool>`, in the characters every provider accepts."""
    return f"{server_name}{SEPARATOR}{re.sub(r'[^A-Za-z0-9_-]', '_', tool_name)}"[:MAX_NAME]


def _read_only(tool: dict | None) -> bool:
    return bool(tool and (tool.get("annotations") or {}).get("readOnlyHint"))


def _never(*_args, **_kwargs):  # a ToolSpec's function: an MCP tool runs through run(), below
    raise NotImplementedError


@dataclass(frozen=True)
class McpToolSpec(ToolSpec):
    """One tool of one server, as one agent's link exposes it."""

    server: ToolServer | None = None
    remote_name: str = ""
    input_schema: dict = field(default_factory=dict)
    previewed_by: tuple[str, tuple[str, ...]] | None = None  # PREVIEWED_BY's entry, when that tool may run freely
    disabled: str = ""  # why every call is refused: the definition is not the one an admin approved

    def refuse_if_disabled(self, error: type[Exception]) -> None:
        if self.disabled:
            raise error(self.disabled)

    @property
    def parameters(self) -> dict:
        return self.input_schema or {"type": "object", "properties": {}}

    def validate(self, arguments) -> dict:
        """Check the model's arguments against the server's schema; the error is written for the model."""
        self.refuse_if_disabled(ToolArgumentsError)  # before the gate: nobody is asked about a call that cannot run
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(f"Arguments for {self.name} must be a JSON object.")
        try:
            validator = jsonschema.Draft202012Validator(self.parameters)
            problems = sorted(validator.iter_errors(arguments), key=lambda error: list(error.absolute_path))
        except jsonschema.SchemaError as exc:
            raise ToolArgumentsError(f"The server's schema for {self.name} is broken ({exc.message}).") from None
        if problems:
            listed = "; ".join(f"{'.'.join(str(p) for p in problem.absolute_path) or 'arguments'}: {problem.message}" for problem in problems[:5])
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: {listed}")
        return arguments

    def preview_of(self, arguments: dict, context) -> Preview | None:
        """The arguments, readably, and what the server says of the tool (hints, not guarantees);
        for a tool with a read-only companion (PREVIEWED_BY), what that companion shows now, whose
        fingerprint is checked again before the run."""
        lines = [f"{self.server.name} → {self.remote_name}", f"The server says: {', '.join(server_hints(self.annotations))}.", ""]
        for name, value in arguments.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
            lines.append(f"{name}: {shown}")
        if self.previewed_by is None or self.disabled:
            return Preview("text", "\n".join(lines))
        tool, passed_on = self.previewed_by
        outcome = client.call_tool(self.server, tool, {name: arguments[name] for name in passed_on if name in arguments})
        shown = outcome.text.strip() or "(nothing)"
        lines += ["", f"What it acts on, as {tool} shows it now:", shown]
        return Preview("diff", "\n".join(lines), state=hashlib.sha256(outcome.text.encode()).hexdigest()[:32])

    def run(self, arguments: dict, context):
        self.refuse_if_disabled(ToolError)  # approved before the server changed the tool: not run
        try:
            outcome = client.call_tool(self.server, self.remote_name, arguments)
        except client.ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        return self._result(outcome)

    def resume(self, arguments: dict, context, state: dict, answer: dict):
        """The human settled the tool's question: ask the next one, or call again with the answers
        and the request state the server gave (a server that no longer takes it says so)."""
        self.refuse_if_disabled(ToolError)
        state = inputs.record(state, answer)
        if inputs.pending(state):
            raise InputRequired(inputs.question(state), state)
        try:
            outcome = client.call_tool(
                self.server, self.remote_name, arguments, input_responses=inputs.responses(state), request_state=state["request_state"]
            )
        except client.Refused as exc:
            raise ToolError(
                f"The answer came too late: {self.server.name} no longer takes its request for input ({exc}). "
                "Nothing was done; ask again if it should still be done."
            ) from None
        except client.ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        return self._result(outcome)

    def _result(self, outcome: client.CallOutcome):
        if outcome.input_required is not None:
            try:
                state = inputs.start(outcome.input_required, self.server.name)
            except inputs.Unsupported as exc:
                raise ToolError(str(exc)) from None
            raise InputRequired(inputs.question(state), state)
        if outcome.is_error:
            raise ToolError(outcome.text or f"{self.name} failed without saying why.")
        return outcome.text


def gate_of(link: AgentToolServer, tool: dict) -> tuple[bool, str]:
    """Whether a call needs a human, and why: the link's list if it has one; else, for a server an
    admin marked trusted, its annotations (read-only runs freely); else always. An untrusted
    server's hints relax nothing: they are its own words about itself."""
    if link.require_approval is not None:
        return tool["name"] in link.require_approval, f"{link.agent.name} needs approval for {tool['name']} on {link.server.name}."
    if not link.server.trusted:
        return True, f"{link.server.name} is not trusted by an admin, so its hints relax nothing: a human decides {tool['name']}."
    return not _read_only(tool), f"{link.server.name} does not mark {tool['name']} read-only (its own hint), so a human decides."


def disabled_reason(link: AgentToolServer, tool: dict, approved: dict[tuple[int, str], str]) -> str:
    """Why the tool refuses calls ("" if it does not): its definition is not the one an admin approved."""
    pinned = approved.get((link.server_id, tool["name"]))
    if pinned == pins.definition_hash(tool):
        return ""
    how = "its description, input schema or annotations differ" if pinned else "it was added after the first listing"
    return (
        f"{model_name(link.server.name, tool['name'])} is disabled: {link.server.name}'s listing of it changed since approved "
        f"by an admin ({how}). An admin can review the change and accept it: admin → Tool servers (MCP) → Tool definitions."
    )


def spec_for(link: AgentToolServer, tool: dict, approved: dict[tuple[int, str], str]) -> McpToolSpec:
    """The tool as this agent's link exposes it: gated by gate_of, disabled unless pinned as listed."""
    needs, reason = gate_of(link, tool)
    disabled = disabled_reason(link, tool, approved)
    risk = link.risks.get(tool["name"]) or ("low" if not needs else "medium")
    return McpToolSpec(
        name=model_name(link.server.name, tool["name"]),
        description=(tool.get("description") or "")[:1000],
        function=_never,
        arguments_model=None,
        needs_approval=(lambda _arguments, _context: (True, reason)) if needs or disabled else False,
        risk=risk,
        server=link.server,
        remote_name=tool["name"],
        input_schema=tool.get("input_schema") or {},
        annotations=tool.get("annotations"),
        previewed_by=_companion(link, tool["name"], approved),
        disabled=disabled,
        offered=not disabled,
    )


def _companion(link: AgentToolServer, tool_name: str, approved: dict[tuple[int, str], str]):
    """The read-only tool that previews this one, if the agent could call it without a human (so a
    preview never runs what a call could not) and its definition is the approved one."""
    companion = PREVIEWED_BY.get(tool_name)
    listed = link.server.tool(companion[0]) if companion else None
    if listed is None or not _read_only(listed) or not link.exposes(listed["name"]):
        return None
    if gate_of(link, listed)[0] or disabled_reason(link, listed, approved):
        return None
    return companion


def tools_for_agent(agent) -> list[McpToolSpec]:
    """Every tool the agent's enabled tool servers expose to it, as last listed; the ones whose
    definition an admin has not approved are not offered (`offered`) but still found, to refuse."""
    links = list(AgentToolServer.objects.filter(agent=agent, server__enabled=True).select_related("server", "agent"))
    if not links:
        return []
    approved = pins.approved_hashes([link.server_id for link in links])
    return [spec_for(link, tool, approved) for link in links for tool in link.server.tools if link.exposes(tool["name"])]
