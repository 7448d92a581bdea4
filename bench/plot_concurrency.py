"""Time to answer all N conversations started at once, against N, for hitl and LangGraph, as a PNG
(section 7 of bench/run.py). Runs in the bench virtualenv (matplotlib):

    .venv-bench/bin/python bench/plot_concurrency.py results.json docs/bench-concurrency.png
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(data_path: str, out_path: str) -> None:
    data = json.loads(Path(data_path).read_text())
    results = data["concurrency"]
    ours = sorted(results["starts"], key=lambda p: p["conversations"])
    if not ours:
        raise SystemExit("nothing to plot")
    latency = results["latency_s"]
    worker = results["worker"]
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=120)
    x = [p["conversations"] for p in ours]
    ax.plot(x, [p["all_answered_s"] for p in ours], "o-", color="tab:blue",
            label=f"hitl: all answered (worker: {worker['pool']} pool × {worker['concurrency']})")
    ax.plot(x, [p.get("p95_answer_s", p["median_answer_s"]) for p in ours], "--", color="tab:blue", alpha=0.6,
            label="hitl: 95 % answered")
    ax.plot(x, [p["posted_s"] for p in ours], ":", color="tab:blue", alpha=0.8, label="hitl: all POSTs answered")
    langgraph = (results.get("langgraph") or {}).get("starts") or []
    if langgraph:
        lg = sorted(langgraph, key=lambda p: p["conversations"])
        version = results["langgraph"]["version"]
        ax.plot([p["conversations"] for p in lg], [p["all_answered_s"] for p in lg], "s-", color="tab:orange",
                label=f"LangGraph {version}: all answered (one asyncio process)")
        ax.plot([p["conversations"] for p in lg], [p.get("p95_answer_s", p["median_answer_s"]) for p in lg], "--",
                color="tab:orange", alpha=0.6, label="LangGraph: 95 % answered")
    ax.axhline(latency, color="gray", linestyle=":", label=f"the model's latency ({latency:g} s)")
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(x)
    ax.set_xticklabels([str(n) for n in x])
    ax.set_xlabel("conversations started at once")
    ax.set_ylabel("seconds from the first request (log scale)")
    ax.set_yscale("log")  # a few stalled conversations can take minutes: the rest must stay readable
    ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= 2 * max(p["all_answered_s"] for p in ours)]
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(t) for t in ticks])
    ax.set_ylim(0.4, None)
    m = data["machine"]
    ax.set_title(f"Time to answer N conversations started at once, model latency {latency:g} s "
                 f"({m['nproc']} cores, {data['started']})", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    fig.tight_layout()
    fig.savefig(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
