"""Typed Python functions as tools: the @tool decorator, the registry, schemas, validation, hashing."""
import hashlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, get_type_hints

import pydantic

from approvals.cards import titles

# A function of (arguments, context) returning (required, reason) or (required, reason, risk):
# the dynamic gate.
GateFunction = Callable[[dict, "ToolContext"], tuple]


@dataclass(frozen=True)
class Preview:
    """What a call will do, shown to whoever decides it. `kind` is one of diff, email, file, fetch,
    text. `state` fingerprints the part of the world the preview describes (a file's content, say):
    the run recomputes it, and a call whose world changed since the approval does not run."""

    kind: str
    text: str
    state: str = ""


# A function of (context, **arguments) returning a Preview; it must not change anything.
PreviewFunction = Callable[..., Preview]

# A function of the call's arguments returning what the call will do, in a few words ("Delete
# notes.txt"): the title of its card. It only reads its arguments, which may be anything the model sent.
DescribeFunction = Callable[[dict], str]


class ToolError(Exception):
    """A tool refused or failed in a way the model should read as the result."""


class InputRequired(Exception):
    """A tool asks a human for input before it can finish (an MCP server's input request): `question`
    is what to ask (a question as approvals.pauses.questions stores it), `state` what the tool needs to go
    on, kept with the call until the human answers and the loop calls `resume`.

    Or, with `actions`, it asks for calls to be decided (a remote agent's calls that wait for a
    human there): each {"name", "arguments", "risk", "reason", "preview": {"kind", "text"} or None},
    or a question {"question": ...}, gated here as any call is (chat.asked); the tool resumes once
    every one is settled, its answer {"action": "decide", "decisions": [...]} in their order."""

    def __init__(self, question: dict | None, state: dict, actions: list[dict] | None = None):
        super().__init__((question or {}).get("text", "") or f"{len(actions or [])} call(s) to decide")
        self.question, self.state, self.actions = question, state, actions or []


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool: told to the model as the tool's result."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know besides its arguments. `idempotency_key` is the approval id when gated.
    `started(state)`: a running tool records what it started elsewhere (a remote task), for a Stop
    to end (ToolSpec.cancel); False means the call was stopped meanwhile, and the tool ends it itself."""

    conversation_id: str
    agent: Any
    sandbox: Path
    idempotency_key: str = ""
    started: Callable[[dict], bool] | None = None


@dataclass(frozen=True)
class Reversible:
    """How a tool's call is undone (chat.undo): `before(arguments, context)` keeps what the call will
    change (JSON, or None when it cannot be kept: too large), `after(arguments, context)` fingerprints
    what it left, `restore(kept, arguments, context)` puts back what was kept and says so,
    `preview(kept, arguments, context)` shows the undo to whoever decides it, and `keys` are the
    arguments that name what it acts on (the undo call carries them, for rules to match)."""

    before: Callable[[dict, "ToolContext"], dict | None]
    after: Callable[[dict, "ToolContext"], str]
    restore: Callable[[dict, dict, "ToolContext"], str]
    preview: Callable[[dict, dict, "ToolContext"], "Preview"]
    keys: tuple = ()


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[pydantic.BaseModel]
    needs_approval: bool | GateFunction = False
    risk: str = "low"
    approval_timeout: int | None = None  # seconds; overrides the agent's approval timeout
    takes_context: bool = False
    preview: PreviewFunction | None = None  # what the call will do, shown when it is gated
    describe: DescribeFunction | None = None  # the call in words, the title of its card (title_of)
    confirmation: Callable[[dict], str] | None = None  # what to type to approve it when critical
    pause: str = ""  # "question" or "plan": the call is the agent asking a human, never run (approvals.pauses)
    annotations: dict | None = None  # what the tool's source says of it (an MCP server's hints), shown as hints
    offered: bool = True  # False: found by name (so a call is refused in the tool's own words) but never offered
    stoppable: bool = False  # a Stop cancels it while it runs too (its cancel ends what it started elsewhere)
    reversible: Reversible | None = None  # its calls can be undone (chat.undo)

    def openai_schema(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    @cached_property
    def parameters(self) -> dict:
        """The arguments' JSON schema, built once: pydantic takes milliseconds, and every model call sends it."""
        schema = self.arguments_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    def validate(self, arguments: Any) -> dict:
        """Check the model's arguments against the signature; the error text is written for the model."""
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(f"Arguments for {self.name} must be a JSON object.")
        try:
            validated = self.arguments_model.model_validate(arguments).model_dump()
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: {problems}") from None
        if self.pause:
            self.pause_request(validated)  # a question or plan that does not hold together goes back to the model
        return validated

    def pause_request(self, arguments: dict) -> dict:
        """The question or plan these (validated) arguments ask a human, as approvals stores it."""
        from approvals.pauses import InvalidRequest, request  # approvals' models are loaded by the time a call comes

        try:
            return request(self.pause, arguments)
        except InvalidRequest as exc:
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: {exc}") from None

    def title_of(self, arguments: Any) -> str:
        """The call in words, from `describe`; the tool's name when it has none, or when the model's
        arguments are not what it expects (they may be anything: a title never breaks a card)."""
        try:
            text = self.describe(arguments) if self.describe and isinstance(arguments, dict) else ""
        except Exception:  # noqa: BLE001  (odd arguments: say the name instead)
            text = ""
        return text if isinstance(text, str) and text.strip() else self.name

    def preview_of(self, arguments: dict, context: ToolContext) -> Preview | None:
        return self.preview(context, **arguments) if self.preview else None

    def resume(self, arguments: dict, context: ToolContext, state: dict, answer: dict) -> Any:
        """Go on after a human answered the tool's InputRequired: `answer` is {"action": "accept",
        "value": ...}, or {"action": "decline"} or {"action": "cancel"}. May ask again."""
        raise ToolError(f"{self.name} cannot take input.")

    def cancel(self, arguments: dict, context: ToolContext, state: dict) -> None:
        """The call was stopped while it waited for input (or ran, if `stoppable`): end what it started
        elsewhere (a remote task), as `state` records it. Called once the Stop is committed; must not
        wait long (hand slow work to a task)."""

    def run(self, arguments: dict, context: ToolContext) -> Any:
        if self.takes_context:
            return self.function(context, **arguments)
        return self.function(**arguments)


