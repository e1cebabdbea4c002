"""The restart storm's verdicts and reports: the assertions on one lameduck run, a run's
tables (per load; per service chain), the summary table of every run side by side with the
references, and the JSON summary (--json)."""

import json
import shutil

import harness as h
from storm import chains as ch

# The oneshot client must reach this share of --rate.
RATE_SHARE = 0.95
LOAD_ORDER = ["wrk", "probe", "h2c", "oneshot", "watch", "h2-tls", "grpc"]


def chain_summary(chain):
    times = sorted(chain.restart_s)
    return {
        "port": chain.port,
        "generations": len(chain.records),
        "restarts": chain.restarts,
        "exits": ch.log_exits(chain),
        "restart_s": {"median": times[len(times) // 2], "max": times[-1]} if times else None,
        "growth_q2_q4": ch.growth(chain),
        "records": chain.records,
    }


def count_kinds(run, word):
    """Failures whose kind contains `word`, over every load (wrk's connect errors count as
    refusals)."""
    n = 0
    for r in run["loads"]:
        for kind, v in r["failed"].items():
            if word in kind or (word == "refused" and r["load"] == "wrk" and kind == "connect"):
                n += v
    return n


def load_of(run, name):
    return next((r for r in run["loads"] if r["load"] == name), None)


def tally(run):
    """The run's refusals, resets and retries over every load."""
    run["refused"], run["resets"] = count_kinds(run, "refused"), count_kinds(run, "reset")
    run["retried"] = sum(r["retried"] for r in run["loads"])


def check_lameduck(run, a):
    """Appends to run["problems"] what the storm proves wrong; notes the rest."""
    problems, notes = run["problems"], run["notes"]
    for r in run["loads"]:
        failed = sum(r["failed"].values())
        if failed:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["failed"].items()))
            problems.append(f"{r['load']}: {failed} failed ({kinds}), want 0" + "".join(
                f"\n        e.g. {k}: {ex}" for k, ex in sorted(r["examples"].items())))
        if r["ok"] == 0:
            problems.append(f"{r['load']}: no request succeeded (the load did not run)")
    tally(run)
    refused = run["refused"]
    if refused:
        problems.append(f"{refused} connections refused, want 0")
    for k, v in run["listen"].items():
        if v:
            problems.append(f"TcpExt{k} grew by {v} during the run, want 0 (namespace-wide counter)")
    retried = run["retried"]
    if retried > a.max_retries:
        problems.append(f"{retried} retries, more than --max-retries {a.max_retries}")
    rs = run.get("restarts") or {}
    if rs.get("done", 0) < rs.get("planned", 0):
        problems.append(f"{rs['done']} of {rs['planned']} restarts done")
    if rs.get("late_ticks"):
        notes.append(f"{rs['late_ticks']} restarts began more than half an interval late (a slow restart or CPU starvation)")
    one = load_of(run, "oneshot")
    if one and one["info"].get("achieved_rate") is not None:
        got = one["info"]["achieved_rate"]
        if got < RATE_SHARE * a.rate:
            problems.append(f"oneshot: {got:.0f} new connections/s, want at least {RATE_SHARE:.0%} of {a.rate}/s")
    watch = load_of(run, "watch")
    if watch and watch["ok"] < run.get("restarts", {}).get("done", 0):
        notes.append(f"watch: {watch['ok']} streams ended cleanly over {rs.get('done')} restarts")


def cell(r):
    """ok/failed of one load, with its retries."""
    if r is None:
        return "-"
    text = f"{r['ok']}/{sum(r['failed'].values())}"
    return text + (f" r{r['retried']}" if r["retried"] else "")


