"""Zero-downtime proof for gRPC: a rolling restart of the gRPC example server behind HAProxy
under steady gRPC load.

The same procedure as the rolling_restart proof (whose HAProxy this one reuses): two
`grpc_server` instances, each in turn sent SIGTERM, waited for, restarted on its port and
waited for until HAProxy has it UP again, HAProxy health-checking `GET /readyz` (every 250 ms,
`fall 2`, `rise 2`, `timeout check 500ms`, `retries 0`, no `option redispatch`). By default
HAProxy speaks HTTP/2 on both sides: the frontend bound with `proto h2` (h2c), the servers
reached with `proto h2` (layer 7: HAProxy ends the client's calls and makes its own).

`--l4`: HAProxy in `mode tcp` in front, plaintext h2c passed through (as kube-proxy or a
network load balancer would), the same health checks in plain HTTP/1.1. Each of the client's
HTTP/2 connections is then pinned to one instance until that instance ends it: the lame-duck
window has to move every connection with a GOAWAY, not only the balancer's choice of backend
for new ones.

`--tls`: the same as --l4 over TLS end to end: the instances serve TLS (`--tls-cert-file`,
`--tls-private-key-file`: a throwaway CA and a certificate for IP 127.0.0.1 made with the
openssl CLI in the run's directory), HAProxy in `mode tcp` passes the TLS sessions through and
makes the health checks over TLS (`check-ssl`, verified against the CA). The client verifies
the certificate against the CA (name 127.0.0.1); tonic's client requires ALPN h2.

The load (`--client`):

  * `tonic` (default): the `grpc_load` example (tonic's client), unary `Sleep(20ms)` calls on
    --connections HTTP/2 connections with --concurrency calls in flight on each. With --l4 or
    --tls it does what a gRPC client with a retry policy does (`grpc_load --retries 3`): a call
    that never left it (tonic's hyper cancels calls queued on a connection that has just
    received a GOAWAY; grpc-go retries these transparently) is retried at once, and an
    `UNAVAILABLE` with `grpc-retry-pushback-ms` (retry-after mode's answer) after its pushback.
  * `grpcio`: grpcio_load.py (Python's grpcio, the C-core client) with 4 independent channels
    (connections) and 16 worker threads calling `Sleep(20ms)`, grpcio as it is: only its own
    transparent retries (streams refused with REFUSED_STREAM or left out of a GOAWAY, streams
    that never left the client), no application retries unless --retries.

Retries, when any, are reported by kind; a call that still fails is a failed call. A failed
call is any call that did not end with status OK; each kind of failure is reported with its
status, its message and its count (with grpcio also the first such call: when, on which
worker and channel).

The shutdown delay is the one of rolling_restart (HAProxy's worst-case detection plus a
margin). The naive baseline (`--shutdown-delay 0s`) is run and reported too, but not asserted:
HAProxy may absorb part of its damage. `--runs N` repeats the whole plan (every mode and the
baseline) N times; the table gives each run's calls and failures, then the totals per mode.

Asserted: every lameduck run of every repetition lost 0 calls, every instance exited 0, and
the rolling restart ended within the load. A run in which HAProxy marked an instance DOWN only
after the instance's lame-duck window had ended is noted as such (new connections still went
to it after its window: the detection took longer than the model's worst case, as on a busy
machine), and each run gives the machine's load average.

Stdlib only (and grpcio with --client grpcio). Loopback only. Every process started here is
killed by its PID when the script ends, however it ends; every wait is bounded.

Exit status: 0 when every lameduck run lost 0 calls; 1 otherwise; 2 on a setup problem.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time

import harness as h
from rolling import rolling_restart as rr

BINARY = "grpc_server"
CLIENTS = ["tonic", "grpcio"]
# grpcio_load.py's shape: independent channels (connections) and worker threads over them.
GRPCIO_CHANNELS = 4
GRPCIO_WORKERS = 16
# Each call's deadline, both clients.
CALL_TIMEOUT_S = 5


def tcp_haproxy(workdir, fe_port, servers, tls=None):
    """rolling_restart's HAProxy and health checks, in `mode tcp`: the client's connections
    pass through to the servers (h2c, or TLS sessions with `tls`, a harness.Tls); with
    `tls` the checks are made over TLS, verified against the CA."""
    haproxy = h.HAProxy(workdir, fe_port, servers)
    with open(haproxy.cfg_path) as f:
        cfg = f.read()
    cfg = cfg.replace("    mode http\n", "    mode tcp\n")
    cfg = cfg.replace("    option http-keep-alive\n", "").replace("    http-reuse safe\n", "")
    if tls:
        cfg = re.sub(
            r"(    server \S+ 127\.0\.0\.1:\d+ check)\n",
            rf"\1 check-ssl verify required ca-file {tls.ca} check-alpn http/1.1\n",
            cfg,
        )
    with open(haproxy.cfg_path, "w") as f:
        f.write(cfg)
    return haproxy


def h2_haproxy(workdir, fe_port, servers):
    """rolling_restart's HAProxy, with HTTP/2 on the frontend and to the servers."""
    haproxy = h.HAProxy(workdir, fe_port, servers)
    with open(haproxy.cfg_path) as f:
        cfg = f.read()
    cfg = cfg.replace(f"bind 127.0.0.1:{fe_port}\n", f"bind 127.0.0.1:{fe_port} proto h2\n")
    cfg = re.sub(r"(    server \S+ 127\.0\.0\.1:\d+ check)\n", r"\1 proto h2 check-proto h1\n", cfg)
    with open(haproxy.cfg_path, "w") as f:
        f.write(cfg)
    return haproxy