@dataclass(frozen=True)
class OutsideTool(ToolSpec):
    """A tool the agent does not have, named in an approval request from outside (chat.outside): its
    arguments' schema is its caller's, so any object is taken; the agent's policy still gates it,
    and it never runs here."""

    @classmethod
    def named(cls, name: str, risk: str = "medium") -> "OutsideTool":
        return cls(name=name, description="", function=_runs_elsewhere, arguments_model=None, risk=risk)

    def validate(self, arguments: Any) -> dict:
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(f"Arguments for {self.name} must be a JSON object.")
        return arguments


def _runs_elsewhere(**_arguments):
    raise ToolError("This tool runs where the agent that asked for it is, never here.")


@dataclass
class Registry:
    """The built-in tools (@tool), and the sources of other tools (an app's function of an agent
    returning its tools, such as a tool server's): the loop asks here and never learns where from."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)
    sources: list[Callable[[Any], list[ToolSpec]]] = field(default_factory=list)

    def get(self, name: str) -> ToolSpec | None:
        """A built-in tool by name, whichever agent."""
        return self.tools.get(name)

    def add_source(self, source: Callable[[Any], list[ToolSpec]]) -> None:
        if source not in self.sources:
            self.sources.append(source)

    def for_agent(self, agent) -> list[ToolSpec]:
        """The tools offered to the agent: its built-in ones, then each source's."""
        return [spec for spec in self._every(agent) if spec.offered]

    def find(self, agent, name: str) -> ToolSpec | None:
        """The tool `name` if the agent may call it now (or it is there but refuses calls, not `offered`)."""
        if name in self.tools:
            return self.tools[name] if name in agent.tools else None
        return next((spec for spec in self._every(agent) if spec.name == name), None)

    def _every(self, agent) -> list[ToolSpec]:
        built_in = [self.tools[name] for name in agent.tools if name in self.tools]
        return built_in + [spec for source in self.sources for spec in source(agent) if spec.name not in self.tools]


registry = Registry()


def describe_call(name: str, arguments: Any, annotations: dict | None = None) -> str:
    """A built-in tool's call in words ("" for a tool not built in, another source says it; and
    for one with no words of its own, so that approvals.summary names its arguments instead)."""
    spec = registry.get(name)
    text = spec.title_of(arguments) if spec else ""
    return "" if text == name else text


titles.add_describer(describe_call)


def tool(
    function: Callable | None = None,
    *,
    name: str | None = None,
    needs_approval: bool | GateFunction = False,
    risk: str = "low",
    approval_timeout: int | None = None,
    preview: PreviewFunction | None = None,
    describe: DescribeFunction | None = None,
    confirmation: Callable[[dict], str] | None = None,
    pause: str = "",
    reversible: Reversible | None = None,
) -> Any:
    """Register a typed function as a tool. A first parameter named `context` receives a ToolContext.

    `preview(context, **arguments)` returns a Preview of what the call will do, shown to whoever
    decides it; `describe(arguments)` says the call in a few words, the title of its card
    ("Delete notes.txt"); `confirmation(arguments)` is what a human types to approve it when it is critical.
    With `pause` ("question" or "plan") the function is never run: a call always waits for a human,
    and what they answer is the call's result.
    """

    def register(fn: Callable) -> Callable:
        hints = get_type_hints(fn, include_extras=True)
        parameters = list(inspect.signature(fn).parameters.values())
        takes_context = bool(parameters) and parameters[0].name == "context"
        fields = {}
        for parameter in parameters[1:] if takes_context else parameters:
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            fields[parameter.name] = (hints.get(parameter.name, Any), default)
        model = pydantic.create_model(
            f"{fn.__name__}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        spec = ToolSpec(
            name=name or fn.__name__,
            description=inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0],
            function=fn,
            arguments_model=model,
            needs_approval=needs_approval,
            risk=risk,
            approval_timeout=approval_timeout,
            takes_context=takes_context,
            preview=preview,
            describe=describe,
            confirmation=confirmation,
            pause=pause,
            reversible=reversible,
        )
        registry.tools[spec.name] = spec
        return fn

    return register(function) if function is not None else register


def arguments_hash(arguments: dict) -> str:
    """SHA-256 of the canonical JSON: what an approval covers, checked again just before the run."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
