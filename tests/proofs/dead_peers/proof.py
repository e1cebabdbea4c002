"""`python3 tests/proofs dead_peers`: peers cannot hold a termination. A connection holds the
exit only while it carries work in flight; one without work is closed at most 1 s after the
server stops accepting (or after its last stream ended), whatever its peer does, and a
response whose client stopped reading is work bounded by the request timeout, then cut.
Measured on every example server, and against Go's net/http server (kube-apiserver's).

Each example server (--runtimes: tokio_server, axum_server, smol_server, actix_server,
grpc_server) runs with `--listen 127.0.0.1:0 --shutdown-delay 1s
--shutdown-watch-termination-grace-period 3s --request-timeout 5s` (--delay, --grace,
--request-timeout), in each mode (--modes; A: close-listener, B: --shutdown-send-retry-after)
over each transport (--transports; h2c: plaintext, HTTP/2 with prior knowledge; tls: the
harness's throwaway certificate, ALPN h2 and http/1.1). Each run opens, in this order:
  * --http1 (2000) HTTP/1.1 keep-alive connections, each with one `GET /` answered, then idle
    (not on grpc_server);
  * --h2 (200) HTTP/2 connections that send one `GET /` (grpc_server: a gRPC health Check),
    read the whole answer, then never read or write again (the server's GOAWAY and PING stay
    unread and unanswered);
  * over TLS only, --tls-peers (200) TCP connections that never finish the handshake: half
    send nothing, half the first half of a ClientHello;
  * in the `+ws` rows (not on grpc_server), --streams (100) WebSockets on `/ws` that complete
    the handshake and then never read nor answer anything (the server's Close 1001 at their
    paced turn goes unanswered);
then --inflight (20) requests, sent --lead (0.2 s) before SIGTERM and lasting delay + lead
(1200ms): `GET /sleep` (half over HTTP/1.1, half over HTTP/2) or, on grpc_server, unary
`Sleep` calls. Then SIGTERM. The `unread` row instead opens two responses of
`GET /bytes?size=10000000`, one over HTTP/1.1 and one over HTTP/2 (h2c), each read for
100 KB and then not read any more (the socket stays open), with SIGTERM --lead later.

Asserted, per server and row:
  * every request in flight at SIGTERM completed: 200 `Welcome HTTP Server` (gRPC: OK);
  * the server exited 0, within delay + 1.5 s after SIGTERM; in the `+ws` rows within
    delay + grace + 1.5 s (the silent sockets are cut at the grace bound); in the unread row
    within delay + request timeout + 1.5 s;
  * its summary's `connections_cut` is at least the number of silent connections still open
    at SIGTERM (HTTP/2, TLS handshakes, WebSockets, unread responses; idle HTTP/1.1
    connections are closed at once and need not count), and a WARN line `the exit waited on
    silent peers` names each of their kinds (http2_goaway, tls_handshake, websocket_close,
    unread_response);
  * the unread responses' connections were cut about a request timeout after the server
    stopped accepting: delay + request timeout after SIGTERM, within 1.5 s;
  * it exited at most 0.25 s later than Go's net/http server in the same row.

The reference, tests/proofs/dead_peers/goserver (built offline in GOPATH mode with Debian's
golang-golang-x-net-dev), serves `/`, `/sleep` and `/bytes` on h2c and TLS (ALPN h2 and
http/1.1) and, on SIGTERM, sleeps the delay, calls Server.Shutdown bounded by the request
timeout and exits 0 (waiting, within the same bound, for the h2c connections Shutdown does
not count). It runs the rows of mode A without WebSockets: it has no WebSockets and one mode,
kube-apiserver's default; a row it cannot do (WebSockets, mode B, or a run where it lost a
request in flight) shows `-` and is not compared.

When each connection ended is watched from the client without reading (its TCP state) and
printed per kind; the table of exit times (row x server, Go last) ends the output, with `!`
on a failed run. --short is what CI runs: 500 idle HTTP/1.1, 50 HTTP/2, 50 TLS handshakes,
20 WebSockets, on tokio_server, actix_server and grpc_server, mode A, h2c and tls; it
waits for an exit at most bound + 10 s (otherwise --exit-timeout, 70 s, so that a server
that waits a minute is measured).

Needs Python's h2 package (pip install h2), Go with golang-golang-x-net-dev, openssl, and
the release build of the example servers (built unless --no-build). Loopback only. Raises the
open-files limit. Every process started here is killed by its PID when the proof ends,
however it ends; every wait is bounded.

Exit status: 0 when every assertion held in every run; 1 otherwise (each failure listed); 2 on
a setup problem (a missing tool, a failed build, a server that does not start, a connection
that cannot be opened).
"""

import os
import shutil
import tempfile
import time

import harness as h
from harness.builds import build_go
from dead_peers import report
from dead_peers.h2peer import h2_modules
from dead_peers.runs import Row, Target, run_row

