"""Zero-downtime restarts without a load balancer: systemd socket activation.

This script plays systemd's part. Per example server (tokio_server, axum_server, smol_server,
actix_server):

  1. it binds 127.0.0.1:0 with a backlog of 1024 and keeps that socket for the whole run;
  2. it starts generation 1 with the socket at descriptor 3, LISTEN_FDS=1, LISTEN_FDNAMES=http
     and LISTEN_PID set to the server's own PID (`--listen systemd`), and checks that the
     server prints `listening on http://127.0.0.1:PORT` for that socket and answers GET /;
  3. it drives wrk (keep-alive, `-t2 -c32`) against the socket for --duration seconds;
  4. during the load it restarts the server --restarts times, --interval seconds apart: SIGTERM
     to the running generation and, at once, the next generation with the same socket. Each old
     generation must exit 0 within its shutdown delay plus a bound. Connections arriving while
     no generation accepts wait in the socket's backlog;
  5. after the load, the last generation answers GET / and exits 0 on SIGTERM.

Asserted: wrk saw no socket error of any kind (connect, read, write, timeout) and no non-2xx
reply, and completed at least --min-requests requests; every generation exited 0.

Beside wrk, a keep-alive probe (--probe-connections, 4 Python clients sending GET / one after
the other) classifies how each of its connections ended; wrk only counts "read errors". Every
probe connection must end with a 2xx reply saying `Connection: close` (or stay open): a
connection closed before the reply to a request already sent, a reset or a non-2xx reply is a
lost request, reported with an example.

Then, on tokio_server, the same socket-activation protocol from Debian's real
`systemd-socket-activate -l 127.0.0.1:PORT --fdname=http`: it binds the port and execs the
server (`--listen systemd`) on the first connection; that first GET / must get 200, the server
must print `listening on http://127.0.0.1:PORT`, and SIGTERM must end it with exit 0.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every run passed; 1 otherwise; 2 on a setup problem (missing wrk, build
failure).
"""

import os
import shutil
import signal
import tempfile
import time

import harness as h
from restart import common as c

SYSTEMD_SOCKET_ACTIVATE = "/usr/bin/systemd-socket-activate"


