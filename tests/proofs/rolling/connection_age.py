"""Maximum connection age behind a layer-4 balancer: the example servers started with
`--max-connection-age AGE --max-connection-age-grace GRACE` (gRPC's MAX_CONNECTION_AGE and
_GRACE; goaway chance 0) spread long-lived HTTP/2 clients evenly over the pods behind HAProxy
in `mode tcp`, and no request is lost to it.

Without the age (goaway chance 0 too) a rollout skews the traffic and nothing corrects it
while the connections live: the rolling_restart_l4 proof prints a 16-70% deviation from an
even share after its rollouts (docs/l4-balancers.md); `--contrast` runs the first Go case
again without the age and prints its skew (not asserted).

Per run, for one example server, one client and one shutdown mode, the rolling_restart_l4
proof's rollout (rolling/l4_rollout.py's run_one): pods p1 and p2 behind HAProxy (`mode tcp`,
`balance roundrobin`, no health checks, `retries 0`, the slots of p3 and p4 declared
`disabled`); under load, p3 starts and its endpoint is added, p1 gets SIGTERM and its endpoint
is removed 1 s later (`--shutdown-delay 3s`), then the same with p4 and p2; then a measured
window of load on p3 and p4. The pods run with the age flags besides the rollout's. The
clients:

  go      tests/proofs/l4/h2client (Go's golang.org/x/net/http2 Transport, prior-knowledge
          h2c; the rolling_restart_l4 proof's client): --transports independent transports
          (one connection each while the server lets it) with --workers workers each, on `/`
          and `/sleep?duration=20ms`, retrying a 429 or 5xx with Retry-After as client-go
          does. Its connection log gives each connection's dial, first GOAWAY and end.
  grpcio  rolling/grpcio_load.py (Python's grpcio, the C-core client): 4 channels (one
          connection each) and 16 worker threads calling `Sleep(20ms)` with a 5 s deadline;
          grpc_server only. In close-listener mode grpcio as it is (its transparent retries
          only); in retry-after mode with 3 application retries of an UNAVAILABLE after its
          `grpc-retry-pushback-ms`, as a gRPC client with a retry policy (the pods answer
          calls on connections that reach them during their lame-duck window so).

Asserted, per run:

  * 0 failed requests (calls), and every replaced pod exits 0;
  * each pod's share of the traffic over the window after the rollout (HAProxy's bytes from
    each pod, as in rolling_restart_l4) within 20% of an even share (40% to 60%);
  * each connection's lifetime within [0.9 x AGE, 1.1 x AGE + SLACK]. The age is drawn
    within +-10% of AGE per connection; at its age the server sends the first GOAWAY and a
    PING, then the final GOAWAY once the PING is answered, and closes once the streams in
    flight are done. SLACK (--slack, 0.3 s, fixed) is for that round trip through the
    balancer, the load's requests in flight (20 ms each) and the scheduling of a busy 2-core
    machine. No request of the load outlives SLACK, so no stream holds a connection into its
    grace: a connection past the bound is one the server did not end. The grace (GRACE, 1 s)
    is passed to the pods but not reached: a connection cut at it would fail its requests.
    The lifetime is the pod's side of the connection, read from the kernel: /proc/net/tcp
    every 25 ms, from the first read that shows the pod's socket ESTABLISHED to the first
    that no longer does (its first FIN, whichever side sent it; a socket must be missing
    from two reads in a row, as one read is no snapshot), so each bound is widened by two
    reads (50 ms). Only the balancer's connections count: HAProxy logs each session with its
    source port towards the pod, and a socket of the pod's with no such session is left out
    (the proof's readiness checks; any other process's). HAProxy's own session times are not
    used: when its process is held up for longer than its poll's timeout, as on a busy
    machine, it takes the jump for a clock change and leaves it out of its times (they came
    out up to 0.74 s short). A read that comes more than 0.1 s late is a pause of the
    machine, when every process, the server's timers included, stood still: each bound is
    widened by the pauses within the connection's life, and the pauses are printed;
  * at least --min-conns such connections measured per run;
  * with Go's client, each of its connections that ended before the rollout's first SIGTERM
    or was dialled after the last old pod's exit received a GOAWAY, its first one within
    [0.9 x AGE, 1.1 x AGE + SLACK] of its dial (the client's own clock, widened by the
    machine's pauses).

Left out of the lifetimes: connections on a replaced pod that ended after its SIGTERM (ended
by the pod's termination, which has its own bounds: the rolling_restart_l4 proof), those
that ended after the load was told to stop or were still open (ended by the client), and the
pods' sockets that were not the balancer's.

Short form (CI): tokio_server and grpc_server under Go in close-listener mode, actix_server
under Go in retry-after mode, grpc_server under grpcio in close-listener mode; 1 s of load
before the rollout, 6 s after. Full form: every example server (tokio_server, axum_server,
smol_server, actix_server, grpc_server) under Go and grpc_server under grpcio, both modes;
10 s after the rollout; and the contrast, without the age.

Stdlib only (grpcio in its own process). Loopback only. Every process started here is killed
by its PID when the script ends, however it ends; every wait is bounded.

Exit status: 0 when every run passed; 1 otherwise; 2 on a setup problem.
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

import harness as h
from rolling.l4_rollout import ENDPOINT_REMOVAL_S, SHUTDOWN_DELAY, read_conn_log, run_one

CLIENTS = ["go", "grpcio"]
MODES = ["A", "B"]
SERVERS = h.RUNTIMES + ["grpc_server"]
# A share within 20% of even passes (two pods: between 40% and 60%).
SHARE_TOLERANCE = 0.20
# grpcio_load.py's shape, and its application retries in retry-after mode.
GRPCIO_CHANNELS = 4
GRPCIO_WORKERS = 16
GRPCIO_RETRIES_B = 3
# The pods' sockets are read this often (SocketWatch).
POLL_S = 0.025

SHORT = [[
    "--cases", "tokio_server:go:A,actix_server:go:B,grpc_server:go:A,grpc_server:grpcio:A",
    "--warmup", "1", "--window", "6",
]]
FULL = [["--contrast"]]


def parse_duration(text):
    """A Go-style duration of whole units (`2s`, `500ms`, `1m`) in seconds; None if not one."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for unit in ("ms", "s", "m"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * units[unit]
    return None


