"""Section 7's rows and targets in bench/run.py's table (the figures come from bench/concurrency.py)."""
from bench.concurrency import failed_anything


def _fmt(value: float, digits: int = 1) -> str:
    if value is None or value != value:
        return "—"
    return f"{value:.{digits}f}" if value < 1000 else f"{value:,.0f}"


def _langgraph_by_size(results: dict) -> dict:
    return {each["conversations"]: each for each in (results.get("langgraph") or {}).get("starts", [])}


def concurrency_report(results: dict) -> list[str]:
    lines: list[str] = []
    add = lines.append
    worker, latency = results["worker"], results["latency_s"]
    lg = results.get("langgraph")
    lg_starts = _langgraph_by_size(results)
    add("7. Many people at once: conversations started together through POST /api/conversations (asyncio + httpx,")
    add(f"   {results['client_in_flight']} requests in flight), on a model answering after {latency:g} s (bench/model_server.py, its own process);")
    processes = worker.get("processes", 1)
    add(f"   the worker as `make run` starts the Procfile's line, {processes} × `{worker['command']}`: {worker['pool']} pool,"
        f" concurrency {worker['concurrency']} each (ready and warm {_fmt(worker['ready_s'])} s after its start)")
    row = "  {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8} {:>10} {:>9}"
    head = ("N", "POSTs, s", "p50, s", "p95, s", "all, s", "failed", "model", "worker", "daphne", "LangGraph", "ours ÷")
    sub = ("", "", "", "", "", "", "peak", "MiB", "MiB", "all, s", "LangGraph")
    add(row.format(*head))
    add(row.format(*sub))
    for each in results["starts"]:
        other = lg_starts.get(each["conversations"])
        add(row.format(each["conversations"], _fmt(each["posted_s"], 2), _fmt(each["median_answer_s"], 2),
                       _fmt(each.get("p95_answer_s"), 2), _fmt(each["all_answered_s"], 2), _failed(each["failures"]),
                       each["model_peak_in_flight"], _fmt(each["worker_memory"]["peak_mib"], 0),
                       _fmt(each["daphne_memory"]["peak_mib"], 0), _fmt(other["all_answered_s"], 2) if other else "—",
                       f"{each['all_answered_s'] / other['all_answered_s']:.2f}" if other else "—"))
    if "alone" in results:
        alone = results["alone"]
        add(f"  one conversation alone, on the idle stack: its POST {_fmt(alone['post_ms']['p50'], 0)} ms, answered after "
            f"{_fmt(alone['answered_s']['p50'], 2)} s (p50 of {alone['answered_s']['n']})")
    add("  one POST /api/conversations, ms (p50 / p95): " + "; ".join(
        f"N={each['conversations']}: {_fmt(each['post_ms']['p50'], 0)} / {_fmt(each['post_ms']['p95'], 0)}" for each in results["starts"]))
    r = results["resume"]
    lg_r = (lg or {}).get("resume")
    lg_waiting = f"; LangGraph {_fmt(lg_r['all_waiting_s'], 2)} s" if lg_r else ""
    add(f"  resume: {r['conversations']} started with \"write hi to …\" until all wait for approval ({_fmt(r['all_waiting_s'], 2)} s, "
        f"{_failed(r['waiting_failures'])} failed{lg_waiting}),")
    add(f"  then approve-all (POST /api/approvals/decisions, 1000 ids a request, answered after {_fmt(r['decisions_submitted_s'], 2)} s);")
    add("  each resume runs write_file and one model call; seconds from the approve-all POST:")
    add(row.format(*head))
    add(row.format(*sub))
    add(row.format(r.get("approved", r["conversations"]), "", _fmt(r["median_finished_s"], 2), _fmt(r.get("p95_finished_s"), 2),
                   _fmt(r["all_finished_s"], 2), _failed(r["failures"]), r["model_peak_in_flight"],
                   _fmt(r["worker_memory"]["peak_mib"], 0), _fmt(r["daphne_memory"]["peak_mib"], 0),
                   _fmt(lg_r["all_finished_s"], 2) if lg_r else "—",
                   f"{r['all_finished_s'] / lg_r['all_finished_s']:.2f}" if lg_r else "—"))
    add("  (POSTs: until the last POST was answered; p50, p95, all: until half, 95 % and all of them were idle with their")
    add("   answer, from the first POST; failed: POSTs not answered 201, conversations failed or never finished; model peak:")
    add("   most model calls in flight at once; MiB: peak RSS (VmHWM, reset before each run) of the biggest process that runs")
    add("   tasks (a worker, or the biggest pool child, if prefork) and of daphne)")
    s = results["stream"]
    frames = s.get("frames") or []
    if s.get("socket_errors"):
        add(f"  streaming: {len(s['socket_errors'])} of the probe sockets could not connect: {s['socket_errors'][0][:100]}")
    if frames:
        add(f"  streaming: {s['conversations']} started at once on a model streaming {s['tokens_per_second']:g} tokens/s: all answered after "
            f"{_fmt(s['all_answered_s'], 2)} s; streamed-text frames on {len(frames)} conversations' sockets:")
        add("    " + "; ".join(f"{f['stream_frames']} over {_fmt(f['stream_span_s'], 2)} s = {_fmt(f['per_second'])}/s, "
                               f"closest two {_fmt(f['min_gap_ms'], 0)} ms apart" for f in frames))
    if lg:
        peaks = [each.get("peak_mib", 0) for each in lg["starts"]] + [lg["resume"].get("peak_mib", 0)]
        add(f"  LangGraph {lg['version']}: {lg['description']}; peak RSS of its one process {_fmt(max(peaks), 0)} MiB")
    else:
        add("  (LangGraph skipped)")
    for line in failed_anything(results):
        add(f"  {line}")
    logs = results.get("logs") or {}
    add("  logged during section 7: " + "; ".join(
        f"{name}: " + ", ".join(f"{count} {key}" for key, count in found["counts"].items()) for name, found in logs.items()))
    for name, found in logs.items():
        for sample in found["samples"][:3]:
            add(f"    {name}: {sample[:160]}")
    return lines


