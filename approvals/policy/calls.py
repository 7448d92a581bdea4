"""How approvals checks arguments a human edited: with the tool's own schema and gate.

Tools live with the agent loop (chat), which approvals never imports, so chat registers a checker
here when it starts (chat.apps). The checker validates and gates edited arguments exactly as the
loop gates a model's call, and computes their preview.
"""
from dataclasses import dataclass
from typing import Any, Protocol


class InvalidArguments(ValueError):
    """Edited arguments the tool's schema refuses; the message names the field."""


@dataclass(frozen=True)
class CheckedCall:
    """Validated arguments with what the policy says of them, as the loop would store them."""

    arguments: dict
    arguments_hash: str
    reason: str
    risk: str
    approver_required: bool
    preview: dict | None = None
    preview_state: str = ""
    confirmation_hint: str = ""


class CallChecker(Protocol):
    def check(self, approval: Any, arguments: Any) -> CheckedCall:
        """Validate `arguments` for the approval's tool and gate them; raise InvalidArguments."""

    def schema(self, approval: Any) -> dict:
        """The JSON schema of the approval's tool arguments ({} if the tool is gone)."""


_checker: CallChecker | None = None


def register_checker(checker: CallChecker) -> None:
    global _checker
    _checker = checker


def checker() -> CallChecker:
    if _checker is None:
        raise RuntimeError("No call checker is registered (the chat app registers one in ready()).")
    return _checker