def default_retries(args):
    """tonic's client retries what a client with a retry policy retries when its connections
    are pinned (--l4, --tls); grpcio is measured as it is."""
    if args.retries is not None:
        return args.retries
    return 3 if args.client == "tonic" and (args.tls or args.l4) else 0


def load_command(examples, fe_port, tls, args):
    """The load client's command line."""
    retries = default_retries(args)
    if args.client == "grpcio":
        tls_args = ["--tls-ca", tls.ca, "--tls-domain", "127.0.0.1"] if tls else []
        return [
            sys.executable, h.GRPCIO_LOAD,
            "--target", f"127.0.0.1:{fe_port}",
            *tls_args,
            "--channels", str(GRPCIO_CHANNELS),
            "--workers", str(GRPCIO_WORKERS),
            "--duration", str(args.duration),
            "--sleep", "20ms",
            "--timeout", str(CALL_TIMEOUT_S),
            "--retries", str(retries),
        ]
    target = f"https://127.0.0.1:{fe_port}" if tls else f"http://127.0.0.1:{fe_port}"
    return [
        os.path.join(examples, "grpc_load"),
        "--target", target,
        *(["--tls-ca", tls.ca] if tls else []),
        "--retries", str(retries),
        "--connections", str(args.connections),
        "--concurrency", str(args.concurrency),
        "--duration", f"{args.duration}s",
        "--sleep", "20ms",
    ]


def load_counts(client, text):
    """The load's last line, in one shape for both clients: calls, failed, failures (by
    "STATUS: message"), retries (by kind), examples (grpcio: the first call of each failure)."""
    report = json.loads(text.strip().splitlines()[-1])
    if client == "grpcio":
        return {
            "calls": report["ok"] + report["failed"],
            "failed": report["failed"],
            "failures": report["errors"],
            "retries": report.get("retries", {}),
            "examples": report["examples"],
            "stuck": report.get("stuck_workers", 0),
            "with_pushback": report.get("with_pushback"),
            "start_unix": report.get("start_unix"),
        }
    return {
        "calls": report["calls"],
        "failed": report["failed"],
        "failures": report["failures"],
        "retries": report.get("retries", {}),
        "examples": [],
        "stuck": 0,
        "with_pushback": None,
        "start_unix": None,
    }


