"""Decisions that arrive as an AG-UI run's `resume` entries: each names an interrupt (an approval of
the run's thread) and carries the answer its `responseSchema` describes. Every entry is read and
checked against the stored rows first, then each is decided through approvals.services like every
surface (first decision wins, four eyes, routes, critical confirmation, step-up, expiry, the version
shown), `via=agui`. Sync: aguilink.runs calls it on AG-UI's own threads.

- `{"decision": "approve"}`, `{"decision": "reject", "reason"}`; a critical call is approved with
  `"confirmation"` equal to its hint (interrupt metadata `confirmationHint`), else nothing is decided.
- `{"decision": "approve", "editedArgs": {...}}`: approve with changed arguments (validated, gated and
  screened again: a stricter edit stays pending for whoever may decide it, and the run says so).
- `{"answer": value}` or `{"decline": true, "reason"}` for a question; `{"decision", "steps"}` for a plan.
- `"shownHash"` (interrupt metadata) binds a decision to that version; without it, only a call never
  edited is approved, as on every surface that showed no version.
- `status: "cancelled"` rejects the call or plan, or declines the question (the `reason` in
  `payload` if any): the run goes on with the agent told no.
"""
from dataclasses import dataclass

from ag_ui.core import ResumeEntry

from approvals import services
from approvals.pauses import plans, questions
from approvals.policy import calls
from approvals.models import Approval
from core.inputs import is_storable_value, storable

from .interrupts import APPROVE, REJECT

MAX_ENTRIES = 50
CANCELLED_REASON = "Cancelled in the AG-UI client."


