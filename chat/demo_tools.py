"""The demo tools: a per-conversation sandbox of files, an email outbox, a calculator, web fetch."""
import ast
import operator
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from django.conf import settings
from pydantic import Field, StringConstraints

from approvals.models import Approval
from approvals.policy import versions

from . import fetching, previews, reversals
from .models import Agent, OutboxEmail
from .tools import Preview, ToolContext, ToolError, registry, tool

MAX_FILE_BYTES = 100_000
MAX_FETCH_BYTES = 100_000

RelativePath = Annotated[str, StringConstraints(min_length=1, max_length=200), Field(description="A path inside the sandbox.")]


def _size(text: str) -> str:
    size = len(text.encode())
    return "1 byte" if size == 1 else f"{size:,} bytes"


# Each tool's call in words, the title of its card (chat.tools, `describe`): what will happen.
def _describe_list(arguments: dict) -> str:
    path = arguments.get("path") or "."
    return "List the sandbox's files" if path in (".", "./", "") else f"List the files in {path}"


def _describe_write(arguments: dict) -> str:
    content = arguments.get("content")
    return f"Write {arguments['path']}" + (f" ({_size(content)})" if isinstance(content, str) else "")


def _describe_email(arguments: dict) -> str:
    subject = arguments.get("subject")
    return f"Send an email to {arguments['to']}" + (f" about {subject}" if isinstance(subject, str) and subject.strip() else "")


def sandbox_path(context: ToolContext, path: str) -> Path:
    """Resolve `path` inside the conversation's sandbox; anything that leads outside is refused."""
    root = context.sandbox.resolve()
    root.mkdir(parents=True, exist_ok=True)
    candidate = (root / path).resolve()
    if candidate != root and root not in candidate.parents:
        raise ToolError(f"Refused: {path!r} is outside the sandbox.")
    return candidate


@tool(risk="low", describe=_describe_list)
def list_directory(context: ToolContext, path: str = ".") -> str:
    """List the files in the sandbox (or a folder in it)."""
    folder = sandbox_path(context, path)
    if not folder.is_dir():
        raise ToolError(f"No folder named {path!r}.")
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    return "\n".join(names) if names else "(empty)"


@tool(risk="low", describe=lambda arguments: f"Read {arguments['path']}")
def read_file(context: ToolContext, path: RelativePath) -> str:
    """Read a text file from the sandbox."""
    target = sandbox_path(context, path)
    if not target.is_file():
        raise ToolError(f"No file named {path!r}.")
    return target.read_text(errors="replace")[:MAX_FILE_BYTES]


@tool(
    risk="medium", preview=previews.write_file_preview, describe=_describe_write, confirmation=lambda arguments: arguments["path"],
    reversible=reversals.WRITE_FILE,
)
def write_file(
    context: ToolContext, path: RelativePath, content: Annotated[str, StringConstraints(max_length=MAX_FILE_BYTES)]
) -> str:
    """Write a text file in the sandbox, replacing it if it exists."""
    target = sandbox_path(context, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return f"Wrote {len(content.encode())} bytes to {path}."


@tool(
    needs_approval=True, risk="high", preview=previews.delete_file_preview,
    describe=lambda arguments: f"Delete {arguments['path']}", confirmation=lambda arguments: arguments["path"],
    reversible=reversals.DELETE_FILE)
def delete_file(context: ToolContext, path: RelativePath) -> str:
    """Delete a file from the sandbox."""
    target = sandbox_path(context, path)
    if not target.is_file():
        raise ToolError(f"No file named {path!r}.")
    target.unlink()
    return f"Deleted {path}."


@tool(
    needs_approval=True, risk="critical", preview=previews.delete_all_files_preview,
    describe=lambda arguments: "Delete every file in the sandbox", confirmation=lambda arguments: "DELETE")
def delete_all_files(context: ToolContext) -> str:
    """Delete every file in the sandbox. Always critical: approving it takes a typed confirmation."""
    root = sandbox_path(context, ".")
    deleted = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())
    for name in deleted:
        (root / name).unlink()
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()
    return f"Deleted {len(deleted)} file(s)" + (f": {', '.join(deleted)}." if deleted else ".")


@tool(needs_approval=True, risk="high", preview=previews.send_email_preview, describe=_describe_email)
def send_email(
    context: ToolContext,
    to: Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)],
    subject: Annotated[str, StringConstraints(min_length=1, max_length=300)],
    body: Annotated[str, StringConstraints(max_length=20_000)] = "",
) -> str:
    """Send an email (stored in the outbox of this demo, never delivered)."""
    # The approval id is the idempotency key: a resumed run that reaches here again finds the row.
    key = context.idempotency_key or f"{context.conversation_id}:{to}:{subject}"
    email, created = OutboxEmail.objects.get_or_create(
        idempotency_key=key,
        defaults={"conversation_id": context.conversation_id, "to": to, "subject": subject, "body": body},
    )
    return f"Email to {to} about {subject!r} is in the outbox (#{email.pk})." + ("" if created else " (already sent)")


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 100 or abs(left) > 1e6):
            raise ToolError("Refused: that power is too large.")
        return _OPERATORS[type(node.op)](left, right)
    raise ToolError("Only numbers, + - * / // % ** and parentheses are allowed.")


@tool(risk="low", describe=lambda arguments: f"Calculate {arguments['expression']}")
def calculator(expression: Annotated[str, StringConstraints(min_length=1, max_length=200)]) -> str:
    """Evaluate an arithmetic expression, such as (2 + 3) * 4."""
    try:
        value = _evaluate(ast.parse(expression.replace("^", "**"), mode="eval"))
    except SyntaxError:
        raise ToolError(f"{expression!r} is not an arithmetic expression.") from None
    except ZeroDivisionError:
        raise ToolError("Division by zero.") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{expression} = {value}"


