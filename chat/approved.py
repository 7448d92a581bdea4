"""What an approved call runs with, and what the model reads of it: only the arguments whose hash
was approved, never into a world that changed since the approver saw it, with a note of a human's
edit and a tool question's answer as the tool takes it (chat.loop runs them)."""
import json

from approvals.models import Approval

from .gating import preview_of
from .models import ToolCall
from .tools import arguments_hash


def input_answer(approval: Approval) -> dict:
    """What the human did with a tool's question, as the tool takes it."""
    if approval.status == Approval.Status.ANSWERED:
        return {"action": "accept", "value": approval.answer}
    return {"action": "decline" if approval.status == Approval.Status.DECLINED else "cancel"}


def world_changed(spec, arguments: dict, context, approval: Approval) -> str:
    """Approve exactly what was shown, the state it acts on included: the preview's fingerprint of
    that state (a file's content) is taken again, and a call whose world changed does not run."""
    if not approval.preview_state:
        return ""
    now = preview_of(spec, arguments, context)
    if now is not None and now.state == approval.preview_state:
        return ""
    return (
        "Not run: the world changed since the approval. What the approver was shown "
        f"({approval.preview['text'].splitlines()[0] if approval.preview else 'the preview'}) no longer holds; "
        "ask again if it should still be done."
    )


def edit_note(requested: dict, approved: dict, approval: Approval) -> str:
    """Tell the model that a human changed its arguments, and how, before the tool's own result."""
    who = approval.edited_by.get_username() if approval.edited_by else "a human"
    changes = "; ".join(
        f"{key}: {json.dumps(requested.get(key), ensure_ascii=False)} → {json.dumps(approved.get(key), ensure_ascii=False)}"
        for key in sorted(set(requested) | set(approved))
        if requested.get(key) != approved.get(key)
    )
    return f"Note: {who} changed the arguments before approving ({changes}).\n"


def storable_output(text: str) -> str:
    """Tool output as a text column can hold it: a NUL (a binary file read, say) is shown as \\0."""
    return text.replace("\x00", "\\0")


def matches_approval(call: ToolCall, approval: Approval | None, arguments: dict) -> bool:
    """The call runs only with arguments whose hash was approved: the model's, or the human's edit."""
    if approval is None or approval.status != Approval.Status.APPROVED:
        return False
    if approval.is_edited:
        return approval.edited_arguments_hash == arguments_hash(arguments)
    return approval.arguments_hash == call.arguments_hash == arguments_hash(arguments)
