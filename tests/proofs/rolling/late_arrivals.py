"""What the server sees of its load balancer: the termination summary's arrival figures
(`last_new_connection`, `late_connections`, ...) and the `late connections` warning, checked
against balancers that do and do not stop sending in time.

Each scenario runs, for each example server, two instances (a and b) behind HAProxy (`mode
http`, `retries 0`, no redispatch) under two wrk loads through HAProxy: keep-alive on `/`,
and `Connection: close` on `/` (a new connection per request, so the servers see when the
balancer still opens connections). It then terminates one instance at a time, --terminations
times, starting a replacement on the same port after each exit (a rolling update), and reads
the terminated instance's summary line and warnings from its stderr.

  well_configured   `option httpchk GET /readyz`, inter 250ms fall 2 rise 1, servers
                    --shutdown-delay 2s. Asserted for every termination: late_connections=0,
                    no `late connections` warning, last_new_connection <= fall x inter +
                    0.75 s (one check's duration and slack), and 0 failed requests.
  misconfigured     inter 2s fall 3 rise 1 (detection >= 6 s), --shutdown-delay 2s. Asserted:
                    every termination reports late_connections > 0 and logs the warning.
                    Failed requests are expected and reported, not asserted.
  endpoint_removal  no health checks; the proof takes the instance out of HAProxy
                    (`set server be/NAME state maint`) 1 s after SIGTERM, --shutdown-delay 2s:
                    asserted last_new_connection within 0.8-1.5 s and no late connection. The
                    variant with the removal 3 s after SIGTERM (after the delay): asserted
                    late connections and the warning on every termination.
  plan_observed     `lameduck plan --observed --json` on the misconfigured runs' logs must
                    exit 1 and recommend a delay; the misconfigured balancer then runs again
                    with that delay (--plan-terminations, 2, per runtime), and that run must be clean
                    (late_connections=0 and 0 failed requests everywhere): the planner estimates the balancer's
                    detection from the /readyz probes the servers saw (readyz_probe_interval,
                    failed_readyz_probes), not from the too-short delay alone. On the well-configured runs'
                    logs the planner must exit 0 and say the delay holds, with a margin > 0.
                    Runs the misconfigured and well-configured scenarios first when they were
                    not selected. Needs the `lameduck` binary (package lameduck-cli, release):
                    built unless --no-build; missing, it is a failure.

A layer-4 balancer with HTTP/2 connections pinned until GOAWAY is rolling_restart_l4's: its
requests keep arriving on old connections (late requests), and it asserts no late connection.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every assertion held; 1 otherwise (each failure listed); 2 on a setup
problem (missing haproxy/wrk, build failure).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import harness as h

SCENARIOS = ["well_configured", "misconfigured", "endpoint_removal", "plan_observed"]
DELAY_S = 2.0
# The part of the shutdown delay whose new connections are late (the library's default).
LATE_PERCENT = 20
# Well configured: HAProxy marks a server DOWN after `fall` failed checks `inter` apart. Every
# HAProxy check is a new TCP connection, and the servers count every accepted connection, the
# health checks' too: a server HAProxy keeps checking every 250 ms after marking it DOWN would
# report the checks as late connections. `downinter 2s` spaces the checks of a DOWN server
# past the 2 s delay.
GOOD = {"inter_ms": 250, "fall": 2, "rise": 1, "check_timeout_ms": 500, "downinter_ms": 2000}
# One check's duration and slack (scheduling jitter, a loaded machine) over fall x inter.
CHECK_AND_SLACK_S = 0.75
GOOD_BOUND_S = GOOD["fall"] * GOOD["inter_ms"] / 1000 + CHECK_AND_SLACK_S
# Misconfigured: detection takes fall x inter = 6 s, three times the shutdown delay. `downinter
# 8s`, for the same reason as above: once the balancer has marked the server DOWN (4-6.5 s
# after the signal), its checks must not land in the last part of a longer delay (the
# plan_observed rounds), or the checks alone would be reported late.
BAD = {"inter_ms": 2000, "fall": 3, "rise": 1, "check_timeout_ms": 500, "downinter_ms": 8000}
# Kubernetes-style endpoint removal, seconds after SIGTERM: in time, and after the delay.
REMOVAL_IN_TIME_S = 1.0
REMOVAL_LATE_S = 3.0
REMOVAL_WINDOW_S = (0.8, 1.5)
# The rounds of plan-then-check allowed before the misconfigured balancer must give clean
# terminations: one, the first recommendation must do. (The terminations per runtime of a
# round's check run, with the recommended delay: --plan-terminations.)
PLAN_ROUNDS = 1
WARMUP_S = 0.7
SETTLE_S = 0.3
# Built besides the example servers (see catalog.py): the `lameduck` CLI of plan_observed.
BUILDS = [["-p", "lameduck-cli"]]


def run_case(binary, runtime, case, terminations, workdir):
    """One case (a balancer configuration and a shutdown delay) over `terminations` rolling
    terminations. Returns a result dict with one entry per termination."""
    os.makedirs(workdir, exist_ok=True)
    delay = case["delay_s"]
    flags = ["--shutdown-delay", h.fmt_ms(int(round(delay * 1000)))]
    instances = [h.Instance(binary, name, h.free_port(), flags, workdir) for name in ("a", "b")]
    fe_port = h.free_port()
    checks = case.get("checks")
    haproxy = h.HAProxy(workdir, fe_port, [(i.name, i.port) for i in instances], checks=checks is not None,
                        **(checks or {}))
    removal = case.get("removal_s")
    r = {"runtime": runtime, "case": case["name"], "delay_s": delay, "terminations": [], "events": [],
         "problems": [], "workdir": workdir, "failed": 0, "requests": 0, "logs": []}
    t0 = time.monotonic()

    def note(msg):
        r["events"].append(f"{time.monotonic() - t0:6.2f}s {msg}")

    wrks = []
    try:
        # Without health checks HAProxy shows an enabled server as `no check`.
        up = "UP" if checks is not None else "no check"
        h.start_behind(haproxy, instances, up)
        # Each termination gets its own wrk loads, long enough to cover the signal, the
        # delay, the restart and the balancer taking the replacement back.
        # A server marked DOWN before it exits is checked again `downinter` later.
        up_s = 0.0
        if checks:
            detection_s = (checks["fall"] * checks["inter_ms"] + checks["check_timeout_ms"]) / 1000
            interval_ms = checks.get("downinter_ms") if detection_s < delay else None
            up_s = checks["rise"] * (interval_ms or checks["inter_ms"]) / 1000
        load_s = int(WARMUP_S + max(delay, removal or 0) + up_s + 2.5) + 1
        for k in range(terminations):
            inst = instances[k % len(instances)]
            wrks = []
            for kind, headers in (("keepalive", ()), ("close", ("Connection: close",))):
                proc, out = h.wrk(fe_port, load_s, workdir, f"wrk-{k}-{kind}", threads=1,
                                  connections=8 if kind == "keepalive" else 4, headers=headers)
                wrks.append((kind, proc, out))
            time.sleep(WARMUP_S)
            stderr_path = inst.stderr_path
            term_at = time.monotonic()
            os.kill(inst.proc.pid, 15)
            exit_at = None
            if removal is not None:
                while time.monotonic() < term_at + removal:
                    if exit_at is None and inst.proc.poll() is not None:
                        exit_at = time.monotonic()
                    time.sleep(0.005)
                haproxy.disable(inst.name)
                note(f"{inst.name} removed from HAProxy +{time.monotonic() - term_at:.2f}s after SIGTERM")
            code = h.reap(inst.proc, delay + 30)
            exit_at = exit_at or time.monotonic()
            if code is None:
                raise RuntimeError(f"{inst.name} still running 30 s after its delay (killed):\n"
                                   + inst.stderr_tail())
            if code != 0:
                r["problems"].append(f"termination {k + 1}: {inst.name} exited {code}")
            down_at = haproxy.first_transition(inst.name, "DOWN", term_at)
            restart_at = time.monotonic()
            inst.start()
            if removal is not None:
                haproxy.enable(inst.name)
            if checks is not None and down_at is not None:
                haproxy.wait_transition(inst.name, up, restart_at, 15)
            else:
                haproxy.wait_status(inst.name, up, 15)
            summary = h.termination_summary(stderr_path)
            late_warn, before_warn = h.warning_counts(stderr_path)
            failed = requests = 0
            for kind, proc, out in wrks:
                res = h.wrk_result(proc, out, load_s + 30)
                failed += res["failed"]
                requests += res["requests"]
            wrks = []
            if summary is None:
                r["problems"].append(f"termination {k + 1}: no termination summary in {stderr_path}")
                summary = {}
            t = {
                "instance": inst.name,
                "code": code,
                "exit_s": exit_at - term_at,
                "down_s": None if down_at is None else down_at - term_at,
                "last_new_connection": h.seconds(summary.get("last_new_connection")),
                "last_new_request": h.seconds(summary.get("last_new_request")),
                "late_connections": int(summary.get("late_connections", -1)),
                "late_requests": int(summary.get("late_requests", -1)),
                "requests_before_ready": int(summary.get("requests_before_ready", -1)),
                "late_warnings": late_warn,
                "before_ready_warnings": before_warn,
                "requests": requests,
                "failed": failed,
                "log": stderr_path,
            }
            r["terminations"].append(t)
            r["logs"].append(stderr_path)
            r["failed"] += failed
            r["requests"] += requests
            down_txt = f"HAProxy DOWN +{t['down_s']:.2f}s, " if t["down_s"] is not None else ""
            note(
                f"termination {k + 1}: {inst.name} exited {code} +{t['exit_s']:.2f}s, {down_txt}"
                f"last_new_connection={summary.get('last_new_connection')} "
                f"last_new_request={summary.get('last_new_request')} "
                f"late_connections={t['late_connections']} late_requests={t['late_requests']} "
                f"warnings={late_warn}; load {requests} requests, {failed} failed"
            )
            time.sleep(SETTLE_S)
    except Exception as e:  # reported as a failed run, with the logs kept
        r["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        h.stop_behind(haproxy, instances, [proc for _, proc, _ in wrks])
    return r


def check(r, kind):
    """The assertions of `kind` on run `r`: a list of failures (the run's problems aside)."""
    bad = []
    what = f"{r['runtime']} {r['case']}"
    for i, t in enumerate(r["terminations"], 1):
        lnc = t["last_new_connection"]
        lnc_txt = "-" if lnc is None else f"{lnc:.3f}s"
        if kind == "clean":
            if t["late_connections"] != 0:
                bad.append(f"{what} termination {i}: late_connections={t['late_connections']} (want 0)")
            if t["late_warnings"]:
                bad.append(f"{what} termination {i}: logged the late-connections warning")
        if kind == "clean_detect" and lnc is not None and lnc > GOOD_BOUND_S:
            bad.append(f"{what} termination {i}: last_new_connection={lnc_txt} > {GOOD_BOUND_S:.2f}s")
        if kind == "clean_removal":
            lo, hi = REMOVAL_WINDOW_S
            if lnc is None or not lo <= lnc <= hi:
                bad.append(f"{what} termination {i}: last_new_connection={lnc_txt}, want {lo}-{hi}s")
        if kind == "late":
            if t["late_connections"] <= 0:
                bad.append(f"{what} termination {i}: late_connections={t['late_connections']} (want > 0)")
            if t["late_warnings"] != 1:
                bad.append(f"{what} termination {i}: {t['late_warnings']} late-connections warnings (want 1)")
    if kind == "clean" and r["failed"]:
        bad.append(f"{what}: {r['failed']} failed requests (want 0)")
    return bad


def row(r):
    ts = r["terminations"]
    lncs = [t["last_new_connection"] for t in ts if t["last_new_connection"] is not None]
    return [
        r["runtime"],
        r["case"],
        f"{len(ts)}",
        f"{max(lncs):.3f}s" if lncs else "-",
        f"{min(lncs):.3f}s" if lncs else "-",
        str(sum(1 for t in ts if t["late_connections"] > 0)),
        str(sum(t["late_connections"] for t in ts if t["late_connections"] > 0)),
        str(sum(t["late_requests"] for t in ts if t["late_requests"] > 0)),
        str(sum(t["late_warnings"] for t in ts)),
        f"{r['failed']}/{r['requests']}",
    ]


HEAD = ["runtime", "case", "terminations", "max last_new_conn", "min last_new_conn", "late terminations",
        "late conns", "late reqs", "warnings", "failed/requests"]


def lameduck_binary(args):
    """The `lameduck` CLI (package lameduck-cli), built unless --no-build; None when it does
    not build or is missing."""
    if not args.no_build and not h.cargo_build(*BUILDS[0]):
        return None
    path = os.path.join(h.target_dir(), "release", "lameduck")
    return path if os.path.isfile(path) else None


def run_plan(binary, files, workdir, name):
    """`lameduck plan --observed FILES --json`: (exit code, parsed JSON or None, text)."""
    out_path = os.path.join(workdir, f"{name}.plan.out")
    with open(out_path, "wb") as out:
        proc = h.spawn([binary, "plan", "--json", "--observed", *files], out, subprocess.STDOUT)
    code = h.reap(proc, 60)
    with open(out_path, "r", errors="replace") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except ValueError:
        start = text.find("{")
        try:
            data = json.loads(text[start:]) if start >= 0 else None
        except ValueError:
            data = None
    return code, data, text


# The short form, CI's run (see harness.cli): tokio_server and actix_server, one termination per
# case but two of the misconfigured balancer (with fewer of its logs the planner's
# recommendation is a lower bound) and one per plan round.
SHORT = [["--runtimes", "tokio_server,actix_server", "--terminations", "1", "--misconfigured-terminations", "2",
          "--plan-terminations", "1"]]


def main(argv=None):
    p = h.parser("late_arrivals", __doc__)
    h.add_runtimes(p)
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    p.add_argument("--terminations", type=int, default=10, help="terminations per runtime and case")
    p.add_argument("--misconfigured-terminations", type=int, metavar="N",
                   help="terminations per runtime behind the misconfigured balancer, whose logs "
                        "plan_observed reads (default: --terminations; at least 2, or the planner's "
                        "recommendation is a lower bound)")
    p.add_argument("--plan-terminations", type=int, default=2,
                   help="plan_observed: terminations per runtime with the recommended delay")
    p.add_argument("--no-build", action="store_true", help="use the existing release build")
    p.add_argument("--keep-logs", metavar="DIR", help="keep every run's logs (servers, HAProxy, wrk) in DIR")
    p.add_argument("--json", help="also write all results as JSON to this file")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    scenarios = h.parse_list(p, args.scenarios, SCENARIOS, "scenario")
    if args.misconfigured_terminations is None:
        args.misconfigured_terminations = args.terminations
    if min(args.terminations, args.misconfigured_terminations, args.plan_terminations) < 1:
        p.error("--terminations, --misconfigured-terminations and --plan-terminations must be at least 1")
    if not h.check_tools("haproxy", "wrk", hint="apt-get install -y haproxy wrk"):
        return 2
    examples = h.ready_examples(runtimes, args)
    if examples is None:
        return 2

    if args.keep_logs:
        root = os.path.abspath(args.keep_logs)
        os.makedirs(root, exist_ok=True)
    else:
        root = tempfile.mkdtemp(prefix="late-arrivals-")
    started = time.monotonic()
    h.log("HAProxy mode http, retries 0; wrk keep-alive (-c8) and Connection: close (-c4) on / per termination")
    h.log(f"late part of the shutdown delay: last {LATE_PERCENT}% (from {DELAY_S * (1 - LATE_PERCENT / 100):.1f}s "
          f"of --shutdown-delay {DELAY_S:g}s)")

    cases = {
        "well_configured": [dict(name="well_configured", delay_s=DELAY_S, checks=GOOD, kind="clean_detect")],
        "misconfigured": [dict(name="misconfigured", delay_s=DELAY_S, checks=BAD, kind="late")],
        "endpoint_removal": [
            dict(name=f"removal@{REMOVAL_IN_TIME_S:g}s", delay_s=DELAY_S, removal_s=REMOVAL_IN_TIME_S,
                 kind="clean_removal"),
            dict(name=f"removal@{REMOVAL_LATE_S:g}s", delay_s=DELAY_S, removal_s=REMOVAL_LATE_S, kind="late"),
        ],
    }
    want = list(scenarios)
    if "plan_observed" in want:
        for dep in ("well_configured", "misconfigured"):
            if dep not in want:
                want.insert(0, dep)
    results = {}
    failures = []
    for scenario in [s for s in SCENARIOS if s in want and s in cases]:
        for case in cases[scenario]:
            for runtime in runtimes:
                extra = "" if scenario in scenarios else " (for plan_observed)"
                if case["kind"] == "clean_detect":
                    bound = f"; last_new_connection bound {GOOD_BOUND_S:.2f}s"
                else:
                    bound = ""
                terminations = args.misconfigured_terminations if scenario == "misconfigured" else args.terminations
                h.log(f"\n==> {case['name']}{extra}: {runtime}, {terminations} terminations, "
                      f"--shutdown-delay {case['delay_s']:g}s{bound}")
                r = run_case(os.path.join(examples, runtime), runtime, case, terminations,
                             os.path.join(root, f"{case['name']}-{runtime}"))
                kinds = {"clean_detect": ["clean", "clean_detect"], "clean_removal": ["clean", "clean_removal"],
                         "late": ["late"]}[case["kind"]]
                bad = [f"{runtime} {case['name']}: {p}" for p in r["problems"]]
                for kind in kinds:
                    bad += check(r, kind)
                r["failures"] = bad
                h.log_run(r, False)
                for b in bad:
                    h.log("    FAIL: " + b)
                results.setdefault(scenario, []).append(r)
                failures += bad

    plan_rows = []
    plan_clean_round = None
    if "plan_observed" in scenarios:
        h.log("\n==> plan_observed: lameduck plan --observed")
        binary = lameduck_binary(args)
        if binary is None:
            failures.append("plan_observed: the lameduck CLI (cargo build --release -p lameduck-cli) did not "
                            "build or is missing")
            plan_rows.append(["lameduck CLI unavailable", "-", "-", "-", "-", "-"])
        else:
            plan_dir = os.path.join(root, "plan")
            os.makedirs(plan_dir, exist_ok=True)
            mis = [f for r in results.get("misconfigured", []) for f in r["logs"]]
            good = [f for r in results.get("well_configured", []) for f in r["logs"]]
            # The well-configured logs: exit 0, and the delay holds with a margin.
            code_g, data_g, text_g = run_plan(binary, good, plan_dir, "well_configured")
            obs_g = (data_g or {}).get("observed") or {}
            verdict_g = obs_g.get("verdict") or (data_g or {}).get("verdict") or ""
            margin_g = obs_g.get("margin_seconds")
            h.log(f"    well-configured logs ({len(good)} files): exit {code_g}; verdict {verdict_g!r}; "
                  f"margin {margin_g}s; last_new_connection {obs_g.get('last_new_connection_seconds')}s")
            if code_g != 0:
                failures.append(f"plan_observed: `lameduck plan --observed` on the well-configured logs exited "
                                f"{code_g} (want 0):\n{text_g[:2000]}")
            if "hold" not in verdict_g.lower() or not (isinstance(margin_g, (int, float)) and margin_g > 0):
                failures.append(f"plan_observed: the well-configured plan does not say the delay holds with a "
                                f"margin:\n{text_g[:2000]}")
            plan_rows.append(["well-configured logs", len(good), code_g, "-", f"margin {margin_g}s",
                              verdict_g[:60]])
            # The misconfigured logs: exit 1 and a recommended delay; the misconfigured balancer
            # again with that delay, which must give clean terminations (PLAN_ROUNDS = 1: the
            # first recommendation must do; a larger PLAN_ROUNDS feeds a late check run's logs
            # back to the planner).
            observed = list(mis)
            for rnd in range(1, PLAN_ROUNDS + 1):
                code, data, text = run_plan(binary, observed, plan_dir, f"round{rnd}")
                obs = (data or {}).get("observed") or {}
                rec_s = obs.get("recommended_shutdown_delay_seconds")
                verdict = obs.get("verdict") or ""
                h.log(f"    round {rnd}: {len(observed)} logs: exit {code}; recommended {rec_s}s; {verdict!r}")
                plan_rows.append([f"round {rnd} ({'misconfigured' if rnd == 1 else 'previous round'} logs)",
                                  len(observed), code, "-" if rec_s is None else f"{rec_s:g}s",
                                  "-" if obs.get("margin_seconds") is None else f"margin {obs['margin_seconds']}s",
                                  verdict[:60]])
                if rnd == 1 and code != 1:
                    failures.append(f"plan_observed: `lameduck plan --observed` on the misconfigured logs exited "
                                    f"{code} (want 1):\n{text[:2000]}")
                if code == 0:
                    break
                if not isinstance(rec_s, (int, float)) or rec_s <= 0:
                    failures.append(f"plan_observed: no recommended_shutdown_delay_seconds in the --json "
                                    f"output:\n{text[:2000]}")
                    break
                case = dict(name=f"misconfigured, plan round {rnd}: {rec_s:g}s", delay_s=float(rec_s), checks=BAD,
                            kind="clean")
                observed = []
                clean = True
                for runtime in runtimes:
                    h.log(f"\n==> {case['name']}: {runtime}, {args.plan_terminations} terminations, "
                          f"--shutdown-delay {rec_s:g}s")
                    r = run_case(os.path.join(examples, runtime), runtime, case, args.plan_terminations,
                                 os.path.join(root, f"plan-round{rnd}-{runtime}"))
                    h.log_run(r, False)
                    problems = [f"{runtime} {case['name']}: {p}" for p in r["problems"]]
                    failures += problems
                    for b in problems:
                        h.log("    FAIL: " + b)
                    late = check(r, "clean")
                    r["failures"] = late
                    for b in late:
                        h.log("    late: " + b)
                    clean = clean and not late and not problems
                    results.setdefault("plan_observed", []).append(r)
                    observed += r["logs"]
                if clean:
                    h.log(f"    round {rnd}: --shutdown-delay {rec_s:g}s gave clean terminations")
                    plan_clean_round = rnd
                    break
            if plan_clean_round is None:
                failures.append(f"plan_observed: no clean terminations within {PLAN_ROUNDS} rounds of "
                                f"`lameduck plan --observed`")
            elif plan_clean_round > 1:
                h.log(f"    note: the first recommendation was a lower bound (logs alone do not show the "
                      f"balancer's detection time); round {plan_clean_round} was clean")

    elapsed = time.monotonic() - started
    for scenario, rs in results.items():
        h.log(f"\n{scenario}:")
        h.log(h.table(HEAD, [row(r) for r in rs]))
    if plan_rows:
        h.log("\nplan_observed (lameduck plan --observed --json):")
        h.log(h.table(["logs", "files", "exit", "recommended", "margin", "verdict"], plan_rows))
    h.log(f"\nrun time {elapsed:.0f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "plan": plan_rows, "elapsed_s": elapsed}, f, indent=2, default=str)
    if args.keep_logs:
        h.log(f"logs kept in {root}")
    elif not failures:
        shutil.rmtree(root, ignore_errors=True)
    else:
        h.log(f"logs kept in {root}")
    return h.conclude(failures, "every assertion held.")
