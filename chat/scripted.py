"""The offline **scripted model**, behind litellm's `scripted/<anything>` provider (registered in
chat.llm): it turns a few plain phrases into real tool calls and answers tool results in words.
Demo code, deterministic, for `make run` and the tests. See the README.
"""
import json
import re
from collections import deque
from collections.abc import Iterator

from approvals.pauses import questions

from .history import REJECTION_NUDGE
from .llm import ModelToolCall, ModelTurn

SCRIPTED_REQUESTS: deque = deque(maxlen=100)  # what the scripted model was sent, newest last

# The phrases a newcomer can click on a scripted agent's pages.
SUGGESTIONS = [
    "write hello to notes.txt",
    "delete notes.txt and todo.txt",
    "email bob@example.com about lunch",
    "what is (2 + 3) * 4",
    "list files",
    "read notes.txt",
    "ask me to choose between tea, coffee and water",
    "plan a tidy-up of the notes",
    "carry out a plan to tidy the notes",
]

HELP = (
    "I'm the offline scripted model. Try: \"write hello to notes.txt\", \"read notes.txt\", "
    "\"list files\", \"delete a.txt and b.txt\", \"delete all files\", \"email bob@example.com about lunch\", "
    "\"what is 2 + 2\", \"ask me what to call the file\", "
    "\"ask me to choose between tea, coffee and water\", \"ask me for a number between 1 and 10\", "
    "\"ask me for a date\", \"plan a tidy-up\" or \"carry out a plan to tidy the notes\"."
)


