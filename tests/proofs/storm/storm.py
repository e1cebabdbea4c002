"""Restart storm: lameduck's restarts on one host, once per second under heavy mixed load,
must lose nothing.

Per example server (tokio_server, axum_server, smol_server, actix_server: --runtimes) and per
restart method (--methods), three services run side by side, each its own chain of processes
on its own port, and all three are restarted together once per --interval (1 s) for
--duration seconds (--mode short: 60 s, --mode long: 600 s):

  http   the example server, plaintext;
  https  the same example server with TLS (`--tls-cert-file`, `--tls-private-key-file`: a
         throwaway CA and certificate from the harness's Tls);
  grpc   grpc_server (tonic on lameduck-tokio); --no-grpc leaves it out.

Restart methods:

  handover           generation 1 `--listen 127.0.0.1:PORT --handover-socket DIR/S.sock
                     --shutdown-delay 1s --shutdown-watch-termination-grace-period 3s`; each
                     restart starts the successor with `--listen handover` and the same flags,
                     waits until it bound the hand-over socket, then sends SIGUSR2 to the
                     running generation. The successor must print `listening on
                     SCHEME://127.0.0.1:PORT`; the old one must log `listeners handed over`.
  socket-activation  this script binds each port (backlog --backlog, 1024) and keeps it; every
                     generation gets it as descriptor 3 (LISTEN_FDS=1, LISTEN_FDNAMES=http,
                     LISTEN_PID = its own PID) with `--listen systemd --shutdown-delay D
                     --shutdown-watch-termination-grace-period 3s` (D: --shutdown-delay, 0s by
                     default, the harder case); each restart sends SIGTERM to the running
                     generation and at once starts the next one on the same socket.

Loads, all running the whole time (see loads.py): wrk keep-alive (`-t1 -c16`, GET /: one
thread, as the two cores of a small CI machine are shared by a dozen processes here) with a
keep-alive probe beside it that says how each lost request was lost; tests/proofs/l4/h2client
over h2c (golang.org/x/net/http2); h2client `-proto oneshot`: --rate (500) new connections per
second, one request each; 4 /watch streams open at all times, renewed as they end; h2client
`-proto h2-tls` against the TLS service; tests/proofs/rolling/grpcio_load.py (grpcio) unary
calls against grpc_server (skipped, with a note, when that script or Python's grpc module is
missing).

Recorded per (runtime, method), printed as tables and written with --json FILE: per load,
requests ok, failed by kind (with an example of each kind) and retried; connection refusals
(oneshot, every load's `refused`, wrk's connect errors) and resets; the kernel's
TcpExtListenOverflows and TcpExtListenDrops over the run (/proc/net/netstat: namespace-wide,
so other work on the host counts too); every generation's exit code; each generation's open
descriptors and VmRSS once it printed `listening on` and when it was signalled.

Asserted (exit status 1, logs kept, the problems listed): 0 failed requests of every kind
(every load), 0 refused connections, 0 listen overflows and drops, every generation exited 0
(and, with hand-over, logged `listeners handed over`), every planned restart done, the oneshot
client reached at least 95% of --rate, retries (the Go clients' Retry-After retries,
grpcio_load's retries) at most --max-retries (0), and no growth across generations: the
median of the last quarter of the replaced generations against the median of the second
quarter, descriptors at the signal at most --fd-slack (16) more and RSS at the signal at most
--rss-slack-mb (16) MB more. The bounds: every generation is a fresh process, so its count
at the signal is its baseline (listeners, runtime threads, logs) plus the connections it holds
then (wrk 16, probe 4, h2c 2, /watch 4, oneshot and gRPC ones in flight). Measured on a 2-core
machine over 60 generations: 19 to 53 descriptors at the signal depending on the service and
runtime, the quarters' medians at most 1 apart; RSS 7 to 8 MB, the medians at most 0.2 MB
apart. A distance of 16 is far above that noise and below the growth of one descriptor leaked
per generation (the medians are half the generations apart: 30 in short mode, 300 in long
mode); 16 MB is about two generations' whole RSS, which a leak passed from generation to
generation (an inherited buffer, a cache handed over) would exceed. The descriptors at a
generation's start are recorded, not asserted: connections pour in right after its
`listening on` line, so they vary by the dozen.

Reference points (--reference haproxy,nginx; off in short mode, on in long mode): the same
wrk, probe, oneshot and h2c loads against HAProxy's seamless master-worker reload and
nginx's `-s reload` (reference.py), reloaded once per interval for the same duration. Their
numbers are printed beside lameduck's; they never fail the script.

Run (the servers from `cargo build --release --examples` unless --no-build or --bin-dir; the
Go client with `GO111MODULE=off GOPATH=/usr/share/gocode go build`):

  python3 tests/proofs storm --mode short                  # 60 s per runtime and method
  python3 tests/proofs storm --mode long --json storm.json # 600 s each, with the references
  python3 tests/proofs storm --duration 20 --runtimes tokio_server --methods handover

A short run takes about 70 s per (runtime, method) (65-68 s measured), a long one about
10.2 minutes, a reference as long. Needs wrk, go with golang-golang-x-net-dev, openssl, bash,
and for the references haproxy and nginx. The script raises its descriptor limit as far as
allowed. Loopback only; every wait is
bounded; every process started here is killed by its PID on every exit path.

Exit status: 0 when every lameduck run passed; 1 otherwise; 2 on a setup problem.
"""

