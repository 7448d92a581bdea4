"""LangGraph doing section 7's workloads (bench/concurrency.py) for `bench/run.py`: N conversations
started at once, and N waiting for approval then all resumed at once, against the same local model
server (bench/model_server.py, in a process of its own) over HTTP.

One process, one asyncio loop, as a LangGraph service would run it: an async graph whose agent node
calls the model with `openai.AsyncOpenAI` (not streamed; over aiohttp, the transport the openai
client recommends for many requests at once, unless `--http default`), whose tools node pauses
with `interrupt()` before write_file, checkpointed by `AsyncSqliteSaver` on a file and resumed
with `Command(resume=...)`. Runs in the bench virtualenv:

    .venv-bench/bin/python bench/langgraph_concurrency.py --base-url http://127.0.0.1:8901/v1 \
        --starts 10,100 --resume 100 --dir /tmp/x

prints one JSON object: {"peer", "version", "description", "starts": [...], "resume": {...}}.
"""
import argparse
import asyncio
import json
import operator
import os
import sys
import time
import urllib.request
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, TypedDict

TOOLS = [{
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a text file in the sandbox, replacing it if it exists.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]},
    },
}]


class State(TypedDict):
    messages: Annotated[list[dict], operator.add]  # OpenAI chat messages, as the model server reads them


