"""What the model sees: the stored conversation in the OpenAI chat format that litellm speaks."""
import json

from .models import Conversation, Message, ToolCall

Status = ToolCall.Status


def model_messages(conversation: Conversation) -> list[dict]:
    """The history in the OpenAI chat format. Each tool call id gets exactly one tool result, right
    after its assistant message, as provider APIs require; a message typed while calls were pending
    therefore comes after those results."""
    history = []
    if conversation.agent.system_prompt:
        history.append({"role": "system", "content": conversation.agent.system_prompt})
    messages = conversation.messages.filter(in_model_context=True).prefetch_related("tool_calls")
    for message in messages:
        if message.role == Message.Role.USER:
            history.append({"role": "user", "content": message.content})
        elif message.role == Message.Role.ASSISTANT:
            calls = [call for call in message.tool_calls.all() if call.asked_by_id is None]  # not a tool's own questions
            entry = {"role": "assistant", "content": message.content or None}
            if calls:
                entry["tool_calls"] = [_call_for_model(call) for call in calls]
            history.append(entry)
            history.extend({"role": "tool", "tool_call_id": c.call_id, "content": tool_result(c)} for c in calls)
    return history


def _call_for_model(call: ToolCall) -> dict:
    arguments = call.raw_arguments if _is_json_object(call.raw_arguments) else json.dumps(call.arguments)
    return {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def tool_result(call: ToolCall) -> str:
    if call.status not in ToolCall.FINISHED:
        raise ValueError(f"{call} has no result yet ({call.status}); the model must not be called.")
    if call.status == Status.FAILED:
        return f"Error: {call.error}"
    return call.result


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # bad model output, sent back as the arguments we parsed
        return False
