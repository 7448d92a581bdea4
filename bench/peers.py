"""The same human-in-the-loop cycle in three other agent frameworks, offline, for `bench/run.py`.

Runs in the bench virtualenv (.venv-bench, from requirements-bench.txt), never in the app's. Each
peer does what hitl does for "write hi to a.txt": a fake model emits one `write_file` call, the
framework stops for approval, the paused state goes to a file, a fresh object reads it back, the
call is approved, the tool writes the file and the fake model answers in words.

    .venv-bench/bin/python bench/peers.py langgraph --iterations 30 --dir /tmp/x

prints one JSON object: {"peer", "version", "durable", "cycle_ms": [...], "pause_ms": [...], "resume_ms": [...]}.
"""
import argparse
import asyncio
import json
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path

USER_TEXT = "write hi to {name}"
FINAL = "I did write {path}: Wrote {n} bytes to {path}."


def write_file(sandbox: Path, path: str, content: str) -> str:
    """The tool every peer runs once approved: the same effect as hitl's write_file."""
    target = sandbox / path
    target.write_text(content)
    return f"Wrote {len(content.encode())} bytes to {path}."


# --- LangGraph: interrupt() + Command(resume=...), SQLite checkpointer on a file ------------------


def langgraph_peer(iterations: int, work: Path) -> dict:
    import sqlite3
    from typing import Any

    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import Command, interrupt

    class FakeChat(BaseChatModel):
        """Like the scripted model: a user message → one write_file call; a tool result → words."""

        @property
        def _llm_type(self) -> str:
            return "fake-scripted"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
            last = messages[-1]
            if isinstance(last, ToolMessage):
                message = AIMessage(content=f"I did write {last.name}: {last.content}")
            else:
                name = str(last.content).rsplit(" ", 1)[-1]
                message = AIMessage(
                    content="",
                    tool_calls=[{"id": f"call_{uuid.uuid4().hex[:8]}", "name": "write_file",
                                 "args": {"path": name, "content": "hi"}}],
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

    model = FakeChat()

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState):
        results = []
        for call in state["messages"][-1].tool_calls:
            decision = interrupt({"tool": call["name"], "args": call["args"]})  # the pause
            if decision.get("approved"):
                content = write_file(work, **call["args"])
            else:
                content = f"Rejected: {decision.get('reason', '')}"
            results.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["args"]["path"]))
        return {"messages": results}

    def route(state: MessagesState):
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")

    db = work / "langgraph-checkpoints.sqlite"
    with sqlite3.connect(db) as setup:
        SqliteSaver(setup).setup()

    def open_graph():
        connection = sqlite3.connect(db, check_same_thread=False)
        return connection, builder.compile(checkpointer=SqliteSaver(connection))

    def cycle(i: int):
        config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}"}}
        t0 = time.perf_counter()
        connection, graph = open_graph()
        paused = graph.invoke({"messages": [HumanMessage(USER_TEXT.format(name=f"lg{i}.txt"))]}, config)
        assert paused.get("__interrupt__"), paused
        connection.close()  # the process could stop here: the state is in the file
        t1 = time.perf_counter()
        connection, graph = open_graph()  # a freshly opened graph resumes from the checkpoint
        done = graph.invoke(Command(resume={"approved": True}), config)
        connection.close()
        t2 = time.perf_counter()
        assert done["messages"][-1].content.startswith("I did write"), done["messages"][-1]
        assert (work / f"lg{i}.txt").read_text() == "hi"
        return t0, t1, t2

    return run_cycles(cycle, iterations) | {"peer": "LangGraph", "version": version("langgraph"), "durable": True,
                                           "state": "SqliteSaver checkpoint file"}


# --- Pydantic AI: deferred tools (requires_approval), message history as JSON on a file ----------------