def run_one(binary, runtime, args):
    workdir = tempfile.mkdtemp(prefix=f"restart-sa-{runtime}-")
    problems, events = [], []
    result = {"runtime": runtime, "problems": problems, "events": events, "workdir": workdir, "wrk": None, "probe": None}
    t0 = time.monotonic()
    gens = []
    load = None
    sock = None

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    flags = [
        "--listen",
        "systemd",
        "--shutdown-delay",
        args.shutdown_delay,
        "--shutdown-watch-termination-grace-period",
        "3s",
    ]
    env = {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"}
    exit_bound = args.exit_bound

    def start_generation():
        gen = c.Generation(binary, f"{runtime}.{len(gens) + 1}", workdir)
        gen.start(flags, fds=[sock.fileno()], listen_pid="self", env=env)
        gens.append(gen)
        addrs = gen.wait_listening(1, timeout=15)
        if addrs != [f"127.0.0.1:{port}"]:
            problems.append(f"{gen.name}: listening on {addrs}, want [127.0.0.1:{port}]")
        return gen

    try:
        sock = h.listening_socket(backlog=1024)
        port = sock.getsockname()[1]
        cur = start_generation()
        note(f"generation 1 (pid {cur.pid}) listening on the inherited socket 127.0.0.1:{port}")

        load = c.Load(port, args, workdir, problems)
        for i in range(args.restarts):
            load.wait_event(i)
            old = cur
            term_at = time.monotonic()
            old.signal(signal.SIGTERM)
            cur = start_generation()
            up_at = time.monotonic()
            code = old.wait_exit(exit_bound)
            exit_at = time.monotonic()
            note(
                f"SIGTERM {old.name} (pid {old.pid}); {cur.name} (pid {cur.pid}) listening "
                f"+{up_at - term_at:.2f}s; {old.name} "
                + (f"exited {code} +{exit_at - term_at:.2f}s" if code is not None else f"still running after {exit_bound}s (killed)")
            )
            if code != 0:
                problems.append(f"{old.name} exited {code} (want 0):\n{old.stderr_tail()}")
        load.end_events(result, note, problems, "restarts", "--restarts")
        result["wrk"] = load.finish(cur, exit_bound, note, problems)
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            load.stop()
        for gen in gens:
            gen.kill()
        if sock:
            sock.close()
        if not args.keep and not problems:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


def run_systemd_socket_activate(binary, runtime, args):
    """The real systemd-socket-activate hands the server its socket (exec on first connection)."""
    workdir = tempfile.mkdtemp(prefix=f"restart-ssa-{runtime}-")
    problems, events = [], []
    result = {"runtime": runtime + " (systemd-socket-activate)", "problems": problems, "events": events,
              "workdir": workdir, "wrk": None, "probe": None}
    t0 = time.monotonic()

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    gen = c.Generation(SYSTEMD_SOCKET_ACTIVATE, f"{runtime}.ssa", workdir)
    try:
        port = h.free_port()
        gen.start(
            ["-l", f"127.0.0.1:{port}", "--fdname=http", "-E", "NO_COLOR=1", binary, "--listen", "systemd"]
        )
        if not gen.wait_stderr(f"Listening on 127.0.0.1:{port}", 10):
            raise RuntimeError("systemd-socket-activate did not bind:\n" + gen.stderr_tail())
        note(f"systemd-socket-activate (pid {gen.pid}) listening on 127.0.0.1:{port}")
        # The first connection makes systemd-socket-activate exec the server (same PID).
        status, body = h.http_get(port, timeout=15)
        note(f"first GET / -> {status}")
        if status != 200:
            problems.append(f"GET /: {status} {body[:200]!r}")
        addrs = gen.wait_listening(1, timeout=10)
        if addrs != [f"127.0.0.1:{port}"]:
            problems.append(f"listening on {addrs}, want [127.0.0.1:{port}]")
        status, _ = h.http_get(port)
        if status != 200:
            problems.append(f"second GET /: {status}")
        code = c.term_and_wait(gen, args.exit_bound)
        note(f"SIGTERM: exited {code}")
        if code != 0:
            problems.append(f"exited {code} (want 0):\n{gen.stderr_tail()}")
    except Exception as e:
        problems.append(f"{type(e).__name__}: {e}")
        problems.append("stderr:\n" + gen.stderr_tail() if gen.proc else "not started")
    finally:
        gen.kill()
        if not args.keep and not problems:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


# The short form, CI's run (see harness.cli), each run with its 3 restarts in 11 s of load:
# every runtime, and systemd-socket-activate; over TLS on actix_server (handover's short form
# has TLS on tokio_server); a shutdown delay of 0 s under slow requests on smol_server and
# actix_server (a request on a kept-alive connection after the old generation stopped
# accepting is served with Connection: close, never refused or cut).
QUICK = ["--duration", "11", "--first", "2", "--interval", "2.5"]
SHORT = [
    QUICK,
    ["--tls", "--runtimes", "actix_server", *QUICK],
    ["--shutdown-delay", "0s", "--connections", "16", "--path", "/sleep?duration=20ms", "--min-requests", "3000",
     "--no-systemd-socket-activate", "--runtimes", "smol_server,actix_server", *QUICK],
]


# The full form, the release check: the same three, each on every runtime with 15 s of load.
FULL = [
    [],
    ["--tls"],
    ["--shutdown-delay", "0s", "--connections", "16", "--path", "/sleep?duration=20ms", "--min-requests", "3000",
     "--no-systemd-socket-activate"],
]


def main(argv=None):
    p = h.parser("socket_activation", __doc__)
    c.add_load_flags(p, "restart", "--restarts", first=2.5)
    p.add_argument("--shutdown-delay", default="1s", help="the servers' --shutdown-delay")
    p.add_argument("--exit-bound", type=float, default=15.0, help="seconds an old generation may take to exit")
    p.add_argument("--no-systemd-socket-activate", action="store_true",
                   help="skip the run under systemd-socket-activate")
    c.add_run_flags(p)
    h.add_forms(p, SHORT, FULL)
    ready = c.setup(p, argv, "wrk", "bash")
    if ready is None:
        return 2
    args, runtimes, examples = ready
    h.log(
        f"load: wrk -t2 -c{args.connections} -d{args.duration}s (keep-alive) on GET {args.path}; {args.restarts} "
        f"restarts {args.interval:g}s apart from +{args.first:g}s; --shutdown-delay {args.shutdown_delay}; "
        f"{args.runs} run(s) per runtime"
    )

    plan = [(r, run_one) for _ in range(max(1, args.runs)) for r in runtimes]
    if not args.no_systemd_socket_activate:
        if os.access(SYSTEMD_SOCKET_ACTIVATE, os.X_OK):
            plan.append(("tokio_server", run_systemd_socket_activate))
        else:
            h.log(f"error: {SYSTEMD_SOCKET_ACTIVATE} not found (apt-get install -y systemd)")
            return 2
    results = c.run_runtimes(plan, examples, args)
    if results is None:
        return 2
    rows = [c.load_columns(r) + c.end_columns(r) for r in results]
    return c.report(results, c.LOAD_HEAD + c.END_HEAD, rows,
                    "every restart kept the socket open; wrk saw no error and no non-2xx reply.")

