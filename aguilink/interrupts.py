"""A pending approval as an AG-UI interrupt: its id (the approval's), why it stops the run (`tool_approval`,
`question`, `plan`), the tool call it concerns, words for the human, the preview, and the JSON schema of
the answer a resume entry's `payload` carries (aguilink.resume reads exactly that shape).

The package's `Interrupt` has no `preview` field; its models keep unknown fields (`extra="allow"`) and
serialize them as given, so `preview` is sent beside the protocol's fields, faithfully (and in
`metadata` too: the JS client's schema drops an interrupt's unknown fields), and `metadata` holds the
rest a form needs (`shownHash`, the version shown, which a decision may send back). Pure:
the approval comes with its tool call and conversation's agent loaded."""
from ag_ui.core import Interrupt

from approvals import services
from approvals.summary import summarize
from approvals.models import Approval
from approvals.pauses import questions
from chat.tools import registry

REASONS = {Approval.Kind.ACTION: "tool_approval", Approval.Kind.QUESTION: "question", Approval.Kind.PLAN: "plan"}
APPROVE, REJECT = "approve", "reject"


def interrupt_for(approval: Approval) -> Interrupt:
    call = approval.tool_call
    metadata = {
        "shownHash": approval.shown_hash,
        "kind": approval.kind,
        "risk": approval.risk,
        "tool": call.name,
        "arguments": approval.edited_arguments if approval.is_edited else call.arguments,
        "edited": approval.is_edited,
        "conversationId": str(approval.conversation_id),
        "preview": approval.preview,  # again here: a client that keeps only the protocol's fields keeps metadata
        # Approving needs someone other than the requester (four eyes), or a passkey on the site (step-up):
        # either way not this run's resume, which may still reject it.
        "approverRequired": approval.approver_required or approval.route_id is not None,
        "stepUpRequired": services.needs_step_up(approval),
    }
    if approval.confirmation_required:
        metadata["confirmationHint"] = approval.confirmation_hint
    if approval.kind == Approval.Kind.QUESTION:
        metadata["question"] = approval.question
    if approval.kind == Approval.Kind.PLAN:
        metadata["plan"] = approval.plan
    return Interrupt(
        id=str(approval.pk),
        reason=REASONS[approval.kind],
        message=_message(approval),
        tool_call_id=call.call_id,
        response_schema=response_schema(approval),
        expires_at=approval.expires_at.isoformat() if approval.expires_at else None,
        metadata=metadata,
        preview=approval.preview,
    )


def _message(approval: Approval) -> str:
    """The words a human reads: a question's text; else (approvals.summary) what approving does,
    who asked, and why."""
    if approval.kind == Approval.Kind.QUESTION:
        return approval.question.get("text", "")
    summary = summarize(approval)
    return f"{summary.head}. Why: {summary.why}"


def response_schema(approval: Approval) -> dict:
    """What `payload` must be to decide it (the `shownHash` of `metadata` may be sent back with it:
    a decision then counts only for that version)."""
    common = {"reason": {"type": "string", "maxLength": 2000}, "shownHash": {"type": "string"}}
    if approval.kind == Approval.Kind.QUESTION:
        return {
            "type": "object",
            "properties": {"answer": answer_schema(approval.question), "decline": {"const": True}, **common},
            "oneOf": [{"required": ["answer"]}, {"required": ["decline"]}],
        }
    schema = {
        "type": "object",
        "properties": {"decision": {"enum": [APPROVE, REJECT]}, **common},
        "required": ["decision"],
    }
    if approval.confirmation_required:
        schema["properties"]["confirmation"] = {"const": approval.confirmation_hint}
        schema["if"] = {"properties": {"decision": {"const": APPROVE}}}
        schema["then"] = {"required": ["confirmation"]}
    if approval.kind == Approval.Kind.PLAN:
        steps = [step["index"] for step in approval.plan.get("steps", [])]
        schema["properties"]["steps"] = {
            "type": "array", "items": {"enum": steps}, "uniqueItems": True,
            "description": "The approved steps (all when left out); every step that is not optional must be kept.",
        }
        return schema
    spec = registry.find(approval.conversation.agent, approval.tool_call.name)
    edited = dict(spec.parameters) if spec is not None else {"type": "object"}
    schema["properties"]["editedArgs"] = edited | {"description": "Approve with these arguments instead (an edit)."}
    return schema


def answer_schema(question: dict) -> dict:
    kind = question.get("type")
    if kind == "choice":
        return {"enum": question["options"]}
    if kind == "multi_choice":
        return {"type": "array", "items": {"enum": question["options"]}, "uniqueItems": True}
    if kind == "number":
        schema = {"type": "number"}
        if question.get("min") is not None:
            schema["minimum"] = question["min"]
        if question.get("max") is not None:
            schema["maximum"] = question["max"]
        return schema
    if kind == "date":
        return {"type": "string", "format": "date"}
    if kind == "confirm":
        yes, no = questions.labels(question)
        return {"type": "boolean", "description": f"true: {yes}; false: {no}"}
    if kind == "file":
        return {"not": {}, "description": questions.ON_THE_SITE}  # no value answers it here: the card's upload does
    return {"type": "string", "minLength": 1 if question.get("required", True) else 0}
