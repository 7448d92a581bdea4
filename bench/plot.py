"""Latency against the number of conversations already waiting for approval, as a PNG.

Runs in the bench virtualenv (matplotlib): `bench/run.py` calls it with the figures of its run.

    .venv-bench/bin/python bench/plot.py results.json docs/bench-latency.png
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(data_path: str, out_path: str) -> None:
    data = json.loads(Path(data_path).read_text())
    series = sorted(data["series"], key=lambda p: p["waiting"])
    if not series:
        raise SystemExit("no series to plot")
    x = [max(p["waiting"], 1) for p in series]  # log axis: 0 waiting is drawn at 1
    fig, ax = plt.subplots(figsize=(8, 5.6), dpi=120)
    for key, label, color in (("gate", "gate: requested_at → card", "tab:blue"),
                              ("decision", "decision POST → final answer", "tab:orange"),
                              ("cycle", "whole cycle", "tab:green")):
        ax.plot(x, [p[key]["p50"] for p in series], "o-", color=color, label=f"{label} (p50)")
        ax.plot(x, [p[key]["p95"] for p in series], "--", color=color, alpha=0.6, label=f"{label} (p95)")
    ax.plot(x, [p["one_hop_floor"]["p50"] for p in series], ":", color="gray", label="one-hop floor (p50)")
    ax.plot(x, [p["push_floor"]["p50"] for p in series], ":", color="black", label="Channels push floor (p50)")
    ax.set_xscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([str(p["waiting"]) for p in series])
    ax.set_xlabel("conversations already waiting for approval")
    ax.set_ylabel("ms")
    top = max(max(p[k]["p95"] for k in ("gate", "decision", "cycle")) for p in series)
    ax.set_ylim(0, top * 1.08)
    m = data["machine"]
    ax.set_title(f"hitl latency vs waiting conversations ({m['nproc']} cores, {data['started']})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=3, frameon=False)
    fig.tight_layout()
    fig.savefig(out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
