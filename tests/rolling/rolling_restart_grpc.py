#!/usr/bin/env python3
"""Zero-downtime proof for gRPC: a rolling restart of the gRPC example server behind HAProxy
with HTTP/2 on both sides, under steady gRPC load.

The same procedure as rolling_restart.py (whose helpers this script reuses), with:

  * `grpc_server` instances, the HAProxy frontend bound with `proto h2` (h2c) and the backend
    servers reached with `proto h2`, health-checked on `GET /readyz` (every 250 ms, `fall 2`,
    `rise 2`, `timeout check 500ms`, `retries 0`, no `option redispatch`);
  * the load from the `grpc_load` example (tonic's client): unary `Sleep(20ms)` calls on
    several HTTP/2 connections with several calls in flight on each, counted by gRPC status.

With `--tls` the same rollout runs over TLS end to end: the instances serve TLS
(`--tls-cert-file`, `--tls-private-key-file`: a throwaway CA and a certificate for IP 127.0.0.1
made with the openssl CLI in the run's directory) and HAProxy is in `mode tcp`, passing the TLS
sessions through (as a network load balancer would), with the same health checks made over
TLS (`check-ssl`, verified against the CA). The load verifies the certificate against the CA
(`grpc_load --tls-ca`, name 127.0.0.1) and requires ALPN h2. Each of its HTTP/2 connections is
then pinned to one instance until that instance ends it: the lame-duck window has to move
every connection with a GOAWAY, not only the balancer's choice of backend for new ones.
The client does then what a gRPC client with a retry policy does (`grpc_load --retries 3`):
a call that never left it (tonic's hyper cancels calls queued on a connection that has just
received a GOAWAY; grpc-go retries these transparently) is retried at once, and an
`UNAVAILABLE` with `grpc-retry-pushback-ms` (mode B's answer) after its pushback. The retries
are reported by kind; a call that still fails is a failed call.

A failed call is any call that did not end with status OK. The shutdown delay is the one of
rolling_restart.py (HAProxy's worst-case detection plus a margin). The naive baseline
(`--shutdown-delay 0s`) is run and reported too; with HTTP/2 on both sides HAProxy may
absorb part of its damage, so only the lameduck runs are required to lose nothing.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every lameduck run lost 0 calls; 1 otherwise; 2 on a setup problem.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import rolling_restart as rr  # noqa: E402

BINARY = "grpc_server"


def tls_passthrough_haproxy(workdir, fe_port, servers, tls):
    """rolling_restart.py's HAProxy and health checks, in `mode tcp`: the TLS sessions pass
    through to the servers; the checks are made over TLS, verified against the CA."""
    haproxy = rr.HAProxy(workdir, fe_port, servers)
    with open(haproxy.cfg_path) as f:
        cfg = f.read()
    cfg = cfg.replace("    mode http\n", "    mode tcp\n")
    cfg = cfg.replace("    option http-keep-alive\n", "").replace("    http-reuse safe\n", "")
    cfg = re.sub(
        r"(    server \S+ 127\.0\.0\.1:\d+ check)\n",
        rf"\1 check-ssl verify required ca-file {tls.ca} check-alpn http/1.1\n",
        cfg,
    )
    with open(haproxy.cfg_path, "w") as f:
        f.write(cfg)
    return haproxy


def h2_haproxy(workdir, fe_port, servers):
    """rolling_restart.py's HAProxy, with HTTP/2 on the frontend and to the servers."""
    haproxy = rr.HAProxy(workdir, fe_port, servers)
    with open(haproxy.cfg_path) as f:
        cfg = f.read()
    cfg = cfg.replace(f"bind 127.0.0.1:{fe_port}\n", f"bind 127.0.0.1:{fe_port} proto h2\n")
    cfg = re.sub(r"(    server \S+ 127\.0\.0\.1:\d+ check)\n", r"\1 proto h2 check-proto h1\n", cfg)
    with open(haproxy.cfg_path, "w") as f:
        f.write(cfg)
    return haproxy