def parse_args(argv):
    p = h.parser("connection_age", __doc__)
    p.add_argument(
        "--cases", default="",
        help="server:client:mode triples (client go or grpcio; grpcio on grpc_server only); default: "
        "every server under go and grpc_server under grpcio, both modes",
    )
    p.add_argument("--age", default="2s", help="the pods' --max-connection-age")
    p.add_argument("--grace", default="1s", help="the pods' --max-connection-age-grace")
    p.add_argument("--slack", type=float, default=0.3, help="seconds allowed past 1.1 x the age")
    p.add_argument("--min-conns", type=int, default=8, help="connections whose lifetime must be measured per run")
    p.add_argument("--contrast", action="store_true", help="also the first Go case without the age (printed)")
    p.add_argument("--transports", type=int, default=8, help="go: independent client transports")
    p.add_argument("--workers", type=int, default=4, help="go: workers per transport")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before the rollout")
    p.add_argument("--window", type=float, default=10.0, help="seconds of measured load after the rollout")
    p.add_argument("--exit-timeout", type=float, default=30.0, help="bound on a pod's exit after SIGTERM")
    h.add_run_options(p)
    h.add_forms(p, SHORT, FULL)
    args = p.parse_args(argv)
    args.http1_conns = 1  # run_one's HTTP/1 option, unused over h2c
    args.age_s, args.grace_s = parse_duration(args.age), parse_duration(args.grace)
    if not args.age_s:
        p.error(f"--age {args.age!r}: a positive duration such as 2s")
    if args.grace_s is None:
        p.error(f"--grace {args.grace!r}: a duration such as 1s")
    if args.cases:
        cases = []
        for x in [x for x in args.cases.split(",") if x]:
            parts = x.split(":")
            if len(parts) != 3:
                p.error(f"--cases: {x!r} is not server:client:mode")
            h.parse_list(p, parts[0], SERVERS, "server")
            h.parse_list(p, parts[1], CLIENTS, "client")
            h.parse_list(p, parts[2], MODES, "mode")
            if parts[1] == "grpcio" and parts[0] != "grpc_server":
                p.error(f"--cases: {x!r}: grpcio runs against grpc_server only")
            cases.append(tuple(parts))
    else:
        cases = [(s, "go", m) for s in SERVERS for m in MODES] + [("grpc_server", "grpcio", m) for m in MODES]
    return args, cases