def script_turn(messages: list[dict]) -> ModelTurn:
    """The scripted model's whole behaviour: deterministic, from the messages after its last turn."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    calls_by_id = {c["id"]: c for c in (messages[last].get("tool_calls") or [])} if last >= 0 else {}
    tail = messages[last + 1 :]
    sentences = [_result_sentence(calls_by_id.get(m.get("tool_call_id")), m["content"]) for m in tail if m["role"] == "tool"]
    users = [m for m in tail if m["role"] == "user"]
    planned = None
    if users:
        planned = _plan(str(users[-1]["content"]).strip(), _repository(messages))
        if planned is None:
            sentences.append(HELP)
    elif follow_up := _follow_up(messages, calls_by_id, tail):
        planned = [follow_up]
    turn_number = sum(1 for m in messages if m["role"] == "assistant")
    tool_calls = [
        ModelToolCall(call_id=f"call_{turn_number}_{i}", name=name, raw_arguments=raw) for i, (name, raw) in enumerate(planned or [])
    ]
    return ModelTurn(text=" ".join(sentences), tool_calls=tool_calls)


def _repository(messages: list[dict]) -> str:
    """The git repository the system prompt names ("The git repository is at <path>."), as a real
    model would read it; else the working directory."""
    system = next((str(m["content"]) for m in messages if m["role"] == "system"), "")
    found = re.search(r"git repository is at (\S+?)\.?(?:\s|$)", system)
    return found[1] if found else "."


def _carried_out_steps(goal: str) -> list[dict]:
    return [
        {"action": "See what is there", "description": "List the files in the sandbox.", "optional": True, "tool": "list_directory",
         "estimated_duration": 30},
        {"action": "Tell bob@example.com", "description": "Send a short email about it.", "optional": True, "tool": "send_email",
         "estimated_duration": 120},
        {"action": f"Do it: {goal}", "description": "Write plan.txt.", "tool": "write_file", "estimated_duration": 300},
    ]


def _step_call(step: dict, goal: str) -> tuple[str, str]:
    """The call that takes one step of a carried-out plan, as the scripted model words it."""
    arguments = {
        "list_directory": {"path": "."},
        "send_email": {"to": "bob@example.com", "subject": goal, "body": f"About: {goal}"},
        "write_file": {"path": "plan.txt", "content": goal},
    }.get(step["tool"], {})
    return step["tool"], json.dumps(arguments)


def _plan_step(messages: list[dict]) -> tuple[str, str] | None:
    """`carry out a plan to <goal>`: once the plan is approved, the next approved step, in the order
    approved, one a turn; `... and every step of it`: every step proposed, whatever was approved (a
    model that does not keep to the plan, which hitl holds)."""
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), -1)
    wanted = re.fullmatch(r"carry out a plan to (.+?)( and every step of it)?", str(messages[last_user]["content"]).strip().rstrip(".!"), re.I | re.S) if last_user >= 0 else None
    if wanted is None:
        return None
    after = messages[last_user + 1:]
    proposed = next((c for m in after for c in (m.get("tool_calls") or []) if c["function"]["name"] == "propose_plan"), None)
    result = next((m for m in after if m["role"] == "tool" and proposed and m.get("tool_call_id") == proposed["id"]), None)
    if result is None:
        return None
    try:
        outcome = json.loads(str(result["content"]).split("\n", 1)[0])
        steps = json.loads(proposed["function"]["arguments"])["steps"]
    except (ValueError, KeyError, TypeError):
        return None
    if not outcome.get("approved_steps"):
        return None
    if wanted[2]:
        sequence = steps
    else:
        by_index = dict(enumerate(steps, start=1))
        sequence = [by_index[i] for i in outcome["approved_steps"] if i in by_index]
    taken = sum(len(m.get("tool_calls") or []) for m in after[after.index(result):] if m["role"] == "assistant")
    return _step_call(sequence[taken], wanted[1]) if taken < len(sequence) else None


def _follow_up(messages: list[dict], calls_by_id: dict, tail: list[dict]) -> tuple[str, str] | None:
    """The next step of a plan being carried out (_plan_step); the second step of `commit all with
    message <m>`: once git_add succeeded, the commit."""
    if step := _plan_step(messages):
        return step
    last_user = next((str(m["content"]).strip() for m in reversed(messages) if m["role"] == "user"), "")
    wanted = re.fullmatch(r"commit all with message (.+)", last_user.rstrip(".!"), re.I | re.S)
    added = [m for m in tail if m["role"] == "tool" and (calls_by_id.get(m.get("tool_call_id")) or {}).get("function", {}).get("name") == "git__git_add"]
    if not (wanted and added) or str(added[-1]["content"]).startswith(("Error:", "Rejected by", "Denied by rule", "Already rejected by", "Not run:", "Cancelled by", "Interrupted:")):
        return None
    return ("git__git_commit", json.dumps({"repo_path": _repository(messages), "message": wanted[1]}))


def _plan(text: str, repository: str = ".") -> list[tuple[str, str]] | None:
    """Turn one user phrase into tool calls (name, JSON arguments), or None for a plain reply."""
    text = text.rstrip(".!").strip()
    args = lambda **kw: json.dumps(kw)  # noqa: E731
    if git := _git_call(text, repository):  # the demo git tool server (mcp-server-git)
        return [git]
    if m := re.fullmatch(r"call (\w+) with (.*)", text, re.I | re.S):  # raw calls, to show bad model output
        return [(m[1], m[2])]
    if asked := _question(text):
        return [("ask_human", json.dumps(asked))]
    if m := re.fullmatch(r"carry out a plan to (.+?)( and every step of it)?", text, re.I | re.S):
        return [("propose_plan", args(title=m[1], steps=_carried_out_steps(m[1])))]
    if m := re.fullmatch(r"plan (.+)", text, re.I | re.S):
        steps = [
            {"action": f"Gather what {m[1]} needs", "description": "Read the files and notes involved.", "optional": False},
            {"action": "Tell bob@example.com", "description": "Send a short email about it.", "optional": True},
            {"action": f"Do it: {m[1]}", "description": "Make the change.", "optional": False},
        ]
        return [("propose_plan", args(title=m[1], steps=steps))]
    if notes := _notes_call(text):  # the demo notes tool server's tools (toolservers.demo_server)
        return [notes]
    if m := re.fullmatch(r"write (.+) to (\S+)", text, re.I | re.S):
        return [("write_file", args(path=m[2], content=m[1]))]
    if m := re.fullmatch(r"read (\S+)", text, re.I):
        return [("read_file", args(path=m[1]))]
    if re.fullmatch(r"list( the)? files", text, re.I):
        return [("list_directory", args(path="."))]
    if re.fullmatch(r"delete (all|every) files?", text, re.I):
        return [("delete_all_files", args())]
    if m := re.fullmatch(r"delete (.+)", text, re.I):
        names = [n.strip() for n in re.split(r",|\band\b", m[1]) if n.strip()]
        return [("delete_file", args(path=n)) for n in names]
    if m := re.fullmatch(r"email (\S+) about (.+)", text, re.I | re.S):
        return [("send_email", args(to=m[1], subject=m[2], body=f"Hello, this is about {m[2]}."))]
    if m := re.fullmatch(r"what is (.+?)\??", text, re.I):
        return [("calculator", args(expression=m[1]))]
    if m := re.fullmatch(r"fetch (\S+)", text, re.I):
        return [("web_fetch", args(url=m[1]))]
    if m := re.fullmatch(r"add domain (\S+)", text, re.I):
        return [("add_domain", args(domain=m[1].lower()))]
    if m := re.fullmatch(r"allow (\S+) from now on", text, re.I):
        return [("allow_tool", args(tool=m[1]))]
    return None


def _git_call(text: str, repository: str) -> tuple[str, str] | None:
    """`git status`, `git log`, `git diff`, `create branch <name>`, and the first step of `commit all
    with message <m>` (git_add; the commit follows once it succeeded)."""
    if re.fullmatch(r"git status", text, re.I):
        return ("git__git_status", json.dumps({"repo_path": repository}))
    if re.fullmatch(r"git log", text, re.I):
        return ("git__git_log", json.dumps({"repo_path": repository, "max_count": 5}))
    if re.fullmatch(r"git diff", text, re.I):
        return ("git__git_diff_unstaged", json.dumps({"repo_path": repository}))
    if m := re.fullmatch(r"create branch (\S+)", text, re.I):
        return ("git__git_create_branch", json.dumps({"repo_path": repository, "branch_name": m[1]}))
    if re.fullmatch(r"commit all with message (.+)", text, re.I | re.S):
        return ("git__git_add", json.dumps({"repo_path": repository, "files": ["."]}))
    return None


def _notes_call(text: str) -> tuple[str, str] | None:
    """`list my notes`, `read note <name>`, `note <text> as <name>`, `remove note <name>`, `break the
    notes`, `show the notes picture`, `a huge note`: calls of the `notes` tool server's tools."""
    if re.fullmatch(r"list (my|the) notes", text, re.I):
        return ("notes__list_notes", "{}")
    if m := re.fullmatch(r"read note (\S+)", text, re.I):
        return ("notes__read_note", json.dumps({"name": m[1]}))
    if m := re.fullmatch(r"note (.+) as (\S+)", text, re.I | re.S):
        return ("notes__write_note", json.dumps({"name": m[2], "text": m[1]}))
    if m := re.fullmatch(r"remove note (\S+)", text, re.I):
        return ("notes__delete_note", json.dumps({"name": m[1]}))
    if m := re.fullmatch(r"title note (\S+)", text, re.I):
        return ("notes__title_note", json.dumps({"name": m[1]}))
    if re.fullmatch(r"break the notes", text, re.I):
        return ("notes__fail", json.dumps({"message": "broken on purpose"}))
    if re.fullmatch(r"show the notes picture", text, re.I):
        return ("notes__picture", "{}")
    if re.fullmatch(r"a huge note", text, re.I):
        return ("notes__huge", json.dumps({"size": 100_000}))
    return None


