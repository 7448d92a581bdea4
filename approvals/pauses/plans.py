"""A plan the agent proposes before it acts (the Swift design's plan approval, with `canModify`):
its steps, which of them a human approved, as the human changed them (their words, their order),
what the model reads back, and which tools the approved steps name: once approved, a call of any
other tool waits for a person whatever the rules say (chat.planned). Pure: no database.

The stored plan is `{"title", "steps": [{"index", "action", "description", "optional", "tool",
"estimated_duration"}]}`, indices from 1; `tool` ("" for none) is the tool the step calls and
`estimated_duration` its estimate in seconds (None: not given)."""
import json

MAX_STEPS = 20
MAX_TITLE_CHARS = 200
MAX_ACTION_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000
MAX_TOOL_CHARS = 200
MAX_DURATION_SECONDS = 30 * 24 * 60 * 60


class InvalidPlan(ValueError):
    """A plan the model must fix; the message names the field."""


class InvalidSteps(ValueError):
    """Approved steps the plan does not allow (a required one left out); the message says which."""


def normalize(arguments: dict) -> dict:
    """The model's (schema-validated) arguments as the stored plan, or InvalidPlan."""
    title = str(arguments.get("title") or "").strip()
    if not title:
        raise InvalidPlan("title: the plan has no title.")
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidPlan(f"title: longer than {MAX_TITLE_CHARS} characters.")
    steps = arguments.get("steps") or []
    if not 1 <= len(steps) <= MAX_STEPS:
        raise InvalidPlan(f"steps: a plan has 1 to {MAX_STEPS} steps, not {len(steps)}.")
    stored = []
    for index, step in enumerate(steps, start=1):
        action = str(step.get("action") or "").strip()
        description = str(step.get("description") or "").strip()
        if not action:
            raise InvalidPlan(f"steps.{index}.action: the step says nothing to do.")
        if len(action) > MAX_ACTION_CHARS or len(description) > MAX_DESCRIPTION_CHARS:
            raise InvalidPlan(f"steps.{index}: longer than {MAX_ACTION_CHARS} characters (action) or {MAX_DESCRIPTION_CHARS} (description).")
        tool = str(step.get("tool") or "").strip()
        if len(tool) > MAX_TOOL_CHARS:
            raise InvalidPlan(f"steps.{index}.tool: longer than {MAX_TOOL_CHARS} characters.")
        duration = step.get("estimated_duration")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int) or not 0 < duration <= MAX_DURATION_SECONDS):
            raise InvalidPlan(f"steps.{index}.estimated_duration: whole seconds from 1 to {MAX_DURATION_SECONDS}.")
        stored.append({
            "index": index, "action": action, "description": description, "optional": bool(step.get("optional", False)),
            "tool": tool, "estimated_duration": duration,
        })
    return {"title": title, "steps": stored}


def approve(plan: dict, chosen) -> dict:
    """The answer of an approved plan, from what the human chose: step numbers, or steps as they
    changed them (`{"index", "action"?, "description"?}`), in the order to take them; a step left out
    is dropped (only an optional one may be). The answer is `{"approved_steps", "dropped_steps"}`,
    and when the human changed the words or the order, `"steps"`: the approved steps as they left
    them (each keeping its tool), and `"modified": true`. Raises InvalidSteps."""
    if not isinstance(chosen, list):
        raise InvalidSteps("steps: a list of step numbers, or of steps as changed.")
    by_index = {step["index"]: step for step in plan["steps"]}
    indices, steps, edited = [], [], False
    for position, choice in enumerate(chosen, start=1):
        index, words = _choice(choice, position)
        if index not in by_index:
            raise InvalidSteps(f"The plan has no step {index} (it has steps 1 to {len(by_index)}).")
        step = dict(by_index[index])
        for field, most in (("action", MAX_ACTION_CHARS), ("description", MAX_DESCRIPTION_CHARS)):
            if field in words:
                text = str(words[field]).strip()
                if field == "action" and not text:
                    raise InvalidSteps(f"Step {index}: a step must say what it does.")
                if len(text) > most:
                    raise InvalidSteps(f"Step {index}: its {field} is longer than {most} characters.")
                edited |= text != step[field]
                step[field] = text
        indices.append(index)
        steps.append(step)
    approved = approved_steps(plan, indices, keep_order=True)
    answer = {"approved_steps": approved, "dropped_steps": dropped_steps(plan, approved)}
    if edited or approved != sorted(approved):
        answer |= {"steps": steps, "modified": True}
    return answer


