"""Zero-downtime proof: a rolling restart behind HAProxy under steady keep-alive load.

For each example server (tokio_server, axum_server, smol_server, actix_server) and each
shutdown mode (A: close-listener; B: retry-after, --shutdown-send-retry-after) this script

  1. starts two instances (A and B) of the example on 127.0.0.1,
  2. starts HAProxy (Debian's `haproxy`) on 127.0.0.1 in front of them, health-checking
     `GET /readyz` every 250 ms (`fall 2`, `rise 2`, `timeout check 500ms`) with `retries 0`
     and no `option redispatch`, so nothing masks a failed request,
  3. drives two wrk processes through HAProxy for --duration seconds (keep-alive; one on `/`,
     one on `/sleep?duration=20ms`),
  4. during the load sends SIGTERM to instance A, waits for it to exit, restarts it on the same
     port, waits until HAProxy reports it UP, then does the same with instance B,
  5. counts failed requests (non-2xx/3xx replies and socket errors, from wrk's summary).

The shutdown delay is derived from HAProxy's worst-case detection time
(fall x inter + timeout check, plus a margin); the same run with `--shutdown-delay 0s` is the
naive baseline, which must lose requests (it shows the test can fail).

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every lameduck run lost 0 requests and every baseline lost some; 1
otherwise; 2 on a setup problem (missing haproxy/wrk, build failure).
"""

import json
import os
import shutil
import tempfile
import time

import harness as h

MODES = ["A", "B"]

# HAProxy health checking (the lame-duck window must outlast the balancer's detection; see
# docs/design.md#dag and the planner, `lameduck plan`).
INTER_MS = 250
FALL = 2
RISE = 2
CHECK_TIMEOUT_MS = 500
# Worst-case detection: `fall` failed checks `inter` apart, the last one taking up to the check
# timeout (the planner's model: threshold x interval + timeout).
DETECTION_MS = FALL * INTER_MS + CHECK_TIMEOUT_MS
# Margin for HAProxy's scheduling jitter and CPU contention on a small machine.
MARGIN_MS = max(DETECTION_MS, 500)
SHUTDOWN_DELAY_MS = DETECTION_MS + MARGIN_MS


def restart_one(haproxy, inst, delay_ms, settle, note, problems, down=("DOWN",), load_start=None):
    """Sends `inst` SIGTERM and waits for its exit (exit 0 wanted, else a problem), restarts
    it on its port, waits until HAProxy has it UP again, then `settle` seconds. Returns (when
    SIGTERM was sent, when it exited, when HAProxy first showed it in one of the states
    `down`, or None)."""
    term_at = time.monotonic()
    load = f", load +{term_at - load_start:.2f}s" if load_start is not None else ""
    note(f"SIGTERM {inst.name} (pid {inst.proc.pid}){load}")
    code = inst.terminate_and_wait(timeout=delay_ms / 1000 + 30)
    exit_at = time.monotonic()
    down_at = next((at for at in (haproxy.first_transition(inst.name, s, term_at) for s in down) if at), None)
    down_txt = f"HAProxy DOWN +{down_at - term_at:.2f}s, " if down_at else ""
    note(f"{inst.name} exited {code}: {down_txt}exit +{exit_at - term_at:.2f}s after SIGTERM")
    if code != 0:
        problems.append(f"{inst.name} exited {code}:\n{inst.stderr_tail()}")
    restart_at = time.monotonic()
    inst.start()
    if delay_ms > 0:
        # It was DOWN: wait for HAProxy to see it come back (rise x inter).
        up_at = haproxy.wait_transition(inst.name, "UP", restart_at, 15)
    else:
        # The naive restart may be quicker than HAProxy's detection: it may never leave UP.
        up_at = haproxy.wait_status(inst.name, "UP", 15)
    note(f"{inst.name} restarted (pid {inst.proc.pid}), HAProxy UP +{up_at - exit_at:.2f}s after restart")
    time.sleep(settle)
    return term_at, exit_at, down_at


