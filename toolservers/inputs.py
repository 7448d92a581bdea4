"""An MCP server's input request (the 2026-07-28 `input_required` result) as questions for a human,
one at a time, and their answers as the server's `input_responses`. Pure: the state is plain JSON,
kept on the waiting call, so a worker restart while the human thinks loses nothing.

Each form elicitation asks one question per field of its (flat) schema, typed by the field: an enum
is a choice, an array of enums a multiple choice, a boolean a yes/no, a number or integer a number
within its bounds, a date-formatted string a date, any other string text. Declining or letting any
question of a request expire declines (or cancels) that whole request, as the spec has it."""
from approvals.pauses import questions
from mcp_types import ElicitResult

MAX_QUESTION_CHARS = 1500


class Unsupported(ValueError):
    """A request this app does not relay to a human (sampling its model, listing roots, a URL form)."""


def start(input_required: dict, server_name: str) -> dict:
    """The state of a fresh input request: every (request, field) to ask, in order."""
    asks = []
    for key, request in (input_required.get("requests") or {}).items():
        params = request.get("params") or {}
        if request.get("method") != "elicitation/create" or params.get("mode", "form") != "form":
            raise Unsupported(f"{server_name} asked for {request.get('method')} ({params.get('mode', 'form')}), which is not relayed to a human.")
        fields = (params.get("requestedSchema") or {}).get("properties") or {}
        if not fields:
            asks.append([key, ""])  # a confirmation with nothing to fill in
        asks += [[key, name] for name in fields]
    return {
        "requests": input_required.get("requests") or {},
        "request_state": input_required.get("request_state"),
        "asks": asks,
        "answers": {},
        "refused": {},
        "server": server_name,
    }


def pending(state: dict) -> bool:
    return bool(state["asks"])


def question(state: dict) -> dict:
    """The next question, as approvals.pauses.questions stores it."""
    key, name = state["asks"][0]
    params = state["requests"][key].get("params") or {}
    schema = params.get("requestedSchema") or {}
    field = (schema.get("properties") or {}).get(name, {})
    text = f"{state['server']} asks: {params.get('message') or 'some input'}"
    if name:
        label = field.get("title") or name
        text += f"\n{label}" + (f" ({field['description']})" if field.get("description") else "")
    asked = {"question": text[:MAX_QUESTION_CHARS], "required": name in (schema.get("required") or [])} | _typed(field, bool(name))
    return questions.normalize(asked)


def _typed(field: dict, has_field: bool) -> dict:
    if not has_field or field.get("type") == "boolean":
        return {"type": "confirm"}
    options = field.get("enum") or [choice.get("const") for choice in field.get("oneOf") or [] if "const" in choice]
    if options:
        return {"type": "choice", "options": [str(option) for option in options]}
    items = field.get("items") or {}
    if field.get("type") == "array" and (items.get("enum") or items.get("anyOf")):
        values = items.get("enum") or [choice.get("const") for choice in items.get("anyOf") if "const" in choice]
        return {"type": "multi_choice", "options": [str(value) for value in values]}
    if field.get("type") in ("number", "integer"):
        return {"type": "number", "min": field.get("minimum"), "max": field.get("maximum")}
    if field.get("format") == "date":
        return {"type": "date"}
    return {"type": "text"}


def record(state: dict, answer: dict) -> dict:
    """The state once the current question is settled: an answer kept for its field; a decline or
    a cancel refuses the whole request, its other questions dropped."""
    state = {**state, "asks": list(state["asks"]), "answers": dict(state["answers"]), "refused": dict(state["refused"])}
    key, name = state["asks"].pop(0)
    if answer.get("action") != "accept":
        state["refused"][key] = answer.get("action", "cancel")
        state["asks"] = [ask for ask in state["asks"] if ask[0] != key]
        return state
    if name:
        field = ((state["requests"][key].get("params") or {}).get("requestedSchema") or {}).get("properties", {}).get(name, {})
        value = answer.get("value")
        if field.get("type") == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        state["answers"][key] = {**state["answers"].get(key, {}), name: value}
    elif answer.get("value") is False:  # a bare confirmation answered "no"
        state["refused"][key] = "decline"
    return state


def responses(state: dict) -> dict:
    """The server's `input_responses`: each request accepted with its fields, or declined/cancelled."""
    return {
        key: ElicitResult(action=state["refused"][key]) if key in state["refused"] else ElicitResult(action="accept", content=state["answers"].get(key, {}))
        for key in state["requests"]
    }