class Refused(Exception):
    """The run cannot do what it asks, and why: nothing (or, for a race lost midway, only what the
    message says) was decided. `code` is the RUN_ERROR's."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.message, self.code = message, code


@dataclass
class Decision:
    approval: Approval
    verb: str  # approve, reject, edit, answer, decline
    reason: str = ""
    confirmation: str = ""
    value: object = None
    steps: list | None = None
    arguments: dict | None = None
    shown_hash: str = ""


def apply(entries: list[ResumeEntry], *, conversation, user) -> list[Approval]:
    """Decide what `entries` say about the thread's interrupts. Returns the approvals as they stand
    after (an edit may leave one pending). Raises Refused, having decided nothing, when any of it
    cannot stand."""
    if not entries or len(entries) > MAX_ENTRIES:
        raise Refused(f"`resume` lists 1 to {MAX_ENTRIES} entries.", "invalid_resume")
    decisions = [_read(entry, conversation) for entry in entries]
    ids = [decision.approval.pk for decision in decisions]
    if len(set(ids)) != len(ids):
        raise Refused("An interrupt is answered twice in `resume`.", "invalid_resume")
    for decision in decisions:
        _check(decision, user)
    stood = []
    for decision in decisions:
        try:
            stood.append(_decide(decision, user))
        except services.AlreadyDecided as exc:
            raise Refused(already(exc.approval) + _so_far(stood), "already_decided") from None
        except services.EditForbidden as exc:
            raise Refused(f"Interrupt {decision.approval.pk}: {exc}" + _so_far(stood), "edit_refused") from None
        except calls.InvalidArguments as exc:
            raise Refused(f"Interrupt {decision.approval.pk}: editedArgs: {exc}" + _so_far(stood), "invalid_arguments") from None
        except services.ConfirmationRequired as exc:
            raise Refused(f"Interrupt {decision.approval.pk}: {exc} (\"confirmation\" in the payload)." + _so_far(stood),
                          "confirmation_required") from None
        except services.InvalidAnswer as exc:
            raise Refused(f"Interrupt {decision.approval.pk}: {exc}" + _so_far(stood), "invalid_answer") from None
        except (services.DecisionError, Approval.DoesNotExist) as exc:
            raise Refused(f"Interrupt {decision.approval.pk}: {exc or 'not found.'}" + _so_far(stood), "not_decided") from None
    return stood


def already(approval: Approval) -> str:
    """Who decided first, and how: what a resume of a decided interrupt is told."""
    who = approval.decided_by.get_username() if approval.decided_by else ""
    how = {"timeout": "its timeout", "rule": "a rule", "repeat": "the repeat rule"}.get(approval.decided_via)
    by = f"by {how}" if how else f"by {who or 'the system'} via {approval.decided_via or 'the system'}"
    return f"Interrupt {approval.pk} was already {approval.status} {by}."


def _read(entry: ResumeEntry, conversation) -> Decision:
    approval = _approval(entry.interrupt_id, conversation)
    payload = entry.payload if entry.payload is not None else {}
    if not isinstance(payload, dict):
        raise Refused(f"Interrupt {approval.pk}: `payload` is a JSON object (see the interrupt's responseSchema).", "invalid_payload")
    shown_hash = payload.get("shownHash", "")
    if not isinstance(shown_hash, str) or len(shown_hash) > 128:
        raise Refused(f'Interrupt {approval.pk}: "shownHash" is the string the interrupt\'s metadata lists.', "invalid_payload")
    reason = storable(_text(payload.get("reason")))  # kept as the column can hold it (a NUL dropped)
    is_question = approval.kind == Approval.Kind.QUESTION
    if entry.status == "cancelled":
        return Decision(approval, "decline" if is_question else REJECT, reason=reason or CANCELLED_REASON, shown_hash=shown_hash)
    if is_question:
        if payload.get("decline") is True or payload.get("decision") == REJECT:
            return Decision(approval, "decline", reason=reason, shown_hash=shown_hash)
        if "answer" not in payload:
            raise Refused(f'Interrupt {approval.pk} is a question: answer it with {{"answer": …}} or {{"decline": true}}.', "invalid_payload")
        return Decision(approval, "answer", value=payload["answer"], shown_hash=shown_hash)
    decision = payload.get("decision")
    if decision not in (APPROVE, REJECT):
        raise Refused(f'Interrupt {approval.pk}: "decision" is "approve" or "reject".', "invalid_payload")
    if decision == REJECT:
        return Decision(approval, REJECT, reason=reason, shown_hash=shown_hash)
    confirmation = _text(payload.get("confirmation"))
    if approval.kind == Approval.Kind.PLAN:
        steps = payload.get("steps")
        if steps is not None and not isinstance(steps, list):
            raise Refused(f'Interrupt {approval.pk}: "steps" is a list of step numbers.', "invalid_payload")
        return Decision(approval, APPROVE, steps=steps, confirmation=confirmation, shown_hash=shown_hash)
    if "editedArgs" in payload:
        if not isinstance(payload["editedArgs"], dict):
            raise Refused(f'Interrupt {approval.pk}: "editedArgs" is a JSON object of the tool\'s arguments.', "invalid_payload")
        if not is_storable_value(payload["editedArgs"]):
            raise Refused(f'Interrupt {approval.pk}: "editedArgs" hold a NUL character or a lone surrogate, which is not text.',
                          "invalid_arguments")
        return Decision(approval, "edit", arguments=payload["editedArgs"], confirmation=confirmation, shown_hash=shown_hash)
    return Decision(approval, APPROVE, confirmation=confirmation, shown_hash=shown_hash)


def _approval(interrupt_id: str, conversation) -> Approval:
    key = int(interrupt_id) if interrupt_id.isascii() and interrupt_id.isdigit() and len(interrupt_id) < 19 else None
    approval = None
    if key:
        approval = (
            Approval.objects.select_related("tool_call", "conversation__agent", "decided_by")
            .filter(pk=key, conversation_id=conversation.pk).first()
        )
    if approval is None:  # unknown, or another thread's: the same answer
        raise Refused(f"Interrupt {interrupt_id[:40]!r} is not one of this thread's interrupts.", "unknown_interrupt")
    if approval.status != Approval.Status.PENDING:
        raise Refused(already(approval), "already_decided")
    return approval


def _check(decision: Decision, user) -> None:
    """Refuse, before anything is decided, what the decision service would refuse."""
    approval, label = decision.approval, f"Interrupt {decision.approval.pk}"
    approving = decision.verb in (APPROVE, "edit", "answer")
    try:
        services.check_decidable(approval.pk, user, approve=approving, shown_hash=decision.shown_hash)
    except services.AlreadyDecided as exc:
        raise Refused(already(exc.approval) + " Nothing was decided.", "already_decided") from None
    except services.ArgumentsChanged:
        raise Refused(f"{label}: the call changed since the version you were shown (it was edited): run again without "
                      "a message to read the interrupt anew. Nothing was decided.", "changed") from None
    except services.StepUpRequired:
        raise Refused(f"{label}: {services.STEP_UP} Nothing was decided; you may still reject it.", "step_up_required") from None
    except services.NotAllowed as exc:
        raise Refused(f"{label}: {exc} Nothing was decided.", "not_allowed") from None
    except (services.DecisionError, Approval.DoesNotExist) as exc:
        raise Refused(f"{label}: {exc or 'not found.'} Nothing was decided.", "not_decided") from None
    try:
        if decision.verb == "answer":
            questions.validate_answer(approval.question, decision.value)
        if decision.steps is not None:
            plans.approve(approval.plan, decision.steps)
    except (questions.InvalidAnswer, plans.InvalidSteps) as exc:
        raise Refused(f"{label}: {exc} Nothing was decided.", "invalid_answer") from None
    needs_confirmation = decision.verb == APPROVE and approval.kind != Approval.Kind.QUESTION and approval.confirmation_required
    if needs_confirmation and decision.confirmation != approval.confirmation_hint:
        raise Refused(f'{label} is critical: approve it with "confirmation": "{approval.confirmation_hint}" in the payload. '
                      "Nothing was decided.", "confirmation_required")


def _decide(decision: Decision, user) -> Approval:
    approval, via = decision.approval, Approval.Via.AGUI
    if decision.verb in ("answer", "decline"):
        return services.answer(
            approval.pk, user=user, via=via, shown_hash=decision.shown_hash, value=decision.value,
            decline=decision.verb == "decline", reason=decision.reason,
        )
    if decision.verb == "edit":
        return services.approve_edited(
            approval.pk, user=user, arguments=decision.arguments, via=via, shown_hash=decision.shown_hash,
            confirmation=decision.confirmation,
        )
    return services.decide(
        approval.pk, user=user, approve=decision.verb == APPROVE, via=via, shown_hash=decision.shown_hash,
        reason=decision.reason, confirmation=decision.confirmation, steps=decision.steps,
    )


def _so_far(stood: list) -> str:
    return f" The {len(stood)} decision(s) before it in `resume` stand." if stood else " Nothing was decided."


def _text(value) -> str:
    return value.strip()[:2000] if isinstance(value, str) else ""