def run_one(binary, runtime, mode, delay_ms, args, keep_dir):
    """One rolling restart under load. Returns a result dict."""
    workdir = tempfile.mkdtemp(prefix=f"rolling-{runtime}-{mode}-{delay_ms}-")
    flags = ["--shutdown-delay", h.fmt_ms(delay_ms)]
    if mode == "B":
        flags.append("--shutdown-send-retry-after")
    if args.idle_close_spread and delay_ms > 0:
        flags += ["--idle-close-spread", args.idle_close_spread]
    instances = [h.Instance(binary, name, h.free_port(), flags, workdir) for name in ("a", "b")]
    fe_port = h.free_port()
    haproxy = h.HAProxy(workdir, fe_port, [(i.name, i.port) for i in instances], inter_ms=INTER_MS,
                        fall=FALL, rise=RISE, check_timeout_ms=CHECK_TIMEOUT_MS)
    wrks = []
    events = []
    problems = []
    t0 = time.monotonic()

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    try:
        h.start_behind(haproxy, instances)
        note("both instances UP in HAProxy; starting load")

        for path in ("/", "/sleep?duration=20ms"):
            proc, out_path = h.wrk(fe_port, args.duration, workdir, f"wrk{len(wrks)}", threads=1,
                                   connections=args.connections, path=path)
            wrks.append((path, proc, out_path))
        load_start = time.monotonic()
        time.sleep(args.warmup)

        for inst in instances:
            _, exit_at, down_at = restart_one(haproxy, inst, delay_ms, args.settle, note, problems,
                                              down=("DOWN", "DOWN 1/2"))
            if delay_ms > 0 and not (down_at and down_at < exit_at):
                problems.append(
                    f"HAProxy did not mark {inst.name} DOWN before it exited: the shutdown delay "
                    f"should outlast the detection time"
                )

        rolled_at = time.monotonic()
        if rolled_at - load_start > args.duration - 0.5:
            problems.append(
                f"the rolling restart took {rolled_at - load_start:.1f}s, longer than the "
                f"{args.duration}s load: rerun with a longer --duration"
            )

        totals = {"requests": 0, "failed": 0, "non2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}
        per_path = {}
        for path, proc, out_path in wrks:
            code = h.reap(proc, args.duration + 30)
            with open(out_path, "r", errors="replace") as f:
                text = f.read()
            if code != 0:
                raise RuntimeError(f"wrk {path} exited {code}:\n{text}")
            res = h.parse_wrk(text)
            per_path[path] = res
            for k in totals:
                totals[k] += res[k]
        note(
            "load done: "
            + "; ".join(
                f"{p}: {r['requests']} requests, {r['failed']} failed "
                f"(non-2xx {r['non2xx']}, connect {r['connect']}, read {r['read']}, "
                f"write {r['write']}, timeout {r['timeout']})"
                for p, r in per_path.items()
            )
        )
        return {
            "runtime": runtime,
            "mode": mode,
            "delay_ms": delay_ms,
            "requests": totals["requests"],
            "failed": totals["failed"],
            "detail": totals,
            "per_path": per_path,
            "events": events,
            "problems": problems,
            "workdir": workdir,
        }
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
        return {
            "runtime": runtime,
            "mode": mode,
            "delay_ms": delay_ms,
            "requests": None,
            "failed": None,
            "detail": {},
            "per_path": {},
            "events": events,
            "problems": problems,
            "workdir": workdir,
        }
    finally:
        h.stop_behind(haproxy, instances, [proc for _, proc, _ in wrks])
        if not keep_dir and not problems:
            shutil.rmtree(workdir, ignore_errors=True)


def table(results, markdown=False):
    head = ["runtime", "mode", "shutdown delay", "requests", "failed"]
    rows = []
    for r in results:
        delay = h.fmt_ms(r["delay_ms"]) + (" (naive baseline)" if r["delay_ms"] == 0 else "")
        rows.append(
            [
                r["runtime"],
                r["mode"],
                delay,
                "error" if r["requests"] is None else str(r["requests"]),
                "error" if r["failed"] is None else str(r["failed"]),
            ]
        )
    return h.table(head, rows, markdown)


# The short form, CI's run (see harness.cli): tokio_server in both modes and the naive baseline
# (one: it shows the test can fail), then actix_server in both modes with --idle-close-spread.
SHORT = [
    ["--runtimes", "tokio_server", "--baseline-modes", "A"],
    ["--runtimes", "actix_server", "--baseline-modes", "", "--idle-close-spread", "1500ms"],
]


# The full form, the release check: every runtime in both modes and both baselines, then every
# runtime with --idle-close-spread.
FULL = [[], ["--baseline-modes", "", "--idle-close-spread", "1500ms"]]


def main(argv=None):
    p = h.parser("rolling_restart", __doc__)
    h.add_runtimes(p)
    p.add_argument("--modes", default="A,B", help="lameduck modes to run (A, B)")
    p.add_argument(
        "--baseline-modes", default="A,B", help="modes of the --shutdown-delay 0s baseline ('' for none)"
    )
    p.add_argument("--duration", type=int, default=16, help="seconds of load per run (>= 15)")
    p.add_argument("--connections", type=int, default=16, help="wrk connections per path")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds of load before the first SIGTERM")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between an UP and the next SIGTERM")
    p.add_argument(
        "--idle-close-spread",
        metavar="D",
        help="also pass --idle-close-spread D to the lameduck runs (not the baseline): the keep-alive "
        "race must stay at 0 failed requests with the idle connections ended spread out",
    )
    h.add_run_options(p)
    p.add_argument("--markdown", help="also write the table as Markdown to this file")
    h.add_forms(p, SHORT, FULL)
    args = p.parse_args(argv)

    if args.duration < 15:
        p.error("--duration must be at least 15 s")
    runtimes = h.parse_runtimes(p, args.runtimes)
    modes = h.parse_list(p, args.modes, MODES, "mode", least=0)
    baseline_modes = h.parse_list(p, args.baseline_modes, MODES, "mode", least=0)

    if not h.check_tools("haproxy", "wrk", hint="apt-get install -y haproxy wrk"):
        return 2

    examples = h.ready_examples(runtimes, args)
    if examples is None:
        return 2

    h.log(
        f"HAProxy: option httpchk GET /readyz, inter {INTER_MS}ms, fall {FALL}, rise {RISE}, "
        f"timeout check {CHECK_TIMEOUT_MS}ms, retries 0, no redispatch"
    )
    h.log(
        f"worst-case detection t = fall x inter + timeout check = {FALL} x {INTER_MS}ms + "
        f"{CHECK_TIMEOUT_MS}ms = {DETECTION_MS}ms; + {MARGIN_MS}ms margin (HAProxy jitter, CPU "
        f"contention) => --shutdown-delay {h.fmt_ms(SHUTDOWN_DELAY_MS)}"
    )
    h.log(
        f"load: 2 x wrk -t1 -c{args.connections} -d{args.duration}s (keep-alive) on / and "
        f"/sleep?duration=20ms through HAProxy"
    )

    plan = []
    for runtime in runtimes:
        plan += [(runtime, m, SHUTDOWN_DELAY_MS) for m in modes]
        plan += [(runtime, m, 0) for m in baseline_modes]

    results = []
    for runtime, mode, delay_ms in plan:
        binary = os.path.join(examples, runtime)
        h.log(f"\n==> {runtime}, mode {mode}, --shutdown-delay {h.fmt_ms(delay_ms)}")
        r = run_one(binary, runtime, mode, delay_ms, args, args.keep)
        h.log_run(r, r["problems"] or args.keep)
        results.append(r)

    h.log("\n" + table(results))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table(results, markdown=True) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)

    bad = []
    for r in results:
        what = f"{r['runtime']} mode {r['mode']} delay {h.fmt_ms(r['delay_ms'])}"
        if r["problems"] or r["failed"] is None:
            bad.append(f"{what}: run problems")
        elif r["delay_ms"] > 0 and r["failed"] != 0:
            bad.append(f"{what}: {r['failed']} failed requests (want 0)")
        elif r["delay_ms"] == 0 and r["failed"] == 0:
            bad.append(f"{what}: the naive baseline lost no request (the test should be able to fail)")
    return h.conclude(bad, "0 failed requests with the lame-duck window; the naive baseline lost requests.")