def run_one(examples, mode, delay_ms, args, keep_dir):
    workdir = tempfile.mkdtemp(prefix=f"rolling-grpc{'-tls' if args.tls else ''}-{mode}-{delay_ms}-")
    tls = h.TlsFiles(workdir) if args.tls else None
    flags = ["--shutdown-delay", rr.fmt_ms(delay_ms)]
    if mode == "B":
        flags.append("--shutdown-send-retry-after")
    binary = os.path.join(examples, BINARY)
    instances = [rr.Instance(binary, name, rr.free_port(), flags, workdir, tls=tls) for name in ("a", "b")]
    fe_port = rr.free_port()
    servers = [(i.name, i.port) for i in instances]
    haproxy = tls_passthrough_haproxy(workdir, fe_port, servers, tls) if tls else h2_haproxy(workdir, fe_port, servers)
    load = None
    events, problems = [], []
    t0 = time.monotonic()

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    result = {"runtime": BINARY, "mode": mode, "delay_ms": delay_ms, "requests": None, "failed": None}
    target = f"https://127.0.0.1:{fe_port}" if tls else f"http://127.0.0.1:{fe_port}"
    tls_args = ["--tls-ca", tls.ca] if tls else []
    retries = args.retries if args.retries is not None else (3 if tls else 0)
    try:
        for inst in instances:
            inst.start()
        haproxy.start()
        for inst in instances:
            haproxy.wait_status(inst.name, "UP", 15)
        note("both instances UP in HAProxy; starting gRPC load")
        out_path = os.path.join(workdir, "grpc_load.out")
        with open(out_path, "wb") as out:
            load = rr.spawn(
                [
                    os.path.join(examples, "grpc_load"),
                    "--target", target,
                    *tls_args,
                    "--retries", str(retries),
                    "--connections", str(args.connections),
                    "--concurrency", str(args.concurrency),
                    "--duration", f"{args.duration}s",
                    "--sleep", "20ms",
                ],
                out,
                subprocess.STDOUT,
            )
        load_start = time.monotonic()
        time.sleep(args.warmup)
        for inst in instances:
            term_at = time.monotonic()
            note(f"SIGTERM {inst.name} (pid {inst.proc.pid})")
            code = inst.terminate_and_wait(timeout=delay_ms / 1000 + 30)
            exit_at = time.monotonic()
            down_at = haproxy.first_transition(inst.name, "DOWN", term_at)
            down_txt = f"HAProxy DOWN +{down_at - term_at:.2f}s, " if down_at else ""
            note(f"{inst.name} exited {code}: {down_txt}exit +{exit_at - term_at:.2f}s after SIGTERM")
            if code != 0:
                problems.append(f"{inst.name} exited {code}:\n{inst.stderr_tail()}")
            restart_at = time.monotonic()
            inst.start()
            if delay_ms > 0:
                up_at = haproxy.wait_transition(inst.name, "UP", restart_at, 15)
            else:
                up_at = haproxy.wait_status(inst.name, "UP", 15)
            note(f"{inst.name} restarted (pid {inst.proc.pid}), HAProxy UP +{up_at - exit_at:.2f}s after restart")
            time.sleep(args.settle)
        if time.monotonic() - load_start > args.duration - 0.5:
            problems.append("the rolling restart outlasted the load: rerun with a longer --duration")
        code = rr.reap(load, args.duration + 30)
        with open(out_path, "r", errors="replace") as f:
            text = f.read()
        if code != 0:
            raise RuntimeError(f"grpc_load exited {code}:\n{text}")
        counts = json.loads(text.strip().splitlines()[-1])
        note(
            f"load done: {counts['calls']} calls, {counts['failed']} failed {counts['failures']}, "
            f"retries {counts.get('retries', {})} (at most {retries} per call)"
        )
        result.update(
            requests=counts["calls"], failed=counts["failed"], failures=counts["failures"], retries=counts.get("retries")
        )
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            rr.kill(load)
        haproxy.stop()
        for inst in instances:
            if inst.proc:
                rr.kill(inst.proc)
        if not keep_dir and not problems:
            shutil.rmtree(workdir, ignore_errors=True)
    result.update(events=events, problems=problems, workdir=workdir, duration_s=round(time.monotonic() - t0, 1))
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modes", default="A,B", help="lameduck modes to run (A, B)")
    p.add_argument("--baseline-modes", default="A", help="modes of the --shutdown-delay 0s baseline ('' for none)")
    p.add_argument("--duration", type=int, default=16, help="seconds of load per run (>= 15)")
    p.add_argument("--connections", type=int, default=8, help="HTTP/2 connections of the load client")
    p.add_argument("--concurrency", type=int, default=4, help="calls in flight per connection")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds of load before the first SIGTERM")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between an UP and the next SIGTERM")
    p.add_argument(
        "--tls",
        action="store_true",
        help="TLS end to end: the instances serve TLS, HAProxy in mode tcp passes it through",
    )
    p.add_argument(
        "--retries",
        type=int,
        help="grpc_load --retries: calls never sent and UNAVAILABLE with pushback (default 3 with --tls, else 0)",
    )
    p.add_argument("--no-build", action="store_true", help="use the existing release build")
    p.add_argument("--keep", action="store_true", help="keep every run's logs (failed runs always keep them)")
    p.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = p.parse_args()
    if args.duration < 15:
        p.error("--duration must be at least 15 s")
    modes = [m for m in args.modes.split(",") if m]
    baseline_modes = [m for m in args.baseline_modes.split(",") if m]
    for m in modes + baseline_modes:
        if m not in rr.MODES:
            p.error(f"unknown mode {m!r} (A or B)")
    if not shutil.which("haproxy"):
        rr.log("error: haproxy not found (apt-get install -y haproxy)")
        return 2
    if args.tls and not shutil.which("openssl"):
        rr.log("error: openssl not found (apt-get install -y openssl)")
        return 2
    if not args.no_build:
        rr.log("==> cargo build --release --example grpc_server --example grpc_load")
        build = ["cargo", "build", "--release", "--example", BINARY, "--example", "grpc_load"]
        if subprocess.run(build, cwd=rr.ROOT).returncode != 0:
            return 2
    examples = os.path.join(rr.target_dir(), "release", "examples")
    front = (
        "mode tcp (TLS passed through to the instances), health checks over TLS"
        if args.tls
        else "HTTP/2 frontend and backends"
    )
    rr.log(
        f"HAProxy: {front}, option httpchk GET /readyz, inter {rr.INTER_MS}ms, "
        f"fall {rr.FALL}, rise {rr.RISE}, timeout check {rr.CHECK_TIMEOUT_MS}ms, retries 0; "
        f"--shutdown-delay {rr.fmt_ms(rr.SHUTDOWN_DELAY_MS)}"
    )
    rr.log(
        f"load: grpc_load, {args.connections} connections x {args.concurrency} calls in flight, "
        f"unary Sleep(20ms), {args.duration}s" + (", TLS verified against the run's CA, ALPN h2" if args.tls else "")
    )
    plan = [(m, rr.SHUTDOWN_DELAY_MS) for m in modes] + [(m, 0) for m in baseline_modes]
    results = []
    for mode, delay_ms in plan:
        rr.log(f"\n==> {BINARY}, mode {mode}, --shutdown-delay {rr.fmt_ms(delay_ms)}")
        r = run_one(examples, mode, delay_ms, args, args.keep)
        rr.log_run(r, r["problems"] or args.keep)
        rr.log(f"    run took {r['duration_s']:g}s")
        results.append(r)
    rr.log("\n" + rr.table(results).replace("requests", "calls   "))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(rr.table(results, markdown=True).replace("requests", "calls") + "\n")
    bad = []
    for r in results:
        what = f"mode {r['mode']} delay {rr.fmt_ms(r['delay_ms'])}"
        if r["delay_ms"] == 0:
            continue
        if r["problems"] or r["failed"] is None:
            bad.append(f"{what}: run problems")
        elif r["failed"] != 0:
            bad.append(f"{what}: {r['failed']} failed calls (want 0)")
    if bad:
        rr.log("\nFAILED:\n  " + "\n  ".join(bad))
        return 1
    rr.log("\nOK: 0 failed gRPC calls with the lame-duck window.")
    return 0


if __name__ == "__main__":
    rr.run_main(main)
