"""Long-lived connections behind a layer-4 balancer: a Kubernetes-style rolling update of two
pods under a real HTTP/2 (or HTTP/1 keep-alive) client, through HAProxy in `mode tcp`.

A TCP balancer (kube-proxy, IPVS, a cloud network load balancer) never moves an open
connection: removing an endpoint only stops new connections from reaching it. Only the pod
itself, with an HTTP/2 GOAWAY or an HTTP/1 `Connection: close`, moves its clients. And once
every connection has landed somewhere, nothing spreads them again unless the pods close a
few of them now and then (`--goaway-chance`, kube-apiserver's answer).

Per run, for one example server, one protocol, one shutdown mode and one goaway chance:

  1. pods p1 and p2 start on 127.0.0.1; HAProxy (`mode tcp`, `balance roundrobin`, no health
     checks, `retries 0`, no redispatch: as kube-proxy behaves) has them as endpoints, and the
     slots of the pods to come (p3, p4) declared `disabled`;
  2. tests/proofs/l4/h2client (Go: golang.org/x/net/http2 prior-knowledge h2c, or net/http
     HTTP/1 keep-alive) runs several independent transports with several workers each, on `/`
     and `/sleep?duration=20ms`, retrying after a Retry-After as client-go does (a 429 or 5xx
     answer with Retry-After: client-go's checkWait), nothing else;
  3. for each old pod: the new pod starts, its /readyz answers 200, its endpoint is enabled
     (runtime API, `enable server`); the client connections HAProxy has on the old pod are
     noted (`show sess all`: the pod's pinned connections, by client port); the old pod gets
     SIGTERM, its endpoint is disabled 1 s later (`disable server`), and it must exit 0 within
     its shutdown delay plus a bound;
  4. from the end of the rollout, 10 s of load: each pod's share of the traffic is the bytes
     HAProxy forwarded from it to clients over the window, read at both ends of the window
     (see `Balancer.bytes_out`). Bytes, not `stot`: `stot` counts connections, and with a few
     long-lived connections a connection says nothing about how much traffic it carries. All
     responses here are small and alike, so bytes track requests;
  5. the client stops and reports requests, failures, retries and dials (connections), and
     what it saw of each connection (its GOAWAYs, and whether the server closed it).

TLS pass-through (protocols `h2-tls` and `http1-tls`): the same rollout with the pods serving
TLS (`--tls-cert-file`, `--tls-private-key-file`: a throwaway CA and a certificate for IP
127.0.0.1 made with the openssl CLI in the run's directory) and HAProxy still in `mode tcp`,
so the TLS sessions pass through it to the pods, as behind a network load balancer. The
client verifies the pods' certificate against that CA (name 127.0.0.1) and offers one ALPN
protocol, h2 or http/1.1; a connection that negotiated anything else is a failure.

Asserted: 0 failed requests, the replaced pods exit 0, over HTTP/2 (h2c, h2-tls) every
connection pinned to an old pod received a GOAWAY (and every old pod had pinned connections),
and no connection was closed by the server without a GOAWAY first, and in close-listener mode
(A) no request was retried (a stream that races the GOAWAY is served, never answered 503).
Each replaced pod logged its termination summary with no late connection (late_connections=0)
and no late-connections warning: its endpoint was removed 1 s into the 3 s shutdown delay, so
the balancer sent it nothing new in the last part of the delay. Over HTTP/2 that holds
although requests kept coming: the pod's last new request (last_new_request) must come after
its endpoint's removal, as the clients keep sending on the connections pinned to it until its
GOAWAY. Those requests are not the balancer's decision: they may count as late requests, and
call for no warning. (Asserted with goaway chance 0 only: a goaway chance moves every pinned
connection within moments, so its last request races the endpoint's removal.) With a goaway
chance > 0 every pod's share is within 25% of an even share, with at least 10 new connections
in the window per client connection (an even share from connections that never moved would be
the rollout's luck). With chance 0 the skew is printed, not asserted. The control
(`bare_axum --graceful-shutdown`: axum's own graceful shutdown, no lame-duck window) goes
through the same rollout and must lose requests: it shows the test can fail.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every run passed; 1 otherwise; 2 on a setup problem.
"""

import json
import os
import shutil
import tempfile

import harness as h
from rolling.l4_report import table, verdict
from rolling.l4_rollout import ENDPOINT_REMOVAL_S, PROTOCOLS, SHUTDOWN_DELAY, TLS_PROTOCOLS, run_one

# The control (bare_axum) has no TLS flags.
CONTROL_PROTOCOLS = ["h2c", "http1"]
MODES = ["A", "B"]
CONTROL = "bare_axum"
# Built besides the example servers (see catalog.py): the control.
BUILDS = [["-p", "lameduck-bench", "--bin", CONTROL]]
# The short form, CI's run (see harness.cli): six rollouts that take each protocol (h2c, http1
# and both over TLS), each mode and each goaway chance at least once, HTTP/2 and HTTP/1 in each
# mode and with each chance, on tokio_server, axum_server and actix_server; then the control
# on h2c; 1 s of load before each rollout and 6 s after it.
SHORT = [[
    "--cases",
    "tokio_server:http1:A:0.02,axum_server:h2c:B:0.02,actix_server:h2c:A:0,actix_server:http1:B:0,"
    "tokio_server:h2-tls:A:0,actix_server:http1-tls:B:0",
    "--control", "h2c", "--warmup", "1", "--window", "6",
]]



# The full form, the release check: every runtime on h2c and http1, both modes and chances, and
# the control on both; then over TLS pass-through (h2-tls, http1-tls), without the control.
FULL = [[], ["--protocols", "h2-tls,http1-tls", "--control", ""]]


