"""Undo in the JSON API: POST /api/tool-calls/{id}/undo asks for the undo of a succeeded call of a
reversible tool (chat.undo): 202 with the undo's own tool call, gated as any call; 409 when it
cannot be undone (too late, changed since, not reversible) or has an undo already."""
from typing import Annotated

from django.http import Http404
from ninja import Field, Router, Status
from ninja.errors import HttpError

from approvals.deciders.routing import ASKING_TOKEN, asks_only

from . import undo
from .api import ToolCallOut, tool_call_out
from .models import ToolCall

router = Router(tags=["tool calls"])
ToolCallId = Annotated[int, Field(ge=1, le=2**63 - 1)]


@router.post("/{tool_call_id}/undo", response={202: ToolCallOut})
def undo_call(request, tool_call_id: ToolCallId):
    """Undo a call: its owner or an approver. The undo waits for its own decision (or a rule's)."""
    if asks_only(request.auth):
        raise HttpError(403, ASKING_TOKEN)
    try:
        made = undo.request_undo(request.auth, tool_call_id)
    except ToolCall.DoesNotExist:
        raise Http404("No such tool call.") from None
    except undo.CannotUndo as exc:
        raise HttpError(409, str(exc)) from None
    return Status(202, tool_call_out(ToolCall.objects.select_related("approval").get(pk=made.pk)))