SERVERS = [*h.RUNTIMES, "grpc_server"]
GOSERVER_DIR = os.path.join(h.PROOFS, "dead_peers", "goserver")
# The short form, CI's run (see harness.cli): fewer servers and connections, close-listener
# mode alone, and no wait for an exit past the row's bound + 10 s.
SHORT = [["--runtimes", "tokio_server,actix_server,grpc_server", "--modes", "A", "--http1", "500", "--h2", "50",
          "--tls-peers", "50", "--streams", "20", "--exit-timeout", "0"]]


def parse_args(argv):
    p = h.parser("dead_peers", __doc__)
    h.add_drain_arguments(p, 100, "silent WebSockets (in the +ws rows)")
    p.set_defaults(grace=3.0)
    h.add_runtimes(p, default=",".join(SERVERS))
    p.add_argument("--transports", default="h2c,tls", help="h2c (plaintext) and/or tls")
    p.add_argument("--http1", type=int, default=2000, help="idle HTTP/1.1 keep-alive connections (2000)")
    p.add_argument("--h2", type=int, default=200, help="silent HTTP/2 connections (200)")
    p.add_argument("--tls-peers", type=int, default=200, help="unfinished TLS handshakes, over TLS (200)")
    p.add_argument("--inflight", type=int, default=20, help="requests in flight at SIGTERM")
    p.add_argument("--request-timeout", type=float, default=5.0, help="--request-timeout, in seconds")
    p.add_argument("--lead", type=float, default=0.2, help="how long before SIGTERM the requests are sent, in seconds")
    p.add_argument("--exit-timeout", type=float, default=70.0,
                   help="the longest wait for an exit, in seconds, when longer than the row's bound + 10 s (70)")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    modes = h.drain_modes(p, args)
    servers = h.parse_runtimes(p, args.runtimes, known=SERVERS)
    transports = h.parse_list(p, args.transports, ("h2c", "tls"), "transport")
    if min(args.http1, args.h2, args.tls_peers) < 0 or args.inflight < 1 or args.request_timeout <= 0:
        p.error("the counts must be 0 or more, --inflight and --request-timeout positive")
    return args, modes, servers, transports


def rows_of(modes, transports, servers):
    """The rows in the table's order: per mode and transport without and with WebSockets
    (when a server has them), then the unread responses (the first mode, plaintext unless
    only TLS is asked for)."""
    ws = [False, True] if any(s != "grpc_server" for s in servers) else [False]
    rows = [Row(m, t, ws=w) for m in modes for t in transports for w in ws]
    return rows + [Row(modes[0], transports[0], unread=True)]


def main(argv=None):
    args, modes, servers, transports = parse_args(argv)
    h2_modules()
    if not h.check_tools("go", "openssl", hint="apt-get install -y golang-go golang-golang-x-net-dev openssl"):
        return 2
    sockets = args.http1 + args.h2 + args.tls_peers + args.streams + 2 * args.inflight + 16
    examples = h.ready_examples(servers, args, sockets=sockets, what="connections")
    if examples is None:
        return 2
    scratch = tempfile.mkdtemp(prefix="dead-peers-")
    try:
        goserver = build_go(GOSERVER_DIR, scratch)
        if goserver is None:
            h.log("error: the Go reference did not build (golang-golang-x-net-dev installed?)")
            return 2
        tls = h.Tls(scratch) if "tls" in transports else None
        return measure(args, modes, servers, transports, examples, goserver, tls)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args, modes, servers, transports, examples, goserver, tls):
    rows = rows_of(modes, transports, servers)
    for row in rows:
        row.bound_s = row.bound(args)
    targets = [Target(s, os.path.join(examples, s), grpc=s == "grpc_server") for s in servers]
    go = Target("goserver", goserver, go=True)
    h.log(
        f"--shutdown-delay {args.delay:g}s --shutdown-watch-termination-grace-period {args.grace:g}s "
        f"--request-timeout {args.request_timeout:g}s; {args.http1} idle HTTP/1.1, {args.h2} silent HTTP/2, "
        f"{args.tls_peers} unfinished TLS handshakes (tls), {args.streams} silent WebSockets (+ws), "
        f"{args.inflight} requests in flight; rows: {', '.join(r.label for r in rows)}"
    )
    started = time.monotonic()
    results, go_results = [], []
    for row in rows:
        for target in [t for t in [*targets, go] if t.runs(row)]:
            h.log(f"\n==> {target.name}, {row.label}" + (f" ({h.MODE_NAMES[row.mode]})" if not target.go else ""))
            r = run_row(target, row, args, tls)
            h.log_result(r, report.log_figures)
            (go_results if target.go else results).append(r)
    report.compare_with_go(results, go_results, rows)
    h.log(f"\nseconds from SIGTERM to exit ({time.monotonic() - started:.0f}s in all; `!` a failed run, "
          f"`-` none, or Go unable to do the row):\n" + report.table(results, go_results, rows, servers))
    status = h.exit_status(results + go_results, args, lambda r: f"{r['runtime']} {r['row']}")
    if status:
        return status
    h.log(
        f"\nOK: on {', '.join(servers)}, every request in flight completed, every server exited 0 within its "
        f"bound, counted every silent connection it had to wait for in connections_cut and named their kinds, "
        f"and exited at most {report.GO_MARGIN_S:g}s after Go's net/http in every row Go could do."
    )
    return 0
