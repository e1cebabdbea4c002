"""`python3 tests/proofs websockets_go`: WebSockets of Go's golang.org/x/net/websocket (the
package Debian ships, built offline) open on `/ws` of each example server at SIGTERM each get
the server's Close 1001 at their paced turn, and answer it.

Per runtime (--runtimes, all four by default) and mode (--modes, A and B): the server starts
with --shutdown-delay (1 s) and --shutdown-watch-termination-grace-period (10 s); the Go client
(tests/proofs/rolling/wsclient) opens --sockets (200) WebSockets, each sending a text message
every 100 ms and checking its echo. Once all are open and have echoed for a moment, the server
gets SIGTERM. A client that receives the server's Close records its status, its reason and
when it came, and answers with its own Close (status 1000, as x/net/websocket's Conn.Close
does). Asserted:
  * every socket opened, echoed, and ended with the server's Close, status 1001 and reason
    `server shutting down`; none ended with a read error (a connection ended without a Close,
    which a client shows as 1006, abnormal closure);
  * the Closes came after the shutdown delay, within delay + grace + 2 s of SIGTERM, paced:
    spread over at least 0.8 x (sockets - 1) x the server's pacing interval;
  * the server exited 0 within the same bound, and its termination summary says
    cause=signal streams_ended=<sockets> streams_remaining=0 websocket_closes=<sockets>
    websocket_unanswered=0 code=0: every Close was answered.

Needs Go with Debian's golang-golang-x-net-dev (GOPATH mode, offline) and the release build
of the example servers (built unless --no-build). Loopback only. Every process started here is
killed by its PID when the script ends, however it ends; every wait is bounded.

Exit status: 0 when every assertion held in every run; 1 otherwise (each failure listed); 2 on
a setup problem (no Go, a failed build, a server that does not start).
"""

import json
import os
import shutil
import tempfile
import time

import harness as h
from harness.ws_frames import GOING_AWAY, GOING_AWAY_REASON

# Bounds of the setup: every socket's opening handshake; how long the clients echo before
# SIGTERM.
READY_TIMEOUT_S = 60
ECHO_BEFORE_SIGTERM_S = 0.5
ECHO_INTERVAL = "100ms"


def wait_ready(proc, stdout_path, timeout):
    """The number of sockets the client opened (its `ready N` line), or None when it did not say
    so within `timeout` (or exited first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(stdout_path, "r", errors="replace") as f:
            line = f.readline()
        if line.startswith("ready ") and line.endswith("\n"):
            return int(line.split()[1])
        if proc.poll() is not None:
            return None
        time.sleep(0.02)
    return None


def client_records(stdout_path):
    """The client's records (its last stdout line, a JSON array), or None."""
    with open(stdout_path, "r", errors="replace") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return None


def run(binary, runtime, mode, client, args):
    """One runtime in one mode: the result, with its figures and failed assertions."""
    n = args.streams
    bound_s = h.ends_bound(args.delay, args.grace)
    run = h.DrainRun(f"websockets-go-{runtime}-{mode}", mode, args, runtime=runtime, sockets=n)
    failures, note = run.failures, run.note

    proc = t_term_wall = None
    out_path = os.path.join(run.workdir, "wsclient.stdout")
    try:
        inst = run.start_server(binary, runtime, run.flags)
        # The client's own bound: past every bound of this run.
        timeout_s = READY_TIMEOUT_S + bound_s + 30
        command = [client, "-url", f"ws://127.0.0.1:{inst.port}/ws", "-n", str(n),
                   "-interval", ECHO_INTERVAL, "-timeout", f"{timeout_s:g}s"]
        with open(out_path, "wb") as out, open(os.path.join(run.workdir, "wsclient.stderr"), "wb") as err:
            proc = h.spawn(command, out, err)
        opened = wait_ready(proc, out_path, READY_TIMEOUT_S)
        if opened is None:
            raise h.SetupError(f"the Go client did not open its sockets within {READY_TIMEOUT_S}s")
        note(f"{opened} of {n} sockets open")
        if opened < n:
            failures.append(f"only {opened} of {n} sockets opened; SIGTERM sent anyway")
        time.sleep(ECHO_BEFORE_SIGTERM_S)
        # The client's clock is the wall clock: its Closes are measured from this.
        t_term_wall = time.time()
        run.terminate(bound_s)
        if h.reap(proc, 15) is None:
            failures.append("the Go client still running 15s after the server's exit: killed")
    except Exception as e:  # noqa: BLE001 (a setup problem, or a failed run with the logs kept)
        run.record(e)
    finally:
        if proc is not None:
            h.kill(proc)
        run.kill_server()
    if run.t_term is not None:
        analyse(run.result, client_records(out_path), run.inst, run.t_term, t_term_wall, run.exit_at, run.code, args)
    return run.end(args.keep)