def _question(text: str) -> dict | None:
    """The ask_human arguments a phrase asks for: `ask me to choose between a, b and c`, `ask me
    for a number between m and n`, `ask me for a date`, `ask me to confirm <text> with <yes> or
    <no>` (a confirmation with its buttons' words), `ask me for a [csv] file [of at most N bytes]` (a
    file question, answered on the site), `ask me <question>`."""
    if m := re.fullmatch(r"ask me to choose between (.+)", text, re.I | re.S):
        options = [o.strip() for o in re.split(r",|\bor\b|\band\b", m[1]) if o.strip()]
        return {"question": "Which one?", "type": "choice", "options": options}
    if m := re.fullmatch(r"ask me for a number between (-?[\d.]+) and (-?[\d.]+)", text, re.I):
        return {"question": f"Which number, from {m[1]} to {m[2]}?", "type": "number", "min": float(m[1]), "max": float(m[2])}
    if re.fullmatch(r"ask me for a date", text, re.I):
        return {"question": "Which date?", "type": "date"}
    if m := re.fullmatch(r"ask me to confirm (.+) with (.+?) or (.+?)", text, re.I | re.S):
        what = m[1].strip()
        return {"message": f"Confirm: {what}?", "type": "confirm", "details": f"You asked me to confirm {what}.",
                "confirm_label": m[2].strip(), "cancel_label": m[3].strip()}
    if m := re.fullmatch(r"ask me for an? (?:(\w+) )?file(?: of at most (\d+) bytes)?", text, re.I):
        kind = (m[1] or "").lower()
        asked = {"question": f"Which {kind + ' ' if kind else ''}file?", "type": "file"}
        return asked | ({"accept": [f".{kind}"]} if kind else {}) | ({"max_bytes": int(m[2])} if m[2] else {})
    if m := re.fullmatch(r"ask me (.+)", text, re.I | re.S):
        return {"question": m[1].strip(), "type": "text"}
    return None


