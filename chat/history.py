"""What the model sees: the stored conversation in the OpenAI chat format that litellm speaks, and
the loop's one read of it a step (History)."""
import json

from .messages import load_calls, set_loaded_calls
from .models import Conversation, Message, ToolCall

Status = ToolCall.Status


class History:
    """A conversation's messages in the model's context, by position, read once a step: its open
    turn (the newest assistant message, its calls loaded as their cards need them), whether the
    user spoke last and how many model steps since, and the messages for the model.

    Only the lease holder writes assistant turns, so the turn read here stays the open one; what
    others may add meanwhile is a user's message, which `read_newer` picks up."""

    def __init__(self, conversation: Conversation):
        self.conversation = conversation
        self.messages = list(conversation.messages.filter(in_model_context=True))  # by position
        self.turn = next((m for m in reversed(self.messages) if m.role == Message.Role.ASSISTANT), None)
        if self.turn is not None:
            load_calls(self.turn)
        self._earlier_calls_loaded = False

    def read_newer(self) -> None:
        """Add the messages stored since the read (what the user wrote while a tool ran)."""
        newest = self.messages[-1].position if self.messages else 0
        self.messages += list(self.conversation.messages.filter(in_model_context=True, position__gt=newest))

    def since_last_user_message(self, window: int) -> tuple[bool, int]:
        """(whether the newest message is the user's, how many model steps since the user last
        spoke, counted over the newest `window` messages at most)."""
        newest = self.messages[-window:][::-1]
        steps = 0
        for message in newest:
            if message.role == Message.Role.USER:
                break
            steps += message.role == Message.Role.ASSISTANT
        return bool(newest) and newest[0].role == Message.Role.USER, steps

    def for_model(self) -> list[dict]:
        """The messages in the model's format; the earlier turns' calls read now, in one query."""
        if not self._earlier_calls_loaded:
            _load_calls_for_model([m for m in self.messages if m.role == Message.Role.ASSISTANT and m is not self.turn])
            self._earlier_calls_loaded = True
        return _in_model_format(self.conversation, self.messages)


def model_messages(conversation: Conversation) -> list[dict]:
    """The history in the OpenAI chat format, read now."""
    return History(conversation).for_model()


def _load_calls_for_model(turns: list[Message]) -> None:
    if not turns:
        return
    calls: dict[int, list[ToolCall]] = {turn.pk: [] for turn in turns}
    for call in ToolCall.objects.filter(message__in=turns):  # by message, then position
        calls[call.message_id].append(call)
    for turn in turns:
        set_loaded_calls(turn, calls[turn.pk])


def _in_model_format(conversation: Conversation, messages: list[Message]) -> list[dict]:
    """Each tool call id gets exactly one tool result, right after its assistant message, as
    provider APIs require; a message typed while calls were pending therefore comes after those
    results."""
    history = []
    if conversation.agent.system_prompt:
        history.append({"role": "system", "content": conversation.agent.system_prompt})
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


# What the model reads after a person (or a rule) said no, as kagent's design words it: the
# rejection and its reason first, then a nudge away from asking for the same call again.
REJECTION_NUDGE = "\n\nThis call was rejected and did not run. Please try a different approach."
NUDGED = ("Rejected by", "Denied by rule")


def tool_result(call: ToolCall) -> str:
    if call.status not in ToolCall.FINISHED:
        raise ValueError(f"{call} has no result yet ({call.status}); the model must not be called.")
    if call.status == Status.FAILED:
        return f"Error: {call.error}"
    if call.status == Status.REJECTED and call.result.startswith(NUDGED) and ", who answered instead: " not in call.result:
        return call.result + REJECTION_NUDGE  # not a response: those words are the instruction
    return call.result


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # bad model output, sent back as the arguments we parsed
        return False
