"""A tool server's tools as the loop's tools (chat.tools.ToolSpec): named `<server>__<tool>`, their
arguments checked against the server's JSON schema, gated by the agent's link to the server (its
`require_approval` list, else the server's annotations), and run through the MCP client. The loop
finds them through the registry's sources (chat.tools.Registry.add_source) and treats them exactly
as the built-in tools: the same validation, gate, rules, previews, approval, claim and audit."""
import hashlib
import json
import re
from dataclasses import dataclass, field

import jsonschema

from approvals.hints import server_hints
from chat.tools import InputRequired, Preview, ToolArgumentsError, ToolError, ToolSpec

from . import client, inputs
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

    @property
    def parameters(self) -> dict:
        return self.input_schema or {"type": "object", "properties": {}}

    def validate(self, arguments) -> dict:
        """Check the model's arguments against the server's schema; the error is written for the model."""
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
        companion = PREVIEWED_BY.get(self.remote_name)
        if companion is None or not _read_only(self.server.tool(companion[0])):
            return Preview("text", "\n".join(lines))
        tool, passed_on = companion
        outcome = client.call_tool(self.server, tool, {name: arguments[name] for name in passed_on if name in arguments})
        shown = outcome.text.strip() or "(nothing)"
        lines += ["", f"What it acts on, as {tool} shows it now:", shown]
        return Preview("diff", "\n".join(lines), state=hashlib.sha256(outcome.text.encode()).hexdigest()[:32])

    def run(self, arguments: dict, context):
        try:
            outcome = client.call_tool(self.server, self.remote_name, arguments)
        except client.ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        return self._result(outcome)

    def resume(self, arguments: dict, context, state: dict, answer: dict):
        """The human settled the tool's question: ask the next one, or call again with the answers
        and the request state the server gave (a server that no longer takes it says so)."""
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


def spec_for(link: AgentToolServer, tool: dict) -> McpToolSpec:
    """The tool as this agent's link exposes it: gated by the link's list, or by the annotations."""
    annotations = tool.get("annotations")
    name = model_name(link.server.name, tool["name"])
    if link.require_approval is not None:
        needs = tool["name"] in link.require_approval
        reason = f"{link.agent.name} needs approval for {tool['name']} on {link.server.name}."
    else:
        needs = not (annotations or {}).get("readOnlyHint", False)
        reason = f"{link.server.name} does not mark {tool['name']} read-only (its own hint), so a human decides."
    risk = link.risks.get(tool["name"]) or ("low" if not needs else "medium")
    return McpToolSpec(
        name=name,
        description=(tool.get("description") or "")[:1000],
        function=_never,
        arguments_model=None,
        needs_approval=(lambda _arguments, _context: (True, reason)) if needs else False,
        risk=risk,
        server=link.server,
        remote_name=tool["name"],
        input_schema=tool.get("input_schema") or {},
        annotations=annotations,
    )


def tools_for_agent(agent) -> list[McpToolSpec]:
    """Every tool the agent's enabled tool servers expose to it, as last listed."""
    links = AgentToolServer.objects.filter(agent=agent, server__enabled=True).select_related("server", "agent")
    return [spec_for(link, tool) for link in links for tool in link.server.tools if link.exposes(tool["name"])]