def _failed(failed: dict) -> str:
    return str(failed["posts"] + failed["conversations"] + failed.get("unfinished", 0))


def concurrency_targets(results: dict) -> list[dict]:
    targets = []
    latency = results["latency_s"]
    starts = {each["conversations"]: each for each in results["starts"]}
    lg_starts = _langgraph_by_size(results)
    biggest = max(starts)
    if 100 in starts:
        t = starts[100]["all_answered_s"]
        targets.append({"what": f"100 conversations started at once on a {latency:g} s model all answered in < 9 s", "ok": t < 9,
                        "figure": f"{_fmt(t, 2)} s"})
    else:
        targets.append({"what": f"100 conversations started at once on a {latency:g} s model all answered in < 9 s", "ok": None,
                        "figure": f"not run (largest: {biggest}, {_fmt(starts[biggest]['all_answered_s'], 2)} s)"})
    what = f"1000 started at once on a {latency:g} s model all answered in < 10 s and ≤ 1.5× LangGraph"
    if 1000 in starts:
        t = starts[1000]["all_answered_s"]
        other = lg_starts.get(1000)
        if other:
            ratio = t / other["all_answered_s"]
            targets.append({"what": what, "ok": t < 10 and ratio <= 1.5,
                            "figure": f"{_fmt(t, 2)} s vs LangGraph {_fmt(other['all_answered_s'], 2)} s ({ratio:.2f}×)"})
        else:
            targets.append({"what": what, "ok": False if t >= 10 else None, "figure": f"{_fmt(t, 2)} s (no LangGraph in this run)"})
    else:
        targets.append({"what": what, "ok": None, "figure": f"not run (largest: {biggest})"})
    r = results["resume"]
    note = "" if r["conversations"] >= 1000 else f" (only {r['conversations']} conversations in this run)"
    targets.append({"what": f"1000 waiting, approve-all, {latency:g} s model: all finished in < 10 s",
                    "ok": r["all_finished_s"] < 10 if r["conversations"] >= 1000 else None,
                    "figure": f"{_fmt(r['all_finished_s'], 2)} s{note}"})
    frames = results["stream"].get("frames") or []
    rates = [f["per_second"] for f in frames if f["per_second"] == f["per_second"]]
    if rates:
        # 50 ms batching allows 20 a second as sent; 5 % more for when they arrive (jitter on a loaded machine)
        targets.append({"what": "streamed text ≤ 20 frames/s on a conversation's socket (50 ms batching; +5 % arrival jitter)",
                        "ok": max(rates) <= 21, "figure": f"at most {_fmt(max(rates))}/s over {len(rates)} sockets"})
    peak = max(each["worker_memory"]["peak_mib"] for each in [*results["starts"], r])
    daphne = max(each["daphne_memory"]["peak_mib"] for each in [*results["starts"], r])
    lg = results.get("langgraph")
    lg_peak = ""
    if lg:
        lg_mib = max([each.get("peak_mib", 0) for each in lg["starts"]] + [lg["resume"].get("peak_mib", 0)])
        lg_peak = f"; LangGraph's one process {_fmt(lg_mib, 0)} MiB"
    targets.append({"what": "peak memory per process in section 7", "ok": "info",
                    "figure": f"worker {_fmt(peak, 0)} MiB ({results['worker']['pool']} pool), daphne {_fmt(daphne, 0)} MiB{lg_peak}"})
    return targets