class GrpcioLoad:
    """grpcio_load.py as run_one's load: its command line and its report."""

    def __init__(self, retries):
        self.retries = retries

    def command(self, lb_port):
        return [
            sys.executable, h.GRPCIO_LOAD, "--target", f"127.0.0.1:{lb_port}",
            "--channels", str(GRPCIO_CHANNELS), "--workers", str(GRPCIO_WORKERS),
            "--duration", "300", "--sleep", "20ms", "--timeout", "5", "--retries", str(self.retries),
        ]

    def read(self, text, result, note):
        report = json.loads(text.splitlines()[-1])
        result.update(
            ok=report["ok"], failed=report["failed"], retries=report.get("retries", {}), dials=None,
            errors=[f"{n} x {k}" for k, n in report["errors"].items()] + report["examples"],
        )
        if report.get("stuck_workers"):
            # run_one records it as the run's problem.
            raise RuntimeError(f"{report['stuck_workers']} grpcio workers still in a call at the end")
        note(
            f"grpcio: {report['ok']} ok, {report['failed']} failed, {report['retried']} retried "
            f"{report.get('retries', {})}"
        )
        for e in result["errors"]:
            note(f"  grpcio failure: {e}")


class SocketWatch(threading.Thread):
    """The pods' side of every connection, from the kernel: /proc/net/tcp read every
    `interval` seconds; each ESTABLISHED socket whose local port is below the ephemeral range
    (a server's accepted socket: the pods listen there, see harness.free_port) is one
    connection from the poll that first sees it to the first that no longer does (its first
    FIN, whichever side sent it), when the next poll does not see it either: a read of
    /proc/net/tcp is no snapshot (the kernel fills it a page at a time, and a socket that
    moves meanwhile can be left out of one read). A gap between two polls longer than
    `interval` + 0.1 s is a pause of the machine (`pauses`): the connections' times are then
    known only to it."""

    def __init__(self, interval=POLL_S):
        super().__init__(daemon=True)
        self.interval, self.low = interval, ephemeral_low()
        self.done = threading.Event()
        self.open = {}  # (local port, remote port): first seen
        self.missing = {}  # (local port, remote port): the first poll that did not see it
        self.conns = []  # dicts: port (the pod's), remote, start, end (Unix seconds)
        self.pauses = []  # (from, to), Unix seconds

    def poll(self):
        seen = set()
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split(None, 4)
                if fields[3] != "01":
                    continue
                local, remote = fields[1], fields[2]
                if not local.startswith("0100007F:"):
                    continue
                port = int(local[9:], 16)
                if port < self.low:
                    seen.add((port, int(remote[9:], 16)))
        return seen

    def run(self):
        last = None
        while not self.done.is_set():
            try:
                seen = self.poll()
            except OSError:
                seen = set(self.open)
            now = time.time()
            if last is not None and now - last > self.interval + 0.1:
                self.pauses.append((last, now))
            last = now
            for key in seen - set(self.open):
                self.open[key] = now
            for key in seen:
                self.missing.pop(key, None)
            for key in set(self.open) - seen:
                if key not in self.missing:
                    self.missing[key] = now
                else:
                    end = self.missing.pop(key)
                    self.conns.append(dict(port=key[0], remote=key[1], start=self.open.pop(key), end=end))
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.join(timeout=5)

    def paused(self, start, end):
        """Seconds of pauses within [start, end]."""
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.pauses)


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def measured_conns(r, watch, sessions):
    """The pods' connections whose lifetimes count, each with its pod, and how many were left
    out for each reason."""
    pods = {port: pod for pod, port in r.get("ports", {}).items()}
    terms, stop = r.get("terms", {}), r.get("client_stop")
    balancer = {(s["server"], s["source_port"]) for s in sessions}
    kept, left = [], {"pod termination": 0, "client stop": 0, "not the balancer's": 0}
    for c in watch.conns:
        pod = pods.get(c["port"])
        if pod is None:
            continue
        if stop is None or c["end"] >= stop:
            left["client stop"] += 1
        elif pod in terms and c["end"] >= terms[pod][0]:
            left["pod termination"] += 1
        elif (pod, c["remote"]) not in balancer:
            left["not the balancer's"] += 1
        else:
            kept.append(dict(c, pod=pod))
    left["client stop"] += sum(1 for (port, _) in watch.open if port in pods)
    return kept, left


def goaway_ages(r, conns):
    """The Go client's connections that ended before the rollout's first SIGTERM or between
    the last old pod's exit and the client's stop (the others may have had a pod's
    termination GOAWAY): (dial, first GOAWAY or None), Unix seconds."""
    terms = list(r.get("terms", {}).values())
    stop = r.get("client_stop")
    if not terms or stop is None:
        return []
    first_term, last_exit = min(t[0] for t in terms), max(t[1] for t in terms)
    out = []
    for c in conns:
        end = c["end_ms"] / 1000
        if c["end_ms"] and (end < first_term or (last_exit < c["dial_ms"] / 1000 and end < stop)):
            out.append((c["dial_ms"] / 1000, c["goaway_ms"] / 1000 if c["goaways"] else None))
    return out


