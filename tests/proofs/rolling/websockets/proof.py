"""WebSockets at shutdown: every `/ws` socket open at SIGTERM keeps echoing through the
shutdown delay, then gets its goodbye at its turn in the paced long-running drain: a Close
with status 1001 (Going Away) and the reason `server shutting down`, the server waiting for
the client's Close before it lets the connection go; a client that never answers is cut
just before the grace period ends. Bad input gets the protocol's error, never a crash.
Checked on every example server (tokio_server, axum_server, smol_server, actix_server).

The drain scenario. For each runtime (--runtimes) and mode (--modes; A: the default
close-listener mode, B: `--shutdown-send-retry-after`) the proof starts the example server on
127.0.0.1 with `--shutdown-delay 1s --shutdown-watch-termination-grace-period 10s` (--delay,
--grace) and opens two kinds of sockets on `ws://127.0.0.1:PORT/ws`, each on its own
connection, all in one asyncio event loop:
  * --sockets (1000 by default) clients of the `websockets` library (its asyncio client,
    without keepalive pings): each sends a text message and reads its echo, then keeps
    sending a message every --echo-interval (200 ms; text and binary in turn) and reading
    the echoes, always with a read pending, until the connection closes. The library
    answers the server's Close by itself, as a browser does. Each echo must be the message
    sent, in order. The proof notes when the server's Close frame arrived (as the bytes
    holding it were read), its status and reason, whether the closing handshake completed
    (the client's Close sent after the server's was received) and when the connection
    ended;
  * --silent (50 by default) raw clients that do the upgrade by hand (checking `101` and
    the Sec-WebSocket-Accept), send one masked text frame and read its echo, then send
    nothing more: they read on (to see the server's Close and the end of the connection)
    but never answer the Close.
Once every socket has had its first echo, the proof sends the server SIGTERM and measures
everything from the signal.

What the server is expected to do: echo through the shutdown delay; when it stops accepting
(one shutdown delay after SIGTERM), at each socket's turn in the paced drain (one turn every
1 / max(sockets / grace, 200) seconds: 1050 sockets and a 10 s grace give one every 5 ms,
about 5.2 s in all) send Close 1001 `server shutting down`, echoing until then; wait for the
client's Close until 100 ms before the end of the grace period (delay + grace after SIGTERM),
then drop the connection; count the Close frames sent and those never answered.

Asserted, per runtime and mode:
  * every socket opened (101) and had its first echo before SIGTERM; every echo was the
    message sent, in order;
  * echoes kept coming after the signal: at least one on every client of the library, and
    its last echo came at most --echo-interval + 0.5 s before its Close;
  * every client of the library received Close 1001 `server shutting down` (none a
    connection closed without a Close, 1006, nor any other status), its closing handshake
    completed, and the server ended the connection within 0.5 s of its Close (the client
    waits for the server to end it; actix_server: 1.5 s, as actix-web waits for the client to
    close until its 1 s client-disconnect timeout, on its 500 ms clock);
  * no Close came before the shutdown delay was over, and every one came within
    shutdown delay + grace after SIGTERM;
  * the Closes (of both kinds of sockets, sockets + silent of them) were paced: the spread
    between the first and the last is at least 80% of (n - 1) x the pacing interval, and at
    least 2 s when the slots span 2.5 s or more; no 100 ms window holds more than half of
    them (with few sockets: twice the window's slots);
  * every silent client received Close 1001 `server shutting down`, and the server ended
    its connection after that Close, no sooner than delay + grace - 1 s (it waited for the
    answer) and no later than delay + grace + 0.5 s after SIGTERM;
  * the server's own account of its exit, the summary's signal_to_exit, is within shutdown
    delay + grace;
  * the server exited 0 within shutdown delay + grace + 2 s after SIGTERM, logged no panic,
    and its termination summary says streams_ended=<sockets + silent> streams_remaining=0
    websocket_closes=<sockets + silent> websocket_unanswered=<silent> code=0.

The bad-input scenario, once per runtime in the first of --modes, on a server of its own:
--bad-normal (10) clients of the library echoing as above, and two raw sockets for each
misbehaviour below, each opened, echoed once, then misbehaving once (all at about the same
time):
  reserved bits      a text frame with RSV1, RSV2 and RSV3 set (no extension negotiated)
  opcode 0x3         a frame with the reserved opcode 0x3
  garbage            bytes that are no frame (ASCII text)
  unmasked           an unmasked text frame
  close 1005         a Close with status 1005 (reserved: never sent)
  close 999          a Close with status 999 (not a status)
  data after close   a Close 1000, then a text frame
  bad UTF-8          a text frame that is not UTF-8
  ping of 126 bytes  a Ping longer than a control frame may be
  fragmented ping    a Ping without FIN
A raw socket that gets a Close answers it with a Close of the same status (unless it sent
its own already), as a client would. Asserted:
  * each misbehaving socket got, within 5 s of its misbehaviour, a Close 1002, 1007 or
    1008, or the end of its connection (which of them, and when, is printed as a table);
    the bad UTF-8 one got Close 1007 (invalid payload data) itself;
  * the server stayed up: it was still running after the misbehaviours, and every client of
    the library had an echo after them;
  * after SIGTERM every client of the library received Close 1001 `server shutting down`
    with its handshake completed; the drain counted only those clients as long-running
    (the misbehaving sockets left no slot behind); the server exited 0 within shutdown
    delay + grace + 2 s after SIGTERM, logged no panic, and its termination summary says
    streams_remaining=0 websocket_closes=<bad-normal> websocket_unanswered=0 code=0.

Both scenarios run by default (the drain scenario in every mode, then the bad-input one);
--bad-input runs the bad-input scenario alone, --no-bad-input leaves it out. Each run's
figures are printed as a table, and all runs' in tables at the end; with --json FILE they
are written with every socket's record. A failed run keeps its directory (the server's
logs) and says where; the server's `[graceful-termination]` lines are printed.

Needs the `websockets` library (pip install websockets; its asyncio client: 13 or later,
checked with 17) and the release build of the example servers (built unless --no-build; the build's
directory is CARGO_TARGET_DIR's when it is set). Loopback only. Every process started here is
killed by its PID when the script ends, however it ends; every wait is bounded.

Exit status: 0 when every assertion held in every run; 1 otherwise (each failure listed); 2 on
a setup problem (no websockets library, no server binary, a failed build, a server that does
not start, too low a file-descriptor limit).
"""