def run_one(examples, mode, delay_ms, args, keep_dir):
    front = "tls" if args.tls else ("l4" if args.l4 else "h2")
    workdir = tempfile.mkdtemp(prefix=f"rolling-grpc-{front}-{args.client}-{mode}-{delay_ms}-")
    tls = h.Tls(workdir) if args.tls else None
    flags = ["--shutdown-delay", h.fmt_ms(delay_ms)]
    if mode == "B":
        flags.append("--shutdown-send-retry-after")
    binary = os.path.join(examples, BINARY)
    instances = [h.Instance(binary, name, h.free_port(), flags, workdir, tls=tls) for name in ("a", "b")]
    fe_port = h.free_port()
    servers = [(i.name, i.port) for i in instances]
    if args.tls or args.l4:
        haproxy = tcp_haproxy(workdir, fe_port, servers, tls)
    else:
        haproxy = h2_haproxy(workdir, fe_port, servers)
    load = None
    events, problems, notes = [], [], []
    t0, t0_unix = time.monotonic(), time.time()

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    result = {
        "runtime": BINARY, "mode": mode, "delay_ms": delay_ms, "requests": None, "failed": None,
        "failures": {}, "retries": {}, "examples": [], "late_down": [],
    }
    retries = default_retries(args)
    try:
        h.start_behind(haproxy, instances)
        out_path = os.path.join(workdir, "load.out")
        err_path = os.path.join(workdir, "load.err")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            load = h.spawn(load_command(examples, fe_port, tls, args), out, err)
        load_start = time.monotonic()
        note(f"both instances UP in HAProxy; {args.client} load started")
        time.sleep(args.warmup)
        for inst in instances:
            term_at, _, down_at = rr.restart_one(haproxy, inst, delay_ms, args.settle, note, problems,
                                                 load_start=load_start)
            if delay_ms > 0 and (down_at is None or down_at - term_at > delay_ms / 1000):
                # The window is the balancer's time to stop sending new connections: past it,
                # a connection HAProxy still sends there is refused (close-listener mode) or
                # answered with rejections (retry-after mode).
                late = "not DOWN before it exited" if down_at is None else f"DOWN +{down_at - term_at:.2f}s"
                result["late_down"].append(f"{inst.name} {late}")
                notes.append(
                    f"HAProxy had {inst.name} {late} after SIGTERM, later than the end of its "
                    f"{h.fmt_ms(delay_ms)} window (the detection model's worst case: {rr.DETECTION_MS}ms): "
                    f"new connections still went to {inst.name} after it (a busy machine eats the margin)"
                )
        if time.monotonic() - load_start > args.duration - 0.5:
            problems.append("the rolling restart outlasted the load: rerun with a longer --duration")
        code = h.reap(load, args.duration + CALL_TIMEOUT_S + 30)
        with open(out_path, "r", errors="replace") as f:
            text = f.read()
        if code != 0 or not text.strip():
            with open(err_path, "r", errors="replace") as f:
                err_text = f.read()[-3000:]
            raise RuntimeError(f"{args.client} load exited {code}:\n{text}\n{err_text}")
        counts = load_counts(args.client, text)
        if counts["stuck"]:
            problems.append(f"{counts['stuck']} grpcio workers still in a call after the load ended")
        retried = sum(counts["retries"].values())
        note(
            f"load done: {counts['calls']} calls, {counts['failed']} failed; "
            f"{retried} retries (at most {retries} per call)"
        )
        for kind, n in sorted(counts["failures"].items()):
            note(f"  failed: {n} x {kind}")
        for kind, n in sorted(counts["retries"].items()):
            note(f"  retried: {n} x {kind}")
        for example in counts["examples"]:
            # grpcio_load.py's times count from its own start: on this run's clock, they say
            # where the call ended among the SIGTERMs, exits and restarts above.
            at = re.search(r"\(\+(\d+\.\d+)s, ", example)
            when = ""
            if at and counts["start_unix"] is not None:
                when = f" (ended at {counts['start_unix'] + float(at.group(1)) - t0_unix:.2f}s on this run's clock)"
            note(f"  first of its kind{when}: {example}")
        if counts["failed"] and args.client == "tonic":
            # grpc_load prints the first failed call of each kind with its causes.
            with open(err_path, "r", errors="replace") as f:
                for line in f:
                    if line.startswith("failed call: "):
                        text = line[len("failed call: "):].strip()
                        at = re.search(r"\(ended (\d+\.\d+)s after the load started\)", text)
                        if at:
                            ended = load_start - t0 + float(at.group(1))
                            text = text[: at.start()] + f"(ended at {ended:.2f}s on this run's clock)"
                        note(f"  first of its kind: {text}")
        if counts["with_pushback"]:
            note(
                f"  {counts['with_pushback']} of the failed calls carried grpc-retry-pushback-ms "
                f"(a client with a retry policy would have retried them)"
            )
        result.update(
            requests=counts["calls"], failed=counts["failed"], failures=counts["failures"],
            retries=counts["retries"], examples=counts["examples"],
        )
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        h.stop_behind(haproxy, instances, [load])
        # A failed call with the lame-duck window is a finding: its logs are kept (the
        # baseline without it is expected to fail calls).
        if not keep_dir and not problems and not (delay_ms and result.get("failed")):
            shutil.rmtree(workdir, ignore_errors=True)
    result.update(events=events, problems=problems, notes=notes, workdir=workdir, duration_s=round(time.monotonic() - t0, 1))
    return result