def _fetch_gate(arguments: dict, context: ToolContext) -> tuple[bool, str]:
    host = (urlsplit(arguments["url"]).hostname or "").lower()
    if previews.is_allowlisted(host, context.agent.fetch_allowlist):
        return False, ""
    return True, f"{host or 'this host'} is not on the agent's allowlist."


@tool(needs_approval=_fetch_gate, risk="medium", preview=previews.web_fetch_preview, describe=lambda arguments: f"Fetch {arguments['url']}")
def web_fetch(
    context: ToolContext, url: Annotated[str, StringConstraints(pattern=r"^https?://", max_length=2000)]
) -> str:
    """Fetch a web page over HTTP(S) and return the start of its text."""
    seconds = getattr(settings, "HITL_FETCH_SECONDS", 10)
    page = fetching.fetch(url, allow_private=context.agent.allow_private_fetch, max_bytes=MAX_FETCH_BYTES, seconds=seconds)
    return f"HTTP {page.status_code}\n{page.text}" + (f"\n… cut at {MAX_FETCH_BYTES} bytes" if page.is_cut else "")


# A domain as the fetch allowlist holds it: lower case, dot-separated labels, no scheme, port or path.
Domain = Annotated[
    str,
    StringConstraints(max_length=253, pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$"),
    Field(description='A domain, lower case, e.g. "docs.vendor.test": its pages and its subdomains\' are fetched without asking.'),
]


def _describe_add_domain(arguments: dict) -> str:
    return f"Let the agent fetch any page of {arguments['domain']} without asking"


def _add_domain_preview(context: ToolContext, domain: str) -> Preview:
    listed = ", ".join(context.agent.fetch_allowlist) or "nothing"
    if previews.is_allowlisted(domain, context.agent.fetch_allowlist):
        return Preview("text", f"No change: {domain} is already fetched without asking ({listed}).")
    return Preview(
        "text",
        f"{context.agent.name} will fetch any page of {domain} (and of its subdomains) without asking anyone, "
        f"for every user of the agent, from now on.\nIt fetches without asking today: {listed}.\n"
        "Approving stores a new policy version that names this approval; rejecting changes nothing.",
    )


def _approved(context: ToolContext) -> Approval:
    """The approval this call runs under: a policy change runs only once a person approved it."""
    approval = Approval.objects.select_related("decided_by").filter(pk=int(context.idempotency_key or 0)).first()
    if approval is None or approval.status != Approval.Status.APPROVED:
        raise ToolError("Not changed: a policy change runs only once a person approved it.")
    return approval


# The TypeScript design's `web-fetch.add-domain`: a change of policy the agent asks for, as a call a
# human decides. Always gated and high risk, so no allow rule ever approves it (rules approve up to
# the agent's max_auto_approve_risk, medium at most for the demo agents).
@tool(needs_approval=True, risk="high", preview=_add_domain_preview, describe=_describe_add_domain)
def add_domain(context: ToolContext, domain: Domain) -> str:
    """Ask to fetch a domain's pages from now on without asking each time (a change of the agent's policy)."""
    approval = _approved(context)
    with versions.recording(user=approval.decided_by, note=f"add_domain {domain}: approved in approval #{approval.pk}"):
        agent = Agent.objects.select_for_update().get(pk=context.agent.pk)
        if previews.is_allowlisted(domain, agent.fetch_allowlist):
            return f"No change: {agent.name} already fetches {domain} without asking."
        agent.fetch_allowlist = [*agent.fetch_allowlist, domain]
        agent.save()
    number = versions.current_number()
    return f"{agent.name} now fetches any page of {domain} without asking (policy version {number}, from approval #{approval.pk})."


def _describe_allow_tool(arguments: dict) -> str:
    return f"Let the agent call {arguments['tool']} without asking, from now on"


def _allowing(agent, tool: str) -> str:
    """Why `tool` cannot be let run without asking, or "" when it can: it must be one the agent's own
    list makes ask (a tool that always asks, deletes and email, keeps asking whatever the list says)."""
    spec = registry.get(tool)
    if spec is None or tool not in (agent.tools or []):
        return f"{agent.name} has no tool {tool}."
    if spec.needs_approval is True or spec.pause:
        return f"{tool} always asks a person, whatever the agent's settings."
    if tool not in agent.require_approval:
        return f"{agent.name}'s settings do not make {tool} ask: nothing to change."
    return ""


def _allow_tool_preview(context: ToolContext, tool: str) -> Preview:
    if why := _allowing(context.agent, tool):
        return Preview("text", f"No change: {why}")
    return Preview(
        "text",
        f"{context.agent.name} will call {tool} without asking anyone, for every user of the agent, from now on "
        "(rules and the tool's own checks still apply).\n"
        "Approving stores a new policy version that names this approval; rejecting changes nothing.",
    )


# "Allow this tool from now on": the same pattern as add_domain, for the agent's require_approval.
@tool(needs_approval=True, risk="high", preview=_allow_tool_preview, describe=_describe_allow_tool)
def allow_tool(context: ToolContext, tool: Annotated[str, StringConstraints(min_length=1, max_length=200)]) -> str:
    """Ask to call one of your tools from now on without asking each time (a change of the agent's policy)."""
    approval = _approved(context)
    with versions.recording(user=approval.decided_by, note=f"allow_tool {tool}: approved in approval #{approval.pk}"):
        agent = Agent.objects.select_for_update().get(pk=context.agent.pk)
        if why := _allowing(agent, tool):
            return f"No change: {why}"
        agent.require_approval = [name for name in agent.require_approval if name != tool]
        agent.save()
    return f"{agent.name} now calls {tool} without asking (policy version {versions.current_number()}, from approval #{approval.pk})."