def spread(values):
    """(min, median, max) of `values`, or None when empty."""
    return (min(values), statistics.median(values), max(values)) if values else None


def within(args, start, end, watch, resolution):
    """Whether `end - start` is within [0.9 x age, 1.1 x age + slack], each bound widened by
    `resolution` and by the machine's pauses in between."""
    slack = resolution + watch.paused(start, end)
    return 0.9 * args.age_s - slack <= end - start <= 1.1 * args.age_s + args.slack + slack


def analyse(r, args, watch, contrast):
    """The run's lifetimes (the pods' sockets) and first GOAWAYs (the Go client's log), before
    its work directory goes."""
    path = os.path.join(r["workdir"], "haproxy.log")
    kept, left = measured_conns(r, watch, h.TcpBalancer.parse_sessions(path) if os.path.exists(path) else [])
    r["left_out"] = left
    r["lifetimes"] = sorted(c["end"] - c["start"] for c in kept)
    r["pauses"] = [round(b - a, 3) for a, b in watch.pauses]
    r["widened"] = sum(1 for c in kept if watch.paused(c["start"], c["end"]) > 0)
    r["goaway_ages"] = None
    conn_log = os.path.join(r["workdir"], "client.conns.jsonl")
    if r["client"] == "go" and os.path.exists(conn_log):
        ages = goaway_ages(r, read_conn_log(conn_log))
        r["goaway_ages"] = [None if g is None else g - d for d, g in ages]
        r["goaway_off"] = [
            f"dial {d:.3f}: first GOAWAY {g - d:.3f}s after" for d, g in ages
            if g is not None and not within(args, d, g, watch, 0.0)
        ]
    if contrast:
        return
    r["outside"] = [
        f"{c['pod']} (its port {c['port']}, the balancer's {c['remote']}): {c['end'] - c['start']:.3f}s "
        f"({(c['end'] - c['start']) / args.age_s:.2f} x)"
        for c in kept if not within(args, c["start"], c["end"], watch, 2 * watch.interval)
    ]


def verdict(r, args):
    """Why run `r` failed, or None (the contrast: only run problems)."""
    if r["problems"] or r["failed"] is None:
        return "run problems"
    if r["contrast"]:
        return None
    if r["failed"] != 0:
        return f"{r['failed']} failed requests (want 0)"
    bad_exits = {p: c for p, c in r["exits"].items() if c != 0}
    if bad_exits:
        return f"pods exited {bad_exits} (want 0)"
    if r["skew"] > SHARE_TOLERANCE:
        return f"a pod's share is {r['skew']:.1%} off even (want within {SHARE_TOLERANCE:.0%}): {r['shares']}"
    if len(r["lifetimes"]) < args.min_conns:
        return f"{len(r['lifetimes'])} connection lifetimes measured (want at least {args.min_conns})"
    if r["outside"]:
        return (
            f"{len(r['outside'])} of {len(r['lifetimes'])} connections lived outside [0.9, 1.1] x "
            f"{args.age} + {args.slack:g}s, e.g. {r['outside'][:5]}"
        )
    ages = r["goaway_ages"]
    if ages is not None:
        if len(ages) < args.min_conns:
            return f"{len(ages)} measured connections in the Go client's log (want at least {args.min_conns})"
        if None in ages:
            return f"{ages.count(None)} of {len(ages)} measured connections of the Go client got no GOAWAY"
        if r["goaway_off"]:
            return f"{len(r['goaway_off'])} first GOAWAYs outside [0.9, 1.1] x {args.age} + {args.slack:g}s: {r['goaway_off'][:5]}"
    return None


def multiples(values, age_s):
    m = spread([v / age_s for v in values if v is not None])
    return "/".join(f"{x:.2f}" for x in m) if m else "-"


