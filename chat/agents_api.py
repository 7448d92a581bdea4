"""Agents in the JSON API: the agents a person may use, and their AI reviewer's settings
(approvals.reviewer), which operators with the permission to change agents may set. A change is a
save like the admin's: the agent's history names who made it, and it is a new policy version."""
from typing import Literal

from django.http import Http404
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from pydantic import ConfigDict

from approvals.deciders.routing import asks_only
from core.inputs import is_storable_value

from .models import Agent
from .selectors import usable_agents

router = Router(tags=["agents"])


class AgentOut(Schema):
    slug: str
    name: str
    model: str = Field(description="The agent's litellm model string.")
    tools: list[str]
    require_approval: list[str] = Field(description="Tools that always need a decision.")
    reviewer_model: str = Field(
        description="The AI reviewer that looks at a gated call before a person (a litellm model string; "
        "scripted/reviewer offline); \"\": off."
    )
    reviewer_max_risk: Literal["low", "medium"] = Field(description="The riskiest call the reviewer may approve.")


class AgentList(Schema):
    items: list[AgentOut]
    count: int


class AgentChange(Schema):
    model_config = ConfigDict(extra="forbid")  # the rest of an agent is changed in the admin

    reviewer_model: str | None = Field(None, max_length=200, description="A litellm model string; \"\" turns the reviewer off.")
    reviewer_max_risk: Literal["low", "medium"] | None = None
    reviewer_api_base: str | None = Field(None, max_length=300, description="The reviewer's provider URL, if not the default.")


def agent_out(agent: Agent) -> dict:
    return {
        "slug": agent.slug, "name": agent.name, "model": agent.model, "tools": agent.tools,
        "require_approval": agent.require_approval, "reviewer_model": agent.reviewer_model,
        "reviewer_max_risk": agent.reviewer_max_risk if agent.reviewer_max_risk in ("low", "medium") else "low",
    }


def _agent(request, slug: str) -> Agent:
    agent = usable_agents(request.auth).filter(slug=slug[:50]).first()
    if agent is None:
        raise Http404
    return agent


@router.get("", response=AgentList)
def list_agents(request):
    """The agents you may talk to."""
    agents = list(usable_agents(request.auth).order_by("slug")[:1000])
    return {"items": [agent_out(agent) for agent in agents], "count": len(agents)}


@router.get("/{slug}", response=AgentOut)
def get_agent(request, slug: str):
    return agent_out(_agent(request, slug))


@router.patch("/{slug}", response=AgentOut)
def change_agent(request, slug: str, payload: AgentChange):
    """Set the agent's reviewer. 403 without the permission to change agents (or with an ask-only
    token); 404 for an agent you may not use."""
    user = request.auth
    if asks_only(user) or not user.has_perm("chat.change_agent"):
        raise HttpError(403, "Changing an agent is for operators with the permission to change agents.")
    agent = _agent(request, slug)
    changes = payload.dict(exclude_none=True)
    if not is_storable_value(changes):
        raise HttpError(400, "The settings contain a NUL character, which is not text.")
    for name, value in changes.items():
        setattr(agent, name, value.strip())
    if changes:
        agent.save(update_fields=list(changes))
    return agent_out(agent)
