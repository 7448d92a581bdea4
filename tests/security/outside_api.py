"""Calling the approval-requests API (issue 27) as an outside agent, for the outside-attack tests: a
deploy asked for, a decision on what was asked, and whether anything was stored."""
from approvals.models import Approval
from chat.models import Conversation, ToolCall


def ask(api, **fields):
    body = {"agent": "demo", "tool": "deploy", "arguments": {"service": "web", "version": "1.2"}} | fields
    return api.post("approval-requests", body)


def asked(api, **fields) -> dict:
    response = ask(api, **fields)
    assert response.status_code == 201, response.content
    return response.json()


def decide(api, body: dict, decision: str = "approve", **fields):
    return api.post(f"approvals/{body['id']}/decision", {"decision": decision, "shown_hash": body["shown_hash"]} | fields)


def nothing_stored() -> bool:
    return not (Conversation.objects.exists() or ToolCall.objects.exists() or Approval.objects.exists())
