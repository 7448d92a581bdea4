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
    lines.extend(cpu_report(results))
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


START_CPU_TARGET_MS = 20  # issue 24: CPU per conversation summed over our processes, a start
RESUME_CPU_TARGET_MS = 25  # and a resume (approve-all: the decision POST, the tool, one more model call)


def _workloads(results: dict) -> list[tuple[str, dict, dict | None, str]]:
    """(name, our figures with "cpu" and "counts", LangGraph's figures or None, the target) for each
    workload that was measured."""
    lg = results.get("langgraph") or {}
    lg_starts = _langgraph_by_size(results)
    rows = [(f"start {each['conversations']}", each, lg_starts.get(each["conversations"]), f"≤ {START_CPU_TARGET_MS}")
            for each in results["starts"]]
    s = results.get("stream")
    if s and "cpu" in s:
        rows.append((f"start {s['conversations']}, streaming", s, None, ""))
    r = results["resume"]
    lg_r = lg.get("resume")
    if "waiting_cost" in r:
        lg_waiting = {"cpu_ms_per_conversation": lg_r["waiting_cpu_ms_per_conversation"]} if lg_r and "waiting_cpu_ms_per_conversation" in lg_r else None
        rows.append((f"start {r['conversations']} to approval", r["waiting_cost"], lg_waiting, f"≤ {START_CPU_TARGET_MS}"))
    if "cpu" in r:
        rows.append((f"resume {r.get('approved', r['conversations'])} (approve-all)", r, lg_r, f"≤ {RESUME_CPU_TARGET_MS}"))
    return [row for row in rows if "cpu" in row[1]]


def cpu_report(results: dict) -> list[str]:
    """CPU per conversation per process, their sum beside the target and LangGraph's one process; then
    the workers' statements and pushes per step, counted."""
    rows = _workloads(results)
    if not rows:
        return []
    names = list(rows[0][1]["cpu"]["per_process_ms"])
    lines = ["  CPU per conversation, ms (utime+stime from /proc/<pid>/stat of each of our processes, pool children with their",
             "  worker, before and after each workload, the stack settled both times; LangGraph: its one process, os.times()):"]
    row = "    {:<30}" + " {:>8}" * (len(names) + 4)
    lines.append(row.format("workload", *names, "sum", "target", "LangGraph", "ours ÷"))
    for name, ours, theirs, target in rows:
        cpu = ours["cpu"]
        lg_ms = theirs.get("cpu_ms_per_conversation") if theirs else None
        lines.append(row.format(name, *(_fmt(cpu["per_process_ms"].get(n), 1) for n in names), _fmt(cpu["sum_ms"], 1),
                                target or "", _fmt(lg_ms, 1) if lg_ms is not None else "—",
                                f"{cpu['sum_ms'] / lg_ms:.1f}×" if lg_ms else "—"))
    counted = [(name, ours["counts"]) for name, ours, _, _ in rows if ours.get("counts")]
    if counted:
        lines.append("  the workers' loop tasks, counted (bench/counts.py): SQL statements and pushes per step (chat.loop._step)")
        lines.append("  and per conversation:")
        row = "    {:<30} {:>7} {:>7} {:>11} {:>9} {:>11} {:>9}"
        lines.append(row.format("workload", "tasks", "steps", "statements", "pushes", "statements", "pushes"))
        lines.append(row.format("", "", "", "a step", "a step", "a conv.", "a conv."))
        for name, c in counted:
            lines.append(row.format(name, c["tasks"], c["steps"], _fmt(c["statements_per_step"], 1), _fmt(c["pushes_per_step"], 1),
                                    _fmt(c["statements_per_conversation"], 1), _fmt(c["pushes_per_conversation"], 1)))
    return lines


def cpu_targets(results: dict) -> list[dict]:
    """Issue 24's CPU targets: summed over our processes, start ≤ 20 ms and resume ≤ 25 ms a conversation."""
    targets = []
    starts = [(each["conversations"], each) for each in results["starts"] if "cpu" in each]
    lg_starts = _langgraph_by_size(results)
    if starts:
        n, biggest = max(starts, key=lambda pair: pair[0])
        lg = lg_starts.get(n)
        lg_text = f"; LangGraph {_fmt(lg['cpu_ms_per_conversation'], 1)} ms" if lg and "cpu_ms_per_conversation" in lg else ""
        all_sizes = ", ".join(f"{size}: {_fmt(each['cpu']['sum_ms'], 1)}" for size, each in starts)
        targets.append({"what": f"CPU per conversation started, summed over our processes: ≤ {START_CPU_TARGET_MS} ms",
                        "ok": biggest["cpu"]["sum_ms"] <= START_CPU_TARGET_MS,
                        "figure": f"{_fmt(biggest['cpu']['sum_ms'], 1)} ms at N={n} (N: ms {all_sizes}){lg_text}"})
    r = results["resume"]
    if "cpu" in r:
        lg_r = (results.get("langgraph") or {}).get("resume")
        lg_text = f"; LangGraph {_fmt(lg_r['cpu_ms_per_conversation'], 1)} ms" if lg_r and "cpu_ms_per_conversation" in lg_r else ""
        targets.append({"what": f"CPU per conversation resumed (approve-all), summed over our processes: ≤ {RESUME_CPU_TARGET_MS} ms",
                        "ok": r["cpu"]["sum_ms"] <= RESUME_CPU_TARGET_MS,
                        "figure": f"{_fmt(r['cpu']['sum_ms'], 1)} ms over {r.get('approved', r['conversations'])}{lg_text}"})
    return targets


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
    # Issue 24's: under 15 s, and within 1.5× LangGraph's time in the same run.
    what = f"1000 started at once on a {latency:g} s model all answered in < 15 s and ≤ 1.5× LangGraph"
    if 1000 in starts:
        t = starts[1000]["all_answered_s"]
        other = lg_starts.get(1000)
        if other:
            ratio = t / other["all_answered_s"]
            targets.append({"what": what, "ok": t < 15 and ratio <= 1.5,
                            "figure": f"{_fmt(t, 2)} s vs LangGraph {_fmt(other['all_answered_s'], 2)} s ({ratio:.2f}×)"})
        else:
            targets.append({"what": what, "ok": False if t >= 15 else None, "figure": f"{_fmt(t, 2)} s (no LangGraph in this run)"})
    else:
        targets.append({"what": what, "ok": None, "figure": f"not run (largest: {biggest})"})
    r = results["resume"]
    lg_r = (results.get("langgraph") or {}).get("resume")
    what = f"1000 waiting, approve-all, {latency:g} s model: all finished within 1.5× LangGraph"
    if r["conversations"] < 1000:
        targets.append({"what": what, "ok": None, "figure": f"{_fmt(r['all_finished_s'], 2)} s (only {r['conversations']} conversations in this run)"})
    elif lg_r:
        ratio = r["all_finished_s"] / lg_r["all_finished_s"]
        targets.append({"what": what, "ok": ratio <= 1.5,
                        "figure": f"{_fmt(r['all_finished_s'], 2)} s vs LangGraph {_fmt(lg_r['all_finished_s'], 2)} s ({ratio:.2f}×)"})
    else:
        targets.append({"what": what, "ok": None, "figure": f"{_fmt(r['all_finished_s'], 2)} s (no LangGraph in this run)"})
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
    targets.extend(cpu_targets(results))
    targets.append({"what": "peak memory per process in section 7", "ok": "info",
                    "figure": f"worker {_fmt(peak, 0)} MiB ({results['worker']['pool']} pool), daphne {_fmt(daphne, 0)} MiB{lg_peak}"})
    return targets