def build_graph(client, sandbox: Path):
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    async def agent(state: State) -> dict:
        response = await client.chat.completions.create(model="gpt-4o-mini", messages=state["messages"], tools=TOOLS)
        message = response.choices[0].message
        turn = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            turn["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                  for c in message.tool_calls]
        return {"messages": [turn]}

    async def tools(state: State) -> dict:
        results = []
        for call in state["messages"][-1]["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            decision = interrupt({"tool": call["function"]["name"], "arguments": arguments})  # the pause
            if decision.get("approved"):
                (sandbox / arguments["path"]).write_text(arguments["content"])
                content = f"Wrote {len(arguments['content'].encode())} bytes to {arguments['path']}."
            else:
                content = f"Rejected: {decision.get('reason', '')}"
            results.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return {"messages": results}

    def route(state: State):
        return "tools" if state["messages"][-1].get("tool_calls") else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def model_stats(base_url: str, reset: bool = False) -> dict:
    root = base_url.rsplit("/v1", 1)[0]
    request = urllib.request.Request(f"{root}/stats", method="POST" if reset else "GET", data=b"" if reset else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def reset_peak_memory() -> None:
    try:
        Path(f"/proc/{os.getpid()}/clear_refs").write_text("5")
    except OSError:
        pass


def cpu_seconds() -> float:
    """This one process's CPU seconds (user + system, all threads): it runs the whole workload."""
    times = os.times()
    return times.user + times.system


def peak_memory_mib() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def start(graph, base_url: str, n: int) -> dict:
    """N graph invocations at once, each a new thread answered in words."""
    tag = uuid.uuid4().hex[:6]
    model_stats(base_url, reset=True)
    reset_peak_memory()
    answered: list[float] = []
    cpu0 = cpu_seconds()
    t0 = time.time()

    async def one(i: int) -> None:
        config = {"configurable": {"thread_id": f"start-{tag}-{i}"}}
        state = await graph.ainvoke({"messages": [{"role": "user", "content": f"hello {tag} {i}"}]}, config)
        assert state["messages"][-1]["role"] == "assistant" and state["messages"][-1]["content"], state["messages"][-1]
        answered.append(time.time() - t0)

    await asyncio.gather(*(one(i) for i in range(n)))
    t_done = time.time()
    cpu_s = cpu_seconds() - cpu0
    stats = model_stats(base_url)
    answered.sort()
    return {"conversations": n, "all_answered_s": t_done - t0, "first_answer_s": answered[0],
            "median_answer_s": answered[len(answered) // 2], "p95_answer_s": answered[max(0, int(n * 0.95) - 1)],
            "model_requests": stats["requests"],
            "model_peak_in_flight": stats["peak_in_flight"], "peak_mib": peak_memory_mib(),
            "cpu_s": cpu_s, "cpu_ms_per_conversation": cpu_s * 1000 / n}


async def resume(graph, base_url: str, n: int, sandbox: Path) -> dict:
    """N threads paused at interrupt() before write_file, then all resumed at once."""
    from langgraph.types import Command

    tag = uuid.uuid4().hex[:6]
    configs = [{"configurable": {"thread_id": f"resume-{tag}-{i}"}} for i in range(n)]
    model_stats(base_url, reset=True)
    cpu0 = cpu_seconds()
    t0 = time.time()

    async def pause(i: int) -> None:
        state = await graph.ainvoke({"messages": [{"role": "user", "content": f"write hi to {tag}a{i}.txt"}]}, configs[i])
        assert state.get("__interrupt__"), state

    await asyncio.gather(*(pause(i) for i in range(n)))
    t_waiting = time.time()
    waiting_cpu_s = cpu_seconds() - cpu0
    waiting_stats = model_stats(base_url)

    model_stats(base_url, reset=True)
    reset_peak_memory()
    finished: list[float] = []
    cpu1 = cpu_seconds()
    t1 = time.time()

    async def approve(i: int) -> None:
        state = await graph.ainvoke(Command(resume={"approved": True}), configs[i])
        assert state["messages"][-1]["content"].startswith("Done:"), state["messages"][-1]
        finished.append(time.time() - t1)

    await asyncio.gather(*(approve(i) for i in range(n)))
    t_done = time.time()
    cpu_s = cpu_seconds() - cpu1
    stats = model_stats(base_url)
    for i in range(n):  # each resume really ran its tool
        assert (sandbox / f"{tag}a{i}.txt").read_text() == "hi"
    finished.sort()
    return {"conversations": n, "all_waiting_s": t_waiting - t0, "waiting_model_peak_in_flight": waiting_stats["peak_in_flight"],
            "all_finished_s": t_done - t1, "first_finished_s": finished[0], "median_finished_s": finished[len(finished) // 2],
            "p95_finished_s": finished[max(0, int(n * 0.95) - 1)],
            "model_requests": stats["requests"], "model_peak_in_flight": stats["peak_in_flight"], "peak_mib": peak_memory_mib(),
            "waiting_cpu_ms_per_conversation": waiting_cpu_s * 1000 / n, "cpu_s": cpu_s, "cpu_ms_per_conversation": cpu_s * 1000 / n}


async def main(args) -> dict:
    import openai
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    sandbox = args.dir / "sandbox"
    sandbox.mkdir(parents=True, exist_ok=True)
    http_client = openai.DefaultAioHttpClient() if args.http == "aiohttp" else None
    client = openai.AsyncOpenAI(base_url=args.base_url, api_key="test", http_client=http_client)
    try:
        async with AsyncSqliteSaver.from_conn_string(str(args.dir / "langgraph-checkpoints.sqlite")) as saver:
            await saver.setup()  # WAL, as hitl's SQLite; and hitl's durability (no fsync per commit), not FULL:
            await saver.conn.execute("PRAGMA synchronous=NORMAL")
            graph = build_graph(client, sandbox).compile(checkpointer=saver)
            await start(graph, args.base_url, 2)  # warm-up: imports, the first connections, the tables
            starts = [await start(graph, args.base_url, n) for n in args.starts]
            resumed = await resume(graph, args.base_url, args.resume, sandbox)
    finally:
        await client.close()
    transport = "aiohttp" if args.http == "aiohttp" else "its default httpx transport"
    return {
        "peer": "LangGraph",
        "version": version("langgraph"),
        "description": f"one process, asyncio; AsyncSqliteSaver on a file (WAL, synchronous=NORMAL as ours); interrupt() + Command(resume=...); "
                       f"openai.AsyncOpenAI {version('openai')} over {transport}, not streamed",
        "starts": starts,
        "resume": resumed,
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the model server, e.g. http://127.0.0.1:8901/v1")
    parser.add_argument("--starts", default="10,100", help="conversations started at once, comma-separated")
    parser.add_argument("--resume", type=int, default=100, help="conversations paused, then resumed at once")
    parser.add_argument("--http", choices=["aiohttp", "default"], default="aiohttp")
    parser.add_argument("--dir", type=Path, required=True, help="a scratch directory (checkpoints, written files)")
    arguments = parser.parse_args()
    arguments.starts = [int(n) for n in arguments.starts.split(",")]
    arguments.dir.mkdir(parents=True, exist_ok=True)
    json.dump(asyncio.run(main(arguments)), sys.stdout)
