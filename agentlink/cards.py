"""An agent's A2A card: who it is, where to call it, how to authenticate, and its skills (the
tools it may call, each saying whether a human may be asked first).

Its input modes are what a message that starts a task may hold: text/plain, nothing else (any other
part is ContentTypeNotSupportedError, agentlink.handler). The reply to a pause is another matter: it
goes to the task that asked (its taskId), as the input-required status message shows it, with the
decisions as data parts (application/json) or kagent's HITL extension, declared below; no skill
takes them (the skills are the tools the agent calls), so no skill lists application/json either.
Its output is text and data parts: the answer, the tool calls and results, a pause's requests."""
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from chat.models import Agent
from chat.tools import registry

from .runs import HITL_EXTENSION

SCHEME = "bearer"


def agent_card(agent: Agent, url: str) -> pb.AgentCard:
    card = pb.AgentCard(
        name=agent.name,
        # Not the system prompt: the card is for every user of the agent, the prompt for the model.
        description=f"{agent.name}: an agent whose risky tool calls wait for a human to approve them.",
        version="1.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0)
        ],
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=True, extensions=[
            pb.AgentExtension(uri=HITL_EXTENSION, required=False, description="kagent's human in the loop: a pause's tool calls "
                              "and questions in the status message's metadata, and the reply the same way (agentlink.runs). "
                              "A reply to a pause goes to its task (taskId), its decisions as data parts (application/json) "
                              "or in this metadata; a new task takes text/plain only.")
        ]),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[_skill(agent, spec) for spec in registry.for_agent(agent)],
    )
    card.security_schemes[SCHEME].http_auth_security_scheme.CopyFrom(
        pb.HTTPAuthSecurityScheme(
            scheme="Bearer", description="An API token of the site (its API tokens page); the calls act as its user."
        )
    )
    requirement = card.security_requirements.add()
    requirement.schemes[SCHEME].SetInParent()
    return card


def _skill(agent: Agent, spec) -> pb.AgentSkill:
    gated = bool(spec.needs_approval) or agent.all_tools_need_approval or spec.name in (agent.require_approval or [])
    tags = [f"risk:{spec.risk}"] + (["may ask a human first"] if gated or spec.pause else [])
    return pb.AgentSkill(id=spec.name, name=spec.name, description=spec.description or spec.name, tags=tags)