def analyse(result, records, inst, t_term, t_term_wall, exit_at, code, args):
    """The figures of one run and its failed assertions."""
    failures = result["failures"]
    delay_s, grace_s, n = args.delay, args.grace, args.streams
    if records is None:
        failures.append("the Go client wrote no records")
        records = []
    outcomes = {}
    for r in records:
        key = r["error"] or f"Close {r['status']} {r['reason']!r}"
        outcomes[key] = outcomes.get(key, 0) + 1
    result["outcomes"] = outcomes
    good = [r for r in records if not r["error"] and r["status"] == GOING_AWAY and r["reason"] == GOING_AWAY_REASON]
    if len(good) != n:
        failures.append(
            f"{n - len(good)} of {n} sockets did not end with Close {GOING_AWAY} {GOING_AWAY_REASON!r}: "
            + "; ".join(f"{c} x {k}" for k, c in sorted(outcomes.items(), key=lambda kv: -kv[1]))
        )
    silent = [r["index"] for r in records if r["echoes"] == 0]
    if silent:
        failures.append(f"{len(silent)} sockets had no echo (first: {silent[:10]})")
    result["echoes_min"] = min((r["echoes"] for r in records), default=None)

    interval = h.pacing_interval(n, grace_s)
    stderr_path = inst.stderr_path if inst else None
    drain = h.drain_line(stderr_path) if stderr_path else None
    result["drain"] = drain
    if drain is not None and drain["long_running"] != n:
        failures.append(f"the server counted {drain['long_running']} long-running requests at the drain, want {n}")
    ends = sorted(round(r["close_ns"] / 1e9 - t_term_wall, 4) for r in good)
    result.update(h.check_ends(ends, n, delay_s, grace_s, interval, failures))
    result["exit_code"] = code
    result["exit_s"] = h.check_server_exit(code, exit_at, t_term, h.ends_bound(delay_s, grace_s), failures)
    result["summary"] = h.check_streams_summary(
        stderr_path, n, failures, cause="signal", websocket_closes=str(n), websocket_unanswered="0", code="0"
    )
    if failures and stderr_path:
        result["server_log"] = h.server_log_lines(stderr_path)
    result["socket_records"] = records


def log_figures(r):
    h.log("    outcomes: " + "; ".join(f"{c} x {k}" for k, c in sorted(r["outcomes"].items(), key=lambda kv: -kv[1])))
    e = r["ends_s"]
    h.log(
        f"    Closes after SIGTERM: first {h.fmt_s(e['first'])}, median {h.fmt_s(e['p50'])}, "
        f"last {h.fmt_s(e['last'])}; spread {h.fmt_s(r['spread_s'])} (want at least "
        f"{h.fmt_s(r['spread_want_s'])}); fewest echoes of a socket {r['echoes_min']}"
    )


def table(results):
    head = ["runtime", "mode", "Close 1001", "first", "last", "spread", "exit", "exit after", "answered"]
    rows = []
    for r in results:
        e = r.get("ends_s") or {}
        s = r.get("summary") or {}
        rows.append([
            r["runtime"], r["mode"], f"{r.get('outcomes', {}).get(f'Close {GOING_AWAY} {GOING_AWAY_REASON!r}', 0)}/{r['sockets']}",
            h.fmt_s(e.get("first")), h.fmt_s(e.get("last")), h.fmt_s(r.get("spread_s")),
            str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
            f"{s.get('websocket_closes', '-')} closes, {s.get('websocket_unanswered', '-')} unanswered",
        ])
    return h.table(head, rows)


# The short form, CI's run (see harness.cli): the defaults.
SHORT = [[]]


def main(argv=None):
    p = h.parser("websockets_go", __doc__)
    h.add_drain_arguments(p, 200, "WebSockets")
    h.add_runtimes(p)
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    modes = h.drain_modes(p, args)
    runtimes = h.parse_runtimes(p, args.runtimes)
    if not h.check_tools("go", hint="apt-get install -y golang-go golang-golang-x-net-dev"):
        return 2
    examples = h.ready_examples(runtimes, args)
    if examples is None:
        return 2
    build_dir = tempfile.mkdtemp(prefix="wsclient-build-")
    try:
        client = h.build_wsclient(build_dir)
        if client is None:
            h.log("error: the Go WebSocket client did not build (golang-golang-x-net-dev installed?)")
            return 2
        interval = h.pacing_interval(args.streams, args.grace)
        h.log(
            f"{args.streams} WebSockets of golang.org/x/net/websocket per run; --shutdown-delay {args.delay:g}s, "
            f"grace {args.grace:g}s; expected pacing {interval * 1000:g}ms, bound "
            f"{h.ends_bound(args.delay, args.grace):g}s after SIGTERM"
        )
        results = []
        for runtime in runtimes:
            binary = os.path.join(examples, runtime)
            for mode in modes:
                h.log(f"\n==> {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
                r = run(binary, runtime, mode, client, args)
                h.log_result(r, h.drain_figures(log_figures))
                results.append(r)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    h.log("\n" + table(results))
    status = h.exit_status(results, args, lambda r: f"{r['runtime']} mode {r['mode']}")
    if status:
        return status
    h.log(
        f"\nOK: on {', '.join(runtimes)} in modes {', '.join(modes)}, each of {args.streams} Go WebSockets "
        f"got Close {GOING_AWAY} {GOING_AWAY_REASON!r} at its paced turn and answered it; each server "
        f"exited 0 with websocket_closes={args.streams} websocket_unanswered=0."
    )
    return 0