def _choice(choice, position: int) -> tuple[int, dict]:
    if isinstance(choice, int) and not isinstance(choice, bool):
        return choice, {}
    if isinstance(choice, dict) and isinstance(choice.get("index"), int) and not isinstance(choice["index"], bool):
        unknown = set(choice) - {"index", "action", "description"}
        if unknown:
            raise InvalidSteps(f"steps.{position}: only a step's action and description may change, not {sorted(unknown)[0]}.")
        if any(not isinstance(choice[field], str) for field in ("action", "description") if field in choice):
            raise InvalidSteps(f"steps.{position}: a step's action and description are text.")
        return choice["index"], choice
    raise InvalidSteps(f"steps.{position}: a step number, or {{\"index\": n, \"action\": \"...\"}}.")


def approved_tools(plan: dict, answer: dict) -> set[str]:
    """The tools an approved plan's approved steps call: while it holds, a call of any other waits."""
    approved = set(answer.get("approved_steps") or [])
    return {step["tool"] for step in plan["steps"] if step["index"] in approved and step.get("tool")}


def names_tools(plan: dict) -> bool:
    """Whether any of its steps says which tool it calls: only such a plan holds the calls after it."""
    return any(step.get("tool") for step in plan["steps"])


def duration_text(seconds: int | None) -> str:
    """"about 5 min", as the card shows a step's estimate."""
    if not seconds:
        return ""
    if seconds < 60:
        return f"about {seconds} s"
    minutes = round(seconds / 60)
    return f"about {minutes} min" if minutes < 90 else f"about {round(minutes / 60)} h"


def approved_steps(plan: dict, steps, *, keep_order: bool = False) -> list[int]:
    """The step indices a human approved, in order (`keep_order`: in the order given), or
    InvalidSteps: every required step must be among them (to leave one out, reject the whole plan)."""
    if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise InvalidSteps("steps: a list of step numbers.")
    known = {step["index"] for step in plan["steps"]}
    unknown = sorted(set(steps) - known)
    if unknown:
        raise InvalidSteps(f"The plan has no step {unknown[0]} (it has steps 1 to {len(known)}).")
    if len(set(steps)) != len(steps):
        raise InvalidSteps("A step is listed twice.")
    missing = [step for step in plan["steps"] if not step["optional"] and step["index"] not in steps]
    if missing:
        step = missing[0]
        raise InvalidSteps(f"Step {step['index']} ({step['action']}) is required: keep it, or reject the whole plan.")
    return list(steps) if keep_order else sorted(steps)


def dropped_steps(plan: dict, approved: list[int]) -> list[int]:
    return [step["index"] for step in plan["steps"] if step["index"] not in approved]


def approved_result(plan: dict, approved: list[int], answer: dict | None = None) -> str:
    """The tool result the model reads: which steps it may take and which it must not, as JSON, then
    a sentence; a plan the human changed, with its steps as they left them, in their order."""
    dropped = dropped_steps(plan, approved)
    outcome = {"approved_steps": approved, "dropped_steps": dropped}
    if answer and answer.get("modified"):
        taken = [{"index": s["index"], "action": s["action"], "description": s["description"], "tool": s.get("tool", "")} for s in answer["steps"]]
        outcome |= {"steps": taken, "modified": True}
        listed = "; ".join(f"{s['index']}. {s['action']}" for s in taken)
        sentence = f"The plan was approved as the human changed it: take these steps, in this order, as they are worded: {listed}."
    else:
        sentence = f"The plan was approved. Approved steps: {_listed(approved)}."
    if dropped:
        sentence += f" Dropped steps, not to be taken: {_listed(dropped)}."
    if names_tools(plan):
        sentence += " A call of a tool that no approved step names waits for a person."
    return f"{json.dumps(outcome, ensure_ascii=False)}\n{sentence}"


def rejected_result(who: str, reason: str) -> str:
    because = f": {reason.rstrip('.')}" if reason else ""
    return f"{json.dumps({'approved_steps': [], 'rejected': True, 'reason': reason}, ensure_ascii=False)}\n{who} rejected the whole plan{because}. Take none of its steps."


def expired_result() -> str:
    return f"{json.dumps({'approved_steps': [], 'expired': True})}\nNo decision came: the plan expired unapproved. Take none of its steps."


def _listed(indices: list[int]) -> str:
    return ", ".join(str(i) for i in indices) if indices else "none"