def table(results, args, markdown=False):
    head = [
        "server", "client", "mode", "age", "requests", "failed", "retries", "conns (left out)",
        "lifetime min/median/max x age", "first GOAWAY x age", "shares p3/p4", "time",
    ]
    rows = []
    for r in results:
        fmt = lambda v: "error" if v is None else str(v)  # noqa: E731
        left = r.get("left_out", {})
        rows.append([
            r["runtime"], r["client"], r["mode"], "off (contrast)" if r["contrast"] else f"{args.age}/{args.grace}",
            fmt(r["ok"] if r["ok"] is None else r["ok"] + (r["failed"] or 0)), fmt(r["failed"]),
            str(sum((r["retries"] or {}).values())),
            f"{len(r.get('lifetimes', []))} ({sum(left.values())})",
            multiples(r.get("lifetimes", []), args.age_s),
            multiples(r.get("goaway_ages") or [], args.age_s) if r["client"] == "go" else "-",
            "/".join(f"{v:.1%}" for v in r["shares"].values()) or "-",
            f"{r['duration_s']:g}s",
        ])
    return h.table(head, rows, markdown)


def main(argv=None):
    args, cases = parse_args(argv)
    if not h.check_tools("haproxy", "go", hint="apt-get install -y haproxy golang-go golang-golang-x-net-dev"):
        return 2
    if any(c == "grpcio" for _, c, _ in cases):
        why = h.grpcio_missing(load=True)
        if why:
            h.log(f"error: {why}")
            return 2
    examples = h.ready_examples(sorted({s for s, _, _ in cases}), args)
    if examples is None:
        return 2
    build_dir = tempfile.mkdtemp(prefix="h2client-")
    try:
        client_bin = h.build_h2client(build_dir)
        if client_bin is None:
            return 2
        return run_cases(args, examples, client_bin, cases)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def run_cases(args, examples, client_bin, cases):
    age_flags = ["--max-connection-age", args.age, "--max-connection-age-grace", args.grace]
    plan = [(s, c, m, False) for s, c, m in cases]
    first_go = next(((s, c, m) for s, c, m in cases if c == "go"), None)
    if args.contrast and first_go:
        plan.append((*first_go, True))
    h.log(
        f"HAProxy mode tcp, balance roundrobin, no health checks, retries 0; endpoint "
        f"removed {ENDPOINT_REMOVAL_S:g}s after SIGTERM; --shutdown-delay {SHUTDOWN_DELAY}; pods with "
        f"--max-connection-age {args.age} --max-connection-age-grace {args.grace}, goaway chance 0; "
        f"lifetimes within [0.9, 1.1] x {args.age} + {args.slack:g}s"
    )
    results = []
    for server, client, mode, contrast in plan:
        h.log(f"\n==> {server}, {client}, mode {mode}" + (", without the age (contrast)" if contrast else ""))
        case = dict(
            runtime=server, protocol="h2c", mode=mode, chance=0.0, control=False, client=client,
            contrast=contrast, flags=[] if contrast else age_flags, session_log=True,
        )
        load = GrpcioLoad(GRPCIO_RETRIES_B if mode == "B" else 0) if client == "grpcio" else None
        watch = SocketWatch()
        watch.start()
        try:
            r = run_one(os.path.join(examples, server), case, args, client_bin, load=load)
        finally:
            watch.stop()
        r.setdefault("skew", None)
        try:
            analyse(r, args, watch, contrast)
        except (OSError, ValueError, KeyError) as e:
            r["problems"].append(f"reading the logs: {type(e).__name__}: {e}")
        if r["skew"] is None and not r["problems"]:
            r["problems"].append("no share measured")
        why = verdict(r, args)
        r["verdict"] = why
        lt = r.get("lifetimes", [])
        r["events"].append(
            f"lifetimes of {len(lt)} connections (x {args.age}): min/median/max {multiples(lt, args.age_s)}; "
            f"left out {r.get('left_out')}; {r.get('widened')} with the machine's pauses in their life "
            f"(pauses: {r.get('pauses')})"
        )
        if r.get("goaway_ages") is not None:
            r["events"].append(f"first GOAWAY after the dial (x {args.age}): {multiples(r['goaway_ages'], args.age_s)}")
        if contrast:
            r["events"].append(f"contrast, without the age: largest deviation from even {r['skew'] or 0:.1%}")
        keep_logs = bool(why) or args.keep
        h.log_run(r, keep_logs)
        if not keep_logs:
            shutil.rmtree(r["workdir"], ignore_errors=True)
        results.append(r)

    h.log("\n" + table(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    bad = [f"{r['runtime']} {r['client']} mode {r['mode']}: {r['verdict']}" for r in results if r["verdict"]]
    return h.conclude(
        bad,
        f"0 failed requests, shares within {SHARE_TOLERANCE:.0%} of even and every connection's lifetime "
        f"within [0.9, 1.1] x {args.age} + {args.slack:g}s in every run.",
    )