def fmt_kinds(kinds, width=None):
    """`n x STATUS: message`, most frequent first; each cut to `width` characters (the tables:
    the runs' logs above them have the whole messages)."""
    cut = lambda k: k if width is None or len(k) <= width else k[: width - 3] + "..."  # noqa: E731
    return "; ".join(f"{n} x {cut(k)}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def delay_txt(r):
    return h.fmt_ms(r["delay_ms"]) + (" (naive baseline)" if r["delay_ms"] == 0 else "")


def tables(results, markdown=False):
    """One row per run, then the totals per mode and delay over the repetitions."""
    fmt = lambda v: "error" if v is None else str(v)  # noqa: E731
    head = ["run", "mode", "shutdown delay", "calls", "failed", "failures", "retries", "time"]
    rows = [
        [
            str(r["run"]), r["mode"], delay_txt(r), fmt(r["requests"]), fmt(r["failed"]),
            fmt_kinds(r["failures"], 70), str(sum(r["retries"].values())), f"{r['duration_s']:g}s",
        ]
        for r in results
    ]
    totals = {}
    # Kinds merged over the runs without their port numbers (each run has its own ports).
    anyport = lambda k: re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", k)  # noqa: E731
    for r in results:
        totals.setdefault((r["mode"], r["delay_ms"]), []).append(r)
    head2 = ["mode", "shutdown delay", "runs", "calls", "failed", "failed per run", "failures"]
    rows2 = []
    for rs in totals.values():
        done = [r for r in rs if r["failed"] is not None]
        kinds = {}
        for r in done:
            for k, n in r["failures"].items():
                kinds[anyport(k)] = kinds.get(anyport(k), 0) + n
        rows2.append(
            [
                rs[0]["mode"], delay_txt(rs[0]), str(len(rs)),
                str(sum(r["requests"] for r in done)), str(sum(r["failed"] for r in done)),
                ",".join(fmt(r["failed"]) for r in rs), fmt_kinds(kinds, 70),
            ]
        )
    sep = "\n\n" if markdown else "\n\ntotals:\n"
    return h.table(head, rows, markdown) + sep + h.table(head2, rows2, markdown)


# The short form, CI's run (see harness.cli), without the baseline (reported, never asserted):
# HTTP/2 through HAProxy under tonic, both modes; over TLS pass-through in retry-after mode;
# HAProxy mode tcp under grpcio in close-listener mode.
SHORT = [
    ["--baseline-modes", ""],
    ["--tls", "--modes", "B", "--baseline-modes", ""],
    ["--l4", "--client", "grpcio", "--modes", "A", "--baseline-modes", ""],
]


# The full form, the release check: the three fronts, each in both modes and with the baseline
# (grpcio in close-listener mode alone: it retries no UNAVAILABLE, which retry-after mode's
# rejections are).
FULL = [[], ["--tls"], ["--l4", "--client", "grpcio", "--modes", "A"]]


def main(argv=None):
    p = h.parser("rolling_restart_grpc", __doc__)
    p.add_argument("--modes", default="A,B", help="lameduck modes to run (A, B)")
    p.add_argument("--baseline-modes", default="A", help="modes of the --shutdown-delay 0s baseline ('' for none)")
    p.add_argument("--duration", type=int, default=16, help="seconds of load per run (>= 15)")
    p.add_argument("--runs", type=int, default=1, help="repeat the whole plan this many times")
    p.add_argument("--client", default="tonic", choices=CLIENTS, help="the load: grpc_load (tonic) or grpcio_load.py")
    p.add_argument("--connections", type=int, default=8, help="tonic: HTTP/2 connections of the load client")
    p.add_argument("--concurrency", type=int, default=4, help="tonic: calls in flight per connection")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds of load before the first SIGTERM")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between an UP and the next SIGTERM")
    front = p.add_mutually_exclusive_group()
    front.add_argument("--l4", action="store_true", help="HAProxy in mode tcp in front, plaintext h2c passed through")
    front.add_argument(
        "--tls",
        action="store_true",
        help="TLS end to end: the instances serve TLS, HAProxy in mode tcp passes it through",
    )
    p.add_argument(
        "--retries",
        type=int,
        help="the load's --retries (tonic: calls never sent and UNAVAILABLE with pushback; grpcio: "
        "UNAVAILABLE); default 3 for tonic with --l4 or --tls, else 0",
    )
    h.add_run_options(p, json=False)
    p.add_argument("--bin-dir", help="take grpc_server and grpc_load from this directory (implies --no-build)")
    p.add_argument("--markdown", help="also write the tables as Markdown to this file")
    h.add_forms(p, SHORT, FULL)
    args = p.parse_args(argv)
    if args.duration < 15:
        p.error("--duration must be at least 15 s")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    modes = h.parse_list(p, args.modes, rr.MODES, "mode", least=0)
    baseline_modes = h.parse_list(p, args.baseline_modes, rr.MODES, "mode", least=0)
    if not h.check_tools("haproxy", hint="apt-get install -y haproxy"):
        return 2
    if args.tls and not h.check_tools("openssl", hint="apt-get install -y openssl"):
        return 2
    if args.client == "grpcio":
        why = h.grpcio_missing(load=True)
        if why:
            h.log(f"error: {why}")
            return 2
    examples = h.ready_examples([BINARY] + (["grpc_load"] if args.client == "tonic" else []), args)
    if examples is None:
        return 2
    if args.tls:
        front = "mode tcp (TLS passed through to the instances), health checks over TLS"
    elif args.l4:
        front = "mode tcp (h2c passed through to the instances), health checks in HTTP/1.1"
    else:
        front = "HTTP/2 frontend and backends"
    h.log(
        f"HAProxy: {front}, option httpchk GET /readyz, inter {rr.INTER_MS}ms, "
        f"fall {rr.FALL}, rise {rr.RISE}, timeout check {rr.CHECK_TIMEOUT_MS}ms, retries 0; "
        f"--shutdown-delay {h.fmt_ms(rr.SHUTDOWN_DELAY_MS)}; binaries from {examples}"
    )
    if args.client == "grpcio":
        shape = f"grpcio_load.py (grpcio), {GRPCIO_CHANNELS} channels x {GRPCIO_WORKERS} workers in all"
    else:
        shape = f"grpc_load (tonic), {args.connections} connections x {args.concurrency} calls in flight"
    h.log(
        f"load: {shape}, unary Sleep(20ms), {CALL_TIMEOUT_S}s deadline, {args.duration}s, "
        f"application retries {default_retries(args)}"
        + (", TLS verified against the run's CA" if args.tls else "")
    )
    plan = [(m, rr.SHUTDOWN_DELAY_MS) for m in modes] + [(m, 0) for m in baseline_modes]
    results = []
    started = time.monotonic()
    for run in range(1, args.runs + 1):
        for mode, delay_ms in plan:
            h.log(f"\n==> run {run}/{args.runs}: {BINARY}, mode {mode}, --shutdown-delay {h.fmt_ms(delay_ms)}")
            r = run_one(examples, mode, delay_ms, args, args.keep)
            r["run"] = run
            h.log_run(r, r["problems"] or (delay_ms and r.get("failed")) or args.keep)
            # A busy machine slows the load and the instances alike: the 1-minute load average
            # says how busy it was.
            h.log(f"    run took {r['duration_s']:g}s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
            results.append(r)
    h.log("\n" + tables(results))
    h.log(f"\n{len(results)} runs in {time.monotonic() - started:.0f}s")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(tables(results, markdown=True) + "\n")
    bad = []
    for r in results:
        what = f"run {r['run']} mode {r['mode']} delay {h.fmt_ms(r['delay_ms'])}"
        if r["delay_ms"] == 0:
            continue
        if r["problems"] or r["failed"] is None:
            bad.append(f"{what}: run problems")
        elif r["failed"] != 0:
            late = f" (HAProxy DOWN after the window: {', '.join(r['late_down'])})" if r["late_down"] else ""
            bad.append(f"{what}: {r['failed']} failed calls (want 0){late}: {fmt_kinds(r['failures'])}")
    return h.conclude(bad, f"0 failed gRPC calls with the lame-duck window, in each of {args.runs} runs.")