def log_run(run, keep):
    """Prints one run: its loads, its services' generations, the kernel counters, notes and
    problems; removes its directory unless it failed or `keep`."""
    rows = []
    for r in sorted(run["loads"], key=lambda r: LOAD_ORDER.index(r["load"])):
        info = r["info"]
        extra = []
        if "achieved_rate" in info:
            extra.append(f"{info['achieved_rate']:.1f}/s of {info['rate']}/s, {info['attempted']} attempted, "
                         f"at most {info['max_in_flight']} in flight")
        if info.get("retries_by_status") or info.get("retries_by_kind"):
            extra.append(f"retries {info.get('retries_by_status') or info.get('retries_by_kind')}")
        for k in ("dials", "goaway_conns", "lines", "open_at_end", "clean_closes"):
            if info.get(k) is not None:
                extra.append(f"{k} {info[k]}")
        rows.append([r["load"], r["ok"], ", ".join(f"{k} {v}" for k, v in sorted(r["failed"].items())) or "0",
                     r["retried"], "; ".join(extra)])
    if rows:
        h.log(h.table(["load", "ok", "failed (by kind)", "retried", ""], rows))
    if run["kind"] == "reference":  # a lameduck run lists them with its problems
        for r in run["loads"]:
            for k, ex in sorted(r["examples"].items()):
                h.log(f"    e.g. {r['load']} {k}: {ex}")
    for name, g in run["generations"].items():
        if "records" in g:
            rs = g["restart_s"]
            h.log(f"    {name}: 127.0.0.1:{g['port']}, {g['generations']} generations, exits {g['exits']}, restart "
                  + ("-" if rs is None else f"median {rs['median']:.3f}s max {rs['max']:.3f}s")
                  + "; medians 2nd->last quarter: " + fmt_growth(g["growth_q2_q4"]))
        else:
            h.log(f"    {name}: {g['reloads_sent']} reloads sent, {g['reloads_logged']} in its log; old workers' "
                  f"exits {g['exits']}" + (f"; reload errors {g['reload_errors']}" if g["reload_errors"] else ""))
    h.log(f"    listen queue: {run['listen'] or '-'}; refused {count_kinds(run, 'refused')}, resets {count_kinds(run, 'reset')}")
    for n in run["notes"]:
        h.log("    note: " + n)
    for p in run["problems"]:
        h.log("    PROBLEM: " + p)
    verdict = "measured (a reference)" if run["kind"] == "reference" else "FAIL" if run["problems"] else "ok"
    h.log(f"    {run['run']}: {run['seconds']:.1f}s, {verdict}")
    if run["problems"] or keep:
        h.log(f"    logs kept in {run['workdir']}")
    else:
        shutil.rmtree(run["workdir"], ignore_errors=True)


def fmt_growth(g):
    return ", ".join(f"{k} " + ("-" if q2 is None else f"{q2:.4g}->{q4:.4g}") for k, (q2, q4) in g.items())


def finish(runs, a):
    """Prints the summary table, writes --json; the exit status (1 when a lameduck run failed)."""
    head = ["run", *LOAD_ORDER, "refused", "resets", "overflow/drops", "bad exits", "time", "result"]
    rows = []
    for run in runs:
        bad_exits = sum(n for g in run["generations"].values() for code, n in (g.get("exits") or {}).items()
                        if code != "0")
        lq = run["listen"]
        rows.append([run["run"], *(cell(load_of(run, n)) for n in LOAD_ORDER), count_kinds(run, "refused"),
                     count_kinds(run, "reset"),
                     f"{lq.get('ListenOverflows', '-')}/{lq.get('ListenDrops', '-')}", bad_exits,
                     f"{run['seconds']:.0f}s",
                     "ref" if run["kind"] == "reference" else ("FAIL" if run["problems"] else "ok")])
    h.log("\nper load: ok/failed (rN: N retries); refused include wrk's connect errors\n" + h.table(head, rows))
    if a.json:
        summary = {"duration_s": a.duration, "interval_s": a.interval, "rate": a.rate, "runs": [
            {k: v for k, v in run.items() if k != "events"} for run in runs]}
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
        h.log(f"summary written to {a.json}")
    failed = [r["run"] for r in runs if r["kind"] == "lameduck" and r["problems"]]
    if failed:
        h.log("\nFAILED: " + ", ".join(failed))
        return 1
    h.log("\nOK: every restart storm lost nothing: no failed request, no refused connection, no listen "
          "overflow, every generation exited 0, no growth across generations.")
    return 0