def parse_args(argv):
    """The options, and the cases they ask for: (runtime, protocol, mode, goaway chance)
    quadruples, then the control's protocols."""
    p = h.parser("rolling_restart_l4", __doc__)
    h.add_runtimes(p)
    p.add_argument(
        "--protocols", default="h2c,http1", help="h2c, http1, h2-tls, http1-tls (the last two: TLS pass-through)"
    )
    p.add_argument(
        "--pairs", default="", help="runtime:protocol pairs to run instead of --runtimes x --protocols"
    )
    p.add_argument("--modes", default="A,B", help="lameduck modes (A, B)")
    p.add_argument("--goaway-chances", default="0,0.02", help="comma-separated --goaway-chance values")
    p.add_argument(
        "--cases", default="",
        help="runtime:protocol:mode:chance quadruples to run instead of the pairs x --modes x --goaway-chances",
    )
    p.add_argument("--control", default="h2c,http1", help="protocols of the control run: h2c, http1 ('' for none)")
    p.add_argument("--transports", type=int, default=4, help="independent client transports")
    p.add_argument("--workers", type=int, default=8, help="workers per transport")
    p.add_argument("--http1-conns", type=int, default=4, help="http1: connections per transport")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before the rollout")
    p.add_argument("--window", type=float, default=10.0, help="seconds of measured load after the rollout")
    p.add_argument("--exit-timeout", type=float, default=30.0, help="bound on a pod's exit after SIGTERM")
    h.add_run_options(p)
    h.add_forms(p, SHORT, FULL)
    args = p.parse_args(argv)

    def chance(text):
        try:
            return float(text)
        except ValueError:
            p.error(f"goaway chance {text!r}: not a number")

    runtimes = h.parse_runtimes(p, args.runtimes)
    protocols = h.parse_list(p, args.protocols, PROTOCOLS, "protocol")
    pairs = [(r, q) for r in runtimes for q in protocols]
    if args.pairs:
        pairs = [tuple(x.split(":", 1)) for x in args.pairs.split(",") if x]
        for r, q in pairs:
            h.parse_runtimes(p, r)
            h.parse_list(p, q, PROTOCOLS, "protocol")
    modes = h.parse_list(p, args.modes, MODES, "mode")
    chances = [chance(c) for c in args.goaway_chances.split(",") if c]
    cases = [(r, q, m, c) for r, q in pairs for m in modes for c in chances]
    if args.cases:
        cases = []
        for x in [x for x in args.cases.split(",") if x]:
            parts = x.split(":")
            if len(parts) != 4:
                p.error(f"--cases: {x!r} is not runtime:protocol:mode:chance")
            h.parse_runtimes(p, parts[0])
            h.parse_list(p, parts[1], PROTOCOLS, "protocol")
            h.parse_list(p, parts[2], MODES, "mode")
            cases.append((parts[0], parts[1], parts[2], chance(parts[3])))
    controls = h.parse_list(p, args.control, CONTROL_PROTOCOLS, "control protocol", least=0)
    return args, cases, controls


def main(argv=None):
    args, cases, controls = parse_args(argv)
    tools = ("haproxy", "go") + (("openssl",) if any(q in TLS_PROTOCOLS for _, q, _, _ in cases) else ())
    if not h.check_tools(*tools, hint="apt-get install -y haproxy golang-go golang-golang-x-net-dev openssl"):
        return 2
    if not args.no_build:
        for cmd in [["--examples"], *BUILDS]:
            if not h.cargo_build(*cmd):
                return 2
    release = os.path.join(h.target_dir(), "release")
    build_dir = tempfile.mkdtemp(prefix="h2client-")
    try:
        return run_cases(args, release, build_dir, cases, controls)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def run_cases(args, release, build_dir, cases, controls):
    client_bin = h.build_h2client(build_dir)
    if client_bin is None:
        return 2

    plan = []
    for runtime, proto, mode, chance in cases:
        binary = os.path.join(release, "examples", runtime)
        if not os.path.isfile(binary):
            h.log(f"error: {binary} does not exist")
            return 2
        plan.append((binary, dict(runtime=runtime, protocol=proto, mode=mode, chance=chance, control=False)))
    for proto in controls:
        binary = os.path.join(release, CONTROL)
        plan.append((binary, dict(runtime=CONTROL, protocol=proto, mode="-", chance=0.0, control=True)))

    h.log(
        f"HAProxy mode tcp, balance roundrobin, no health checks, retries 0; endpoint removed "
        f"{ENDPOINT_REMOVAL_S:g}s after SIGTERM; --shutdown-delay {SHUTDOWN_DELAY}; client "
        f"{args.transports} transports x {args.workers} workers on / and /sleep?duration=20ms"
    )
    results = []
    for binary, case in plan:
        what = "control, axum's graceful shutdown" if case["control"] else f"mode {case['mode']}"
        h.log(f"\n==> {case['runtime']}, {case['protocol']}, {what}, goaway chance {case['chance']:g}")
        r = run_one(binary, case, args, client_bin)
        keep_logs = verdict(r) or args.keep
        h.log_run(r, keep_logs)
        if not keep_logs:
            shutil.rmtree(r["workdir"], ignore_errors=True)
        results.append(r)

    h.log("\n" + table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    bad = []
    for r in results:
        why = verdict(r)
        if why:
            bad.append(f"{r['runtime']} {r['protocol']} mode {r['mode']} chance {r['chance']:g}: {why}")
    control = "; the control lost requests" if any(r["control"] for r in results) else ""
    return h.conclude(bad, f"0 failed requests, exit 0 and no late connection through every rollout{control}.")