import argparse
import os
import time

import harness as h
from harness.ws_frames import GOING_AWAY_REASON
from rolling.websockets.bad_input import BAD_HEAD, BAD_REPEAT, bad_kinds, bad_row, bad_table, run_bad
from rolling.websockets.drain import DRAIN_HEAD, drain_row, log_drain_figures, run_drain
from rolling.websockets.library import library_version

# The short form, CI's run (see harness.cli): every runtime and mode, 300 clients of the library
# and 20 silent ones, a grace period of 4 s (the silent ones are held that long).
SHORT = [["--streams", "300", "--silent", "20", "--grace", "4"]]


def main(argv=None):
    p = h.parser("websockets", __doc__)
    h.add_runtimes(p)
    h.add_drain_arguments(p, 1000, "clients of the websockets library")
    p.add_argument("--sockets", dest="streams", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="clients of the websockets library open at SIGTERM (the same as --streams; 1000)")
    p.add_argument("--silent", type=int, default=50, help="raw clients that never answer the server's Close")
    p.add_argument("--echo-interval", type=float, default=0.2,
                   help="seconds between two messages of a client of the library")
    p.add_argument("--bad-normal", type=int, default=10,
                   help="clients of the library open during the bad-input scenario")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--bad-input", action="store_true", help="run the bad-input scenario alone")
    which.add_argument("--no-bad-input", action="store_true", help="leave the bad-input scenario out")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    modes = h.drain_modes(p, args)
    if args.silent < 0 or args.bad_normal < 1:
        p.error("--silent must be 0 or more, --bad-normal at least 1")
    if args.echo_interval <= 0:
        p.error("--echo-interval must be positive")

    try:
        version = library_version()
    except ImportError as e:
        h.log(f"error: the websockets library (13 or later) is needed: pip install websockets ({e})")
        return 2
    sockets = max(args.streams + args.silent, args.bad_normal + BAD_REPEAT * len(bad_kinds()))
    examples = h.ready_examples(runtimes, args, sockets=sockets, what="sockets")
    if examples is None:
        return 2

    n = args.streams + args.silent
    interval = h.pacing_interval(n, args.grace)
    bound = h.ends_bound(args.delay, args.grace)
    h.log(
        f"--shutdown-delay {args.delay:g}s, --shutdown-watch-termination-grace-period {args.grace:g}s; "
        f"{args.streams} clients of websockets {version} echoing every "
        f"{args.echo_interval * 1000:g}ms and {args.silent} silent raw clients, each on its own connection"
    )
    if not args.bad_input:
        h.log(
            f"expected: echoes through the delay, then one Close 1001 every 1 / max({n} / {args.grace:g}s, "
            f"{h.DEFAULT_MIN_WATCH_DRAIN_QPS}) = {interval * 1000:g}ms from about {args.delay:g}s after SIGTERM "
            f"(({n} - 1) x {interval * 1000:g}ms = {(n - 1) * interval:.3f}s); silent clients cut about "
            f"{args.delay + args.grace - 0.1:g}s after SIGTERM; exit within {bound:g}s"
        )
    started = time.monotonic()
    results = []
    if not args.bad_input:
        for runtime in runtimes:
            binary = os.path.join(examples, runtime)
            for mode in modes:
                h.log(f"\n==> drain: {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
                r = run_drain(binary, runtime, mode, args)
                h.log_result(r, h.drain_figures(log_drain_figures))
                h.log_table(h.table(DRAIN_HEAD, [drain_row(r)]))
                results.append(r)
    if not args.no_bad_input:
        mode = modes[0]
        for runtime in runtimes:
            binary = os.path.join(examples, runtime)
            h.log(f"\n==> bad input: {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
            r = run_bad(binary, runtime, mode, args)
            h.log_result(r, h.drain_figures(lambda r: None))
            h.log_table(bad_table(r))
            h.log_table(h.table(BAD_HEAD, [bad_row(r)]))
            results.append(r)
    drains = [r for r in results if r["scenario"] == "drain"]
    bad = [r for r in results if r["scenario"] == "bad-input"]
    h.log(f"\nall runs ({time.monotonic() - started:.0f}s):")
    if drains:
        h.log("drain:\n" + h.table(DRAIN_HEAD, [drain_row(r) for r in drains]))
    if bad:
        h.log("bad input:\n" + h.table(BAD_HEAD, [bad_row(r) for r in bad]))
    status = h.exit_status(results, args, lambda r: f"{r['scenario']}: {r['runtime']} mode {r['mode']}")
    if status:
        return status
    said = []
    if drains:
        said.append(
            f"all {args.streams} clients echoed through the shutdown delay and got Close 1001 "
            f"{GOING_AWAY_REASON!r} with a complete handshake, the {args.silent} silent ones got it too and were cut "
            f"just before the grace period's end, paced, within {args.delay + args.grace:g}s of SIGTERM; every server "
            f"exited 0 with websocket_closes={n} websocket_unanswered={args.silent}"
        )
    if bad:
        said.append(
            "every misbehaving socket got the protocol's error Close or its connection ended, the server stayed up "
            "and drained its clients with Close 1001, and exited 0"
        )
    h.log(f"\nOK: on {', '.join(runtimes)}: " + "; ".join(said) + ".")
    return 0