def pydantic_ai_peer(iterations: int, work: Path) -> dict:
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def fake_model(messages, info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"I did write: {last.content}")])
        name = str(last.content).rsplit(" ", 1)[-1]
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": name, "content": "hi"},
                                                 tool_call_id=f"call_{uuid.uuid4().hex[:8]}")])

    agent = Agent(FunctionModel(fake_model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True, name="write_file")
    def write_file_tool(path: str, content: str) -> str:
        return write_file(work, path, content)

    def cycle(i: int):
        state = work / f"pydantic-ai-{uuid.uuid4().hex}.json"
        t0 = time.perf_counter()
        paused = agent.run_sync(USER_TEXT.format(name=f"pa{i}.txt"))
        assert isinstance(paused.output, DeferredToolRequests), paused.output
        state.write_bytes(ModelMessagesTypeAdapter.dump_json(paused.all_messages()))
        t1 = time.perf_counter()
        history = ModelMessagesTypeAdapter.validate_json(state.read_bytes())
        pending = [part for part in history[-1].parts if isinstance(part, ToolCallPart)]
        results = DeferredToolResults(approvals={part.tool_call_id: True for part in pending})
        done = agent.run_sync(message_history=history, deferred_tool_results=results)
        t2 = time.perf_counter()
        assert isinstance(done.output, str) and done.output.startswith("I did write"), done.output
        assert (work / f"pa{i}.txt").read_text() == "hi"
        return t0, t1, t2

    return run_cycles(cycle, iterations) | {"peer": "Pydantic AI", "version": version("pydantic-ai-slim"),
                                           "durable": False, "state": "message history JSON file"}


# --- OpenAI Agents SDK: needs_approval, RunState to JSON and back -------------------------------------


def openai_agents_peer(iterations: int, work: Path) -> dict:
    from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)  # offline: nothing is exported

    class FakeModel(Model):
        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                               tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kwargs):
            items = input if isinstance(input, list) else [{"role": "user", "content": input}]
            last = items[-1]
            last_type = last.get("type") if isinstance(last, dict) else getattr(last, "type", None)
            if last_type == "function_call_output":
                text = f"I did write: {last['output'] if isinstance(last, dict) else last.output}"
                output = [ResponseOutputMessage(
                    id=f"msg_{uuid.uuid4().hex[:8]}", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )]
            else:
                content = last["content"] if isinstance(last, dict) else last.content
                name = str(content).rsplit(" ", 1)[-1]
                output = [ResponseFunctionToolCall(
                    id=f"fc_{uuid.uuid4().hex[:8]}", call_id=f"call_{uuid.uuid4().hex[:8]}", type="function_call",
                    name="write_file", arguments=json.dumps({"path": name, "content": "hi"}), status="completed",
                )]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    @function_tool(needs_approval=True)
    def write_file_tool(path: str, content: str) -> str:
        """Write text to a file in the sandbox."""
        return write_file(work, path, content)

    write_file_tool.name = "write_file"
    agent = Agent(name="writer", instructions="You write files.", model=FakeModel(), tools=[write_file_tool])

    async def cycle_async(i: int):
        state_file = work / f"openai-agents-{uuid.uuid4().hex}.json"
        t0 = time.perf_counter()
        paused = await Runner.run(agent, USER_TEXT.format(name=f"oa{i}.txt"))
        assert paused.interruptions, paused
        state_file.write_text(paused.to_state().to_string())
        t1 = time.perf_counter()
        state = await RunState.from_string(agent, state_file.read_text())
        for item in state.get_interruptions():
            state.approve(item)
        done = await Runner.run(agent, state)
        t2 = time.perf_counter()
        assert str(done.final_output).startswith("I did write"), done.final_output
        assert (work / f"oa{i}.txt").read_text() == "hi"
        return t0, t1, t2

    loop = asyncio.new_event_loop()
    result = run_cycles(lambda i: loop.run_until_complete(cycle_async(i)), iterations)
    loop.close()
    return result | {"peer": "OpenAI Agents SDK", "version": version("openai-agents"), "durable": False,
                     "state": "RunState JSON file"}


def run_cycles(cycle, iterations: int) -> dict:
    warm_up = max(2, iterations // 10)
    for i in range(warm_up):
        cycle(-1 - i)
    cycles, pauses, resumes = [], [], []
    for i in range(iterations):
        t0, t1, t2 = cycle(i)
        cycles.append((t2 - t0) * 1000)
        pauses.append((t1 - t0) * 1000)
        resumes.append((t2 - t1) * 1000)
    return {"cycle_ms": cycles, "pause_ms": pauses, "resume_ms": resumes}


PEERS = {"langgraph": langgraph_peer, "pydantic-ai": pydantic_ai_peer, "openai-agents": openai_agents_peer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--dir", type=Path, required=True, help="a scratch directory (state files, written files)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    result = PEERS[args.peer](args.iterations, args.dir)
    json.dump(result | {"python": sys.version.split()[0]}, sys.stdout)


if __name__ == "__main__":
    main()
