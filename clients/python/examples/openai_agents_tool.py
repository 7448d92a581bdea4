"""An OpenAI Agents SDK tool whose `needs_approval` asks hitl.

`needs_approval` asks hitl without waiting: a call hitl approves at once (the agent's policy, an
allow rule) runs with no pause; any other pauses the run the SDK's way (`result.interruptions`).
The loop in `main` waits for the human's decision in hitl, approves or rejects the interruption
with it, and resumes; the tool runs the approved arguments (a human may have edited them) and
reports how it went.

    pip install ./clients/python openai-agents
    HITL_URL=http://localhost:8000 HITL_TOKEN=... OPENAI_API_KEY=... python openai_agents_tool.py
"""
import asyncio
import os
from typing import Any

from agents import Agent, RunContextWrapper, Runner, function_tool
from agents.tool_context import ToolContext

from hitl_client import AsyncClient, Decision

hitl = AsyncClient(os.environ.get("HITL_URL", "http://localhost:8000"), os.environ["HITL_TOKEN"])
HITL_AGENT = os.environ.get("HITL_AGENT", "outside")  # the hitl agent whose policy and approvers apply (the demo's `outside`: every call asks)
asked: dict[str, Decision] = {}  # the SDK's call id -> hitl's approval of that call


def deliver(to: str, subject: str, body: str) -> str:
    return f"Sent {subject!r} to {to}"  # stands in for the real sending


async def ask_hitl(context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
    decision = await hitl.request_approval(
        HITL_AGENT, "send_email", arguments, reason="The mailer agent wants to send this", thread="openai-agents", wait=False
    )
    asked[call_id] = decision
    return not decision.approved  # pause unless hitl approved it at once


@function_tool(needs_approval=ask_hitl)  # no defaults: the SDK hands ask_hitl the arguments as sent
async def send_email(context: ToolContext[Any], to: str, subject: str, body: str) -> str:
    """Send an email."""
    decision = asked[context.tool_call_id]
    try:
        result = deliver(**decision.arguments)  # as approved: a human may have edited them
    except Exception as error:
        await hitl.report_outcome(decision, "failed", str(error))
        raise
    await hitl.report_outcome(decision, "succeeded", result)
    return result


agent = Agent(name="Mailer", instructions="Send the emails the user asks for.", tools=[send_email])


async def main(prompt: str = "Email bob@example.com that the Q3 numbers are in.") -> str:
    result = await Runner.run(agent, prompt)
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            decision = asked[item.call_id] = await hitl.wait(asked[item.call_id])
            if decision.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=f"Not sent: {decision.status} by {decision.decided_by}: {decision.rejection_reason}")
        result = await Runner.run(agent, state)
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(main()))
