"""Ask a hitl server for a human's approval before your agent runs a tool call."""
from .client import AsyncClient, Client, __version__
from .decision import Decision
from .errors import Cancelled, Expired, HitlError, NotApproved, Rejected, StillPending, Unreachable
from .flows import Retry
from .gate import gate

__all__ = [
    "AsyncClient", "Cancelled", "Client", "Decision", "Expired", "HitlError", "NotApproved", "Rejected", "Retry",
    "StillPending", "Unreachable", "__version__", "gate",
]