import os
import shutil
import tempfile
import threading
import time

import harness as h
from restart import common as c
from storm import chains as ch
from storm import loads as ld
from storm import reference as rf
from storm import report as rp

MODES = {"short": 60, "long": 600}
HANDOVER_DELAY = "1s"
# The short form, CI's run (see harness.cli): tokio_server and actix_server, each with hand-over
# and with socket activation, 12 s of restarts each.
SHORT = [["--mode", "short", "--duration", "12", "--runtimes", "tokio_server,actix_server"]]


def restart_together(services, bound):
    """Restarts every service at once (one thread each); raises when one of them failed."""
    errors = []

    def one(s):
        try:
            s.restart(bound)
        except Exception as e:  # reported by the caller
            errors.append(f"{s.name}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(s,), daemon=True) for s in services]
    for t in threads:
        t.start()
    for t in threads:
        t.join(bound + 10)
    if any(t.is_alive() for t in threads):
        errors.append(f"a restart still running {bound + 10:g}s after it began")
    if errors:
        raise RuntimeError("; ".join(errors))


def storm(a, services, plan, workdir, note):
    """Runs the loads `plan` for --warmup + --duration + --settle seconds and restarts
    `services` once per --interval from --warmup on; returns (load results, restarts done,
    planned, late ticks, error or None)."""
    seconds = a.warmup + a.duration + a.settle
    planned = int(a.duration / a.interval)
    done, late, error = 0, 0, None
    loads = ld.start(plan, a, workdir, seconds, a.client)
    t0 = time.monotonic()
    try:
        for k in range(planned):
            at = t0 + a.warmup + k * a.interval
            if at - time.monotonic() < -a.interval / 2:
                late += 1
            time.sleep(max(0.0, at - time.monotonic()))
            restart_together(services, a.restart_bound)
            done += 1
            for s in services:
                s.reap()
            if done % max(1, int(10 / a.interval)) == 0:
                note(f"+{time.monotonic() - t0:.0f}s: {done}/{planned} restarts")
        time.sleep(max(0.0, t0 + seconds - time.monotonic()))
    except Exception as e:  # the loads' results are still collected and reported
        error = f"{type(e).__name__}: {e}"
        note(f"storm stopped: {error}")
    # On an interrupt (KeyboardInterrupt, SIGTERM) the loads are not waited for:
    # harness.run_main kills every child by its PID.
    return ld.stop(loads), done, planned, late, error


def new_run(name, kind, workdir):
    return {"run": name, "kind": kind, "workdir": workdir, "problems": [], "notes": [], "events": [],
            "loads": [], "generations": {}, "listen": {}}


def run_lameduck(runtime, method, a):
    workdir = tempfile.mkdtemp(prefix=f"storm-{runtime}-{method}-")
    run = new_run(f"{runtime} {method}", "lameduck", workdir)
    run.update(runtime=runtime, method=method)
    t0 = time.monotonic()

    def note(msg):
        run["events"].append(f"{time.monotonic() - t0:7.2f}s {msg}")
        h.log(f"    {msg}")

    delay = HANDOVER_DELAY if method == "handover" else a.shutdown_delay
    exit_bound = ch.go_seconds(delay) + ch.go_seconds(ch.GRACE) + a.exit_slack
    specs = [("http", os.path.join(a.examples, runtime), "http", [])]
    specs.append(("https", os.path.join(a.examples, runtime), "https", a.tls.flags))
    if not a.no_grpc:
        specs.append(("grpc", os.path.join(a.examples, "grpc_server"), "http", []))
    services = []
    try:
        for name, binary, scheme, extra in specs:
            services.append(ch.Chain(name, binary, method, workdir, h.free_port(), scheme, extra, delay,
                                     a.backlog, exit_bound))
        for s in services:
            s.start_first()
        ports = {s.name: s.port for s in services}
        note("serving: " + ", ".join(f"{n} 127.0.0.1:{p}" for n, p in ports.items()))
        plan = {"wrk": ports["http"], "probe": ports["http"], "h2c": ports["http"], "oneshot": ports["http"],
                "watch": ports["http"], "h2-tls": ports["https"]}
        if "grpc" in ports and a.grpc_missing is None:
            plan["grpc"] = ports["grpc"]
        elif "grpc" in ports:
            run["notes"].append(f"gRPC load skipped: {a.grpc_missing}")
        before = ch.listen_counters()
        results, done, planned, late, error = storm(a, services, plan, workdir, note)
        for s in services:
            s.stop()
        after = ch.listen_counters()
        run["listen"] = {k: after[k] - before[k] for k in after}
        run["loads"] = results
        run["restarts"] = {"done": done, "planned": planned, "late_ticks": late}
        if error:
            run["problems"].append(f"the storm stopped early: {error}")
        for s in services:
            run["generations"][s.name] = rp.chain_summary(s)
            run["problems"] += s.problems() + ch.growth_problems(s, a.fd_slack, a.rss_slack_mb)
        rp.check_lameduck(run, a)
    except Exception as e:  # reported as a failed run, with the logs kept
        run["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        for s in services:
            s.kill()
    run["seconds"] = time.monotonic() - t0
    return run


def run_reference(kind, a):
    workdir = tempfile.mkdtemp(prefix=f"storm-ref-{kind}-")
    run = new_run(f"{kind} reload", "reference", workdir)
    t0 = time.monotonic()

    def note(msg):
        run["events"].append(f"{time.monotonic() - t0:7.2f}s {msg}")
        h.log(f"    {msg}")

    ref = rf.Reference(kind, workdir)
    try:
        ref.start()
        note(f"{kind} (pid {ref.proc.pid}) on 127.0.0.1:{ref.http_port} (HTTP/1.1) and :{ref.h2c_port} (h2c)")
        plan = {"wrk": ref.http_port, "probe": ref.http_port, "h2c": ref.h2c_port, "oneshot": ref.http_port}
        before = ch.listen_counters()
        results, done, planned, late, error = storm(a, [ref], plan, workdir, note)
        ref.stop()
        after = ch.listen_counters()
        run["listen"] = {k: after[k] - before[k] for k in after}
        run["loads"] = results
        run["restarts"] = {"done": done, "planned": planned, "late_ticks": late}
        run["generations"][kind] = ref.generations()
        rp.tally(run)
        if error:
            run["notes"].append(f"the storm stopped early: {error}")
    except Exception as e:  # a measurement: noted, never a failure
        run["notes"].append(f"{type(e).__name__}: {e}")
    finally:
        ref.kill()
    run["seconds"] = time.monotonic() - t0
    return run


def parse_args(argv):
    p = h.parser("storm", __doc__)
    p.add_argument("--mode", choices=sorted(MODES), default="short", help="short: 60 s per run; long: 600 s")
    p.add_argument("--duration", type=float, help="seconds of restarts per run (default: by --mode)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between restarts")
    p.add_argument("--runtimes", default=",".join(h.RUNTIMES), help="comma-separated example servers")
    p.add_argument("--methods", default=",".join(ch.METHODS), help="comma-separated: handover, socket-activation")
    p.add_argument("--shutdown-delay", default="0s", help="socket-activation: the servers' --shutdown-delay")
    p.add_argument("--backlog", type=int, default=1024, help="socket-activation: the listening sockets' backlog")
    p.add_argument("--no-grpc", action="store_true", help="leave grpc_server and its load out")
    p.add_argument("--reference", help="haproxy,nginx or none (default: none in short mode, both in long mode)")
    p.add_argument("--json", help="write the summary of every run to this file")
    p.add_argument("--fd-slack", type=int, default=16, help="descriptors a generation may hold more (see above)")
    p.add_argument("--rss-slack-mb", type=float, default=16.0, help="MB of RSS a generation may hold more")
    p.add_argument("--max-retries", type=int, default=0, help="retries (Retry-After, gRPC) that pass")
    p.add_argument("--rate", type=int, default=500, help="oneshot: new connections per second")
    p.add_argument("--wrk-threads", type=int, default=1)
    p.add_argument("--wrk-connections", type=int, default=16)
    p.add_argument("--wrk-path", default="/", help="wrk's path (e.g. /sleep?duration=20ms)")
    p.add_argument("--probe-connections", type=int, default=4, help="keep-alive probe connections beside wrk")
    p.add_argument("--h2-transports", type=int, default=2, help="h2c and h2-tls: client transports (connections)")
    p.add_argument("--h2-workers", type=int, default=4, help="h2c and h2-tls: workers per transport")
    p.add_argument("--watch-streams", type=int, default=4, help="/watch streams open at all times")
    p.add_argument("--grpc-channels", type=int, default=4)
    p.add_argument("--grpc-workers", type=int, default=16)
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before the first restart")
    p.add_argument("--settle", type=float, default=3.0, help="seconds of load after the last restart")
    p.add_argument("--restart-bound", type=float, default=15.0, help="seconds a restart may take")
    p.add_argument("--exit-slack", type=float, default=10.0,
                   help="seconds an old generation may take to exit beyond its delay + grace period")
    p.add_argument("--keep", action="store_true", help="keep every run's logs (failed runs always keep them)")
    c.add_build_flags(p)
    h.add_forms(p, SHORT)
    a = p.parse_args(argv)
    a.runtimes = h.parse_runtimes(p, a.runtimes)
    a.methods = h.parse_list(p, a.methods, ch.METHODS, "method")
    if a.duration is None:
        a.duration = MODES[a.mode]
    if a.reference is None:
        a.reference = "none" if a.mode == "short" else ",".join(rf.KINDS)
    a.reference = [] if a.reference == "none" else [k for k in a.reference.split(",") if k]
    for k in a.reference:
        if k not in rf.KINDS:
            p.error(f"unknown reference {k!r} (known: {', '.join(rf.KINDS)}, none)")
    if a.duration < a.interval or a.rate <= 0:
        p.error("--duration must be at least --interval, --rate positive")
    try:
        ch.go_seconds(a.shutdown_delay)
    except ValueError:
        p.error(f"--shutdown-delay {a.shutdown_delay!r}: want a duration like 0s, 500ms, 2s")
    return a


def main(argv=None):
    a = parse_args(argv)
    limit = h.raise_fd_limit()
    tools = ["wrk", "go", "openssl", "bash"] + a.reference
    if not h.check_tools(*tools):
        return 2
    a.examples = h.ready_examples([*a.runtimes] + ([] if a.no_grpc else ["grpc_server"]), a)
    if a.examples is None:
        return 2
    build_dir = tempfile.mkdtemp(prefix="storm-h2client-")
    a.tls = None
    try:
        a.client = h.build_h2client(build_dir)
        if a.client is None:
            return 2
        a.tls = h.Tls()
        a.grpc_missing = None if a.no_grpc else h.grpcio_missing(load=True)
        if a.grpc_missing:
            h.log(f"note: the gRPC load is skipped: {a.grpc_missing}")
        h.log(f"restart storm: {a.duration:g}s of restarts every {a.interval:g}s per run; descriptor limit {limit}; "
              f"wrk -t{a.wrk_threads} -c{a.wrk_connections} {a.wrk_path}, oneshot {a.rate}/s, h2c and h2-tls "
              f"{a.h2_transports}x{a.h2_workers}, {a.watch_streams} /watch, grpc "
              f"{'off' if a.no_grpc or a.grpc_missing else f'{a.grpc_channels} channels x {a.grpc_workers} workers'}")
        runs = []
        for runtime in a.runtimes:
            for method in a.methods:
                h.log(f"\n==> {runtime}, {method}")
                runs.append(run_lameduck(runtime, method, a))
                rp.log_run(runs[-1], a.keep)
        for kind in a.reference:
            h.log(f"\n==> reference: {kind} reload")
            runs.append(run_reference(kind, a))
            rp.log_run(runs[-1], a.keep)
        return rp.finish(runs, a)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
        if a.tls:
            shutil.rmtree(a.tls.dir, ignore_errors=True)