_ACTIONS = {
    "write_file": "write {path}",
    "read_file": "read {path}",
    "delete_file": "delete {path}",
    "delete_all_files": "delete all files",
    "list_directory": "list the files",
    "send_email": "email {to} about {subject}",
    "calculator": "calculate {expression}",
    "web_fetch": "fetch {url}",
    "add_domain": "let the agent fetch {domain} without asking",
    "allow_tool": "let the agent call {tool} without asking",
    "git__git_status": "look at the git status",
    "git__git_log": "read the git log",
    "git__git_diff_unstaged": "look at the changes",
    "git__git_add": "stage the changes",
    "git__git_commit": "commit with message {message}",
    "git__git_create_branch": "create branch {branch_name}",
    "notes__list_notes": "list the notes",
    "notes__read_note": "read note {name}",
    "notes__write_note": "write note {name}",
    "notes__delete_note": "remove note {name}",
    "notes__title_note": "title note {name}",
    "notes__fail": "break the notes",
    "notes__picture": "show the picture",
    "notes__huge": "make a huge note",
}


def _describe_call(call: dict | None) -> str:
    if not call:
        return "run that tool"
    name = call["function"]["name"]
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return _ACTIONS[name].format(**arguments)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):  # bad or missing arguments, unknown tool
        return f"run {name}"


def _result_sentence(call: dict | None, content: str) -> str:
    content = content.removesuffix(REJECTION_NUDGE)  # the nudge is for a real model: the reply quotes the reason
    if call and call["function"]["name"] in ("ask_human", "request_human_input", "propose_plan"):
        return _answer_sentence(content)
    action = _describe_call(call)
    if content.startswith(("Rejected by", "Denied by rule", "Already rejected by", "Not run:", "Interrupted:", "Cancelled by")):
        end = "" if content.endswith((".", "!", "?")) else "."  # the reason is quoted as it was typed
        return f"I did not {action} ({content}){end}"
    if content.startswith("Error:"):
        return f"I could not {action}: {content.removeprefix('Error:').strip()}"
    return f"I did {action}: {content.strip()}"


def _answer_sentence(content: str) -> str:
    """What the scripted model says of a question's answer or a plan's decision (their first line is JSON)."""
    try:
        outcome = json.loads(content.split("\n", 1)[0])
    except ValueError:
        return f"I got: {content.strip()}"
    if "answer" in outcome:
        return f"You answered: {questions.shown(outcome['answer'])}."
    if outcome.get("declined"):
        return f"You declined to answer ({outcome.get('reason') or 'no reason given'})."
    if outcome.get("approved_steps"):
        return f"Approved steps: {', '.join(str(i) for i in outcome['approved_steps'])}."
    if outcome.get("rejected"):
        return f"You rejected the plan ({outcome.get('reason') or 'no reason given'}): I will not follow it."
    return "No answer came, so I will not go on with that."


def _chunk(text: str = "", tool_use: dict | None = None, finish_reason: str = "", index: int = 0) -> dict:
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": bool(finish_reason),
        "finish_reason": finish_reason,
        "usage": None,
        "index": index,
    }


def scripted_stream(model: str, messages: list, optional_params: dict) -> Iterator[dict]:
    """The scripted turn as litellm's generic streaming chunks: words first, then the tool calls."""
    SCRIPTED_REQUESTS.append({"model": model, "messages": messages, "tools": optional_params.get("tools")})
    turn = script_turn(messages)
    for word in re.findall(r"\S+\s*", turn.text):
        yield _chunk(text=word)
    for index, call in enumerate(turn.tool_calls):
        function = {"name": call.name, "arguments": call.raw_arguments}
        yield _chunk(tool_use={"id": call.call_id, "type": "function", "index": index, "function": function})
    yield _chunk(finish_reason="tool_calls" if turn.tool_calls else "stop")
