"""The client half of the contract: lameduck-client's RetryLayer under Rust's clients loses no
request while servers restart, and never has a request processed twice.

  (a) gRPC rolling update behind HAProxy in `mode tcp` (rolling_restart_grpc's run: two
      grpc_server instances, health checks on /readyz, each restarted in turn), h2c and TLS
      passed through, close-listener mode (A) and retry-after mode (B): tonic's own client
      with the layer under it (`grpc_load --retries 3`: 4 attempts, no application retries)
      loses 0 calls in every run; the same client without the layer (`--retries 0`, the
      control) must lose calls.
  (b) HTTP/2 rolling update behind HAProxy in `mode tcp` of counting_server (the tokio
      example server, recording the requests it processed), both modes, and restarts on one
      host with `--shutdown-delay 0s` (socket activation: each generation inherits the
      listening socket; hand-over on SIGUSR2), under client_load (hyper-util's client with
      the layer; h2c for the rollouts, HTTP/1 keep-alive on one host): 0 failed requests.
  (c) servers that are not lameduck: Go's net/http restarted with Server.Shutdown behind the
      same balancer (goserver, h2c and HTTP/1; the control without the layer is reported),
      and an aiohttp server answering every fourth request 429 with Retry-After (seconds or an
      HTTP-date): 0 failed requests.
  (d) never twice: every client_load request carries a unique x-request-id, every HTTP server
      above records the id of each request it processed; no id may appear twice, the POSTs
      marked Retryable (one request in five) included, on lameduck's servers and aiohttp.
      Go's net/http is reported, not asserted: its Shutdown closes a connection it still
      counts idle although it has begun reading a request there (Go 1.19's closeIdleConns
      against conn.serve, between Peek and StateActive), then processes that request and
      cannot answer it; its client sees the connection closed before any response, which the
      layer retries for idempotent and marked requests only (RFC 9110 section 9.2.2), so such
      a request may be processed twice.

client_load counts a request failed when it ends with an error or a non-2xx status after the
layer's retries; a 429 or 503 the layer waited for and retried is not a failure. The gRPC
counts are grpc_load's (a call that does not end OK is failed).

Needs HAProxy, openssl (TLS), Go with golang.org/x/net/http2 (Debian's
golang-golang-x-net-dev) and aiohttp (pip install aiohttp). Loopback only; every process is
killed by its PID on every exit path; every wait is bounded.

Exit status: 0 when every assertion held; 1 otherwise; 2 on a setup problem.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import harness as h
from client import scenarios as s
from harness.builds import build_go

GROUPS = ["grpc", "http", "one-host", "go", "aiohttp"]
# What the proof builds besides the example servers (`python3 tests/proofs all`).
BUILDS = [["-p", "lameduck-client", "--examples"]]
# The controls (the same clients without the layer): the gRPC rollouts' (h2c and TLS, whose
# losses are asserted) and Go's net/http (reported).
CONTROLS = ["grpc-h2c", "grpc-tls", "go"]
# The gRPC rollouts' fronts: HAProxy passing h2c, or TLS through.
FRONTS = ["h2c", "tls"]
# The short form (CI's): 1 run of each configuration with the layer (the h2c gRPC rollouts in
# both modes, every other scenario), the controls of the h2c gRPC rollouts. The TLS front is
# the full form's: the layer sees the same GOAWAY frames inside TLS.
SHORT = [["--runs", "1", "--control-runs", "1", "--other-runs", "1", "--controls", "grpc-h2c", "--fronts", "h2c"]]
# The full form: the defaults (10 runs of each gRPC configuration, 2 controls, 3 of the others).
FULL = [[]]


def parse(argv):
    p = h.parser("client", __doc__)
    p.add_argument("--runs", type=int, default=10, help="runs of each gRPC configuration with the layer")
    p.add_argument("--control-runs", type=int, default=2, help="runs of each control (no layer)")
    p.add_argument("--other-runs", type=int, default=3, help="runs of each HTTP, one-host, Go and aiohttp scenario")
    p.add_argument("--groups", default=",".join(GROUPS), help="comma-separated: " + ", ".join(GROUPS))
    p.add_argument("--fronts", default=",".join(FRONTS),
                   help="the gRPC rollouts' fronts, comma-separated: " + ", ".join(FRONTS))
    p.add_argument("--controls", default=",".join(CONTROLS),
                   help="the controls to run, comma-separated (none: an empty list): " + ", ".join(CONTROLS))
    h.add_run_options(p)
    if hasattr(h, "add_forms"):
        h.add_forms(p, SHORT, FULL)
    else:  # the harness before --full
        h.add_short(p, SHORT)
    args = p.parse_args(argv)
    if min(args.runs, args.control_runs, args.other_runs) < 1:
        p.error("every number of runs must be at least 1")
    args.controls = h.parse_list(p, args.controls, CONTROLS, "control", least=0)
    args.fronts = h.parse_list(p, args.fronts, FRONTS, "front")
    return args, h.parse_list(p, args.groups, GROUPS, "group")


def plan(groups, args, examples, goserver):
    """(label, function) of every run, in order."""
    runs = []
    for front in args.fronts if "grpc" in groups else ():
        for mode in ("A", "B"):
            for k in range(1, args.runs + 1):
                runs.append(lambda f=front, m=mode, k=k: s.grpc_rollout(examples, f, m, k, True, args))
            for k in range(1, args.control_runs + 1 if f"grpc-{front}" in args.controls else 1):
                runs.append(lambda f=front, m=mode, k=k: s.grpc_rollout(examples, f, m, k, False, args))
    for k in range(1, args.other_runs + 1):
        if "http" in groups:
            for mode in ("A", "B"):
                runs.append(lambda m=mode, k=k: s.http_rollout(examples, None, "lameduck", "h2c", m, k, True, args))
        if "one-host" in groups:
            for how in ("socket activation", "hand-over"):
                runs.append(lambda w=how, k=k: s.one_host(examples, w, k, args))
        if "go" in groups:
            for proto in ("h2c", "http1"):
                runs.append(lambda p=proto, k=k: s.http_rollout(examples, goserver, "go", p, None, k, True, args))
        if "aiohttp" in groups:
            runs.append(lambda k=k: s.aiohttp_429(examples, k, args))
    if "go" in groups and "go" in args.controls:
        for k in range(1, args.control_runs + 1):
            runs.append(lambda k=k: s.http_rollout(examples, goserver, "go", "h2c", None, k, False, args))
    return runs


def fmt_kinds(kinds):
    return "; ".join(f"{n} x {k[:60]}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])) or "-"


def summary(results):
    """One row per scenario and layer: runs, requests, failed (and per run), retries,
    processed, twice."""
    groups = {}
    for r in results:
        groups.setdefault((r["scenario"], r["layer"]), []).append(r)
    rows = []
    for (scenario, layer), rs in groups.items():
        done = [r for r in rs if r["failed"] is not None]
        retries = {}
        for r in done:
            for k, n in r["retries"].items():
                retries[k] = retries.get(k, 0) + n
        processed = [r["processed"] for r in rs if r["processed"] is not None]
        rows.append([
            scenario, "layer" if layer else "control", str(len(rs)), str(sum(r["requests"] for r in done)),
            str(sum(r["failed"] for r in done)), ",".join("-" if r["failed"] is None else str(r["failed"]) for r in rs),
            ", ".join(f"{k} {n}" for k, n in sorted(retries.items())) or "-",
            str(sum(processed)) if processed else "n/a", str(sum(len(r["twice"]) for r in rs)),
        ])
    head = ["scenario", "client", "runs", "requests", "failed", "failed per run", "retries", "processed", "twice"]
    return h.table(head, rows)


def verdict(results):
    """The failed assertions."""
    bad = []
    controls = {}
    for r in results:
        what = f"{r['scenario']} run {r['run']} ({'layer' if r['layer'] else 'control'})"
        if r["twice"] and not r["scenario"].startswith("go"):
            bad.append(f"{what}: processed twice: {r['twice'][:5]}")
        if not r["layer"]:
            controls.setdefault(r["scenario"], []).append(r)
            continue
        if r["problems"] or r["failed"] is None:
            bad.append(f"{what}: {'; '.join(r['problems']) or 'no counts'}")
        elif r["failed"]:
            bad.append(f"{what}: {r['failed']} failed (want 0): {fmt_kinds(r['failures'])}")
    for scenario, rs in controls.items():
        lost = sum(r["failed"] or 0 for r in rs)
        if scenario.startswith("grpc") and lost == 0:
            bad.append(f"{scenario}: the control without the layer lost no call in {len(rs)} runs (want some)")
    return bad


def main(argv=None):
    args, groups = parse(argv)
    tools = ["haproxy", "openssl"] + (["go"] if "go" in groups else [])
    if not h.check_tools(*tools, hint="apt-get install -y haproxy openssl golang-go golang-golang-x-net-dev"):
        return 2
    if "aiohttp" in groups and subprocess.run([sys.executable, "-c", "import aiohttp"],
                                              capture_output=True, timeout=60).returncode != 0:
        h.log("error: python3 cannot import aiohttp: pip install aiohttp")
        return 2
    examples = h.ready_examples(["grpc_server", "grpc_load"], args)
    if examples is None:
        return 2
    if not args.no_build and not h.cargo_build(*BUILDS[0]):
        return 2
    for name in ("client_load", "counting_server"):
        if not os.path.isfile(os.path.join(examples, name)):
            h.log(f"error: {name} missing in {examples} (build without --no-build)")
            return 2
    scratch = tempfile.mkdtemp(prefix="client-go-")
    try:
        goserver = build_go(s.GOSERVER_DIR, scratch) if "go" in groups else None
        if "go" in groups and goserver is None:
            return 2
        runs = plan(groups, args, examples, goserver)
        h.log(f"client proof: {len(runs)} runs ({', '.join(groups)}); client_load and grpc_load with "
              f"{s.RETRIES} retries (4 attempts) through lameduck-client's RetryLayer")
        results, started = [], time.monotonic()
        for k, run in enumerate(runs, 1):
            r = run()
            bad = bool(r["problems"]) or (r["layer"] and bool(r["failed"])) or bool(r["twice"])
            h.log(f"\n==> [{k}/{len(runs)}] {r['scenario']} run {r['run']} ({'layer' if r['layer'] else 'control'}): "
                  f"{r['requests']} requests, {r['failed']} failed, retries {r['retries'] or '-'}, "
                  f"processed {r['processed'] if r['processed'] is not None else 'n/a'}, twice {len(r['twice'])}"
                  f" ({r['duration_s']:g}s)")
            h.log_run(r, bad or args.keep)
            results.append(r)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    h.log("\n" + summary(results))
    h.log(f"\n{len(results)} runs in {time.monotonic() - started:.0f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1, default=str)
            f.write("\n")
    return h.conclude(verdict(results), "0 failed requests with the layer in every run; the gRPC controls lost "
                      "calls; no request processed twice by lameduck's servers or aiohttp.")
