"""A plan the agent proposes before it acts: its steps, which of them a human approved, and what the
model reads back. Pure: no database. The stored plan is `{"title", "steps": [{"index", "action",
"description", "optional"}]}`, indices from 1."""
import json

MAX_STEPS = 20
MAX_TITLE_CHARS = 200
MAX_ACTION_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000


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
        stored.append({"index": index, "action": action, "description": description, "optional": bool(step.get("optional", False))})
    return {"title": title, "steps": stored}


def approved_steps(plan: dict, steps) -> list[int]:
    """The step indices a human approved, in order, or InvalidSteps: every required step must be
    among them (to leave one out, reject the whole plan)."""
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
    return sorted(steps)


def dropped_steps(plan: dict, approved: list[int]) -> list[int]:
    return [step["index"] for step in plan["steps"] if step["index"] not in approved]


def approved_result(plan: dict, approved: list[int]) -> str:
    """The tool result the model reads: which steps it may take and which it must not, as JSON, then a sentence."""
    dropped = dropped_steps(plan, approved)
    outcome = {"approved_steps": approved, "dropped_steps": dropped}
    sentence = f"The plan was approved. Approved steps: {_listed(approved)}."
    if dropped:
        sentence += f" Dropped steps, not to be taken: {_listed(dropped)}."
    return f"{json.dumps(outcome)}\n{sentence}"


def rejected_result(who: str, reason: str) -> str:
    because = f": {reason.rstrip('.')}" if reason else ""
    return f"{json.dumps({'approved_steps': [], 'rejected': True, 'reason': reason}, ensure_ascii=False)}\n{who} rejected the whole plan{because}. Take none of its steps."


def expired_result() -> str:
    return f"{json.dumps({'approved_steps': [], 'expired': True})}\nNo decision came: the plan expired unapproved. Take none of its steps."


def _listed(indices: list[int]) -> str:
    return ", ".join(str(i) for i in indices) if indices else "none"
