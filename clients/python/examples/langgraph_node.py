"""A LangGraph graph with a node that asks hitl before a tool runs.

`review` asks hitl and waits for the decision (made on the page, the dashboard, Telegram, ...).
Approved, `act` runs the tool with the approved arguments (a human may have edited them) and
reports how it went; otherwise `explain` says why not. `plan` stands in for a model choosing a call.

    pip install ./clients/python langgraph
    HITL_URL=http://localhost:8000 HITL_TOKEN=... python langgraph_node.py
"""
import os
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from hitl_client import Client, Decision

hitl = Client(os.environ.get("HITL_URL", "http://localhost:8000"), os.environ["HITL_TOKEN"])
HITL_AGENT = os.environ.get("HITL_AGENT", "outside")  # the hitl agent whose policy and approvers apply (the demo's `outside`: every call asks)


def send_email(to: str, subject: str, body: str) -> str:
    return f"Sent {subject!r} to {to}"  # stands in for the real sending


TOOLS = {"send_email": send_email}


class State(TypedDict, total=False):
    tool: str
    arguments: dict[str, Any]
    decision: Decision
    result: str


def plan(state: State) -> State:
    return {"tool": "send_email", "arguments": {"to": "bob@example.com", "subject": "Q3 numbers", "body": "They are in."}}


def review(state: State) -> State:
    decision = hitl.request_approval(HITL_AGENT, state["tool"], state["arguments"], thread="langgraph")
    return {"decision": decision}


def act(state: State) -> State:
    decision = state["decision"]
    try:
        result = TOOLS[state["tool"]](**decision.arguments)
    except Exception as error:
        hitl.report_outcome(decision, "failed", str(error))
        raise
    hitl.report_outcome(decision, "succeeded", result)
    return {"result": result}


def explain(state: State) -> State:
    decision = state["decision"]
    return {"result": f"Not done: {decision.status} by {decision.decided_by}: {decision.rejection_reason}"}


graph = StateGraph(State)
graph.add_node(plan)
graph.add_node(review)
graph.add_node(act)
graph.add_node(explain)
graph.add_edge(START, "plan")
graph.add_edge("plan", "review")
graph.add_conditional_edges("review", lambda state: "act" if state["decision"].approved else "explain", ["act", "explain"])
graph.add_edge("act", END)
graph.add_edge("explain", END)
app = graph.compile()

if __name__ == "__main__":
    print(app.invoke({})["result"])
