"""Zero-downtime restarts without a load balancer: listener hand-over to a successor process.

Per example server (tokio_server, axum_server, smol_server, actix_server):

  1. generation 1 starts with `--listen 127.0.0.1:0 --handover-socket DIR/h.sock
     --shutdown-delay 1s --shutdown-watch-termination-grace-period 3s`;
  2. wrk (keep-alive, `-t2 -c32`) runs against it for --duration seconds;
  3. during the load, --handovers times, --interval seconds apart:
     a. a `GET /watch` stream is opened on the running generation (the only one listening);
     b. the successor starts with `--listen handover` and the same flags; once it has bound
        DIR/h.sock (a new socket file there), the running generation gets SIGUSR2;
     c. the successor must print `listening on http://127.0.0.1:PORT` (the same port) within
        a bound; the old generation must log `listeners handed over` and exit 0 within its
        shutdown delay + grace period + a bound;
     d. the `/watch` stream must end cleanly (HTTP/1.1's final chunk) within the shutdown delay
        + the grace period + 2 s after SIGUSR2;
     e. once the old generation is gone, `/readyz` answers 200 (from the successor);
  4. after the load, the last generation answers GET / and exits 0 on SIGTERM.

Asserted, besides the above: wrk saw no socket error of any kind (a refused connection would be
a connect error) and no non-2xx reply, and completed at least --min-requests requests.

Beside wrk, a keep-alive probe (--probe-connections, 4 Python clients sending GET / one after
the other) classifies how each of its connections ended; wrk only counts "read errors". Every
probe connection must end with a 2xx reply saying `Connection: close` (or stay open): a
connection closed before the reply to a request already sent, a reset or a non-2xx reply is a
lost request, reported with an example.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every run passed; 1 otherwise; 2 on a setup problem (missing wrk, build
failure).
"""

import os
import shutil
import signal
import stat
import tempfile
import time

import harness as h
from restart import common as c

SHUTDOWN_DELAY_S = 1.0
GRACE_S = 3.0
WATCH_SLACK_S = 2.0


def socket_identity(path):
    """(inode, ctime) of the Unix socket file at `path`, or None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return ("not a socket", st.st_ino)
    return (st.st_ino, st.st_ctime_ns)


def wait_new_socket(path, before, proc, timeout):
    """Waits until a socket file other than `before` is at `path` (the successor bound it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ident = socket_identity(path)
        if ident is not None and ident != before and ident[0] != "not a socket":
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the successor exited with {proc.returncode} before binding {path}")
        time.sleep(0.01)
    raise RuntimeError(f"the successor did not bind {path} within {timeout}s")


def run_one(binary, runtime, args):
    workdir = tempfile.mkdtemp(prefix=f"restart-ho-{runtime}-")
    problems, events, notes = [], [], []
    result = {"runtime": runtime, "problems": problems, "events": events, "workdir": workdir,
              "wrk": None, "probe": None, "notes": notes, "watch": []}
    t0 = time.monotonic()
    gens = []
    load = None
    watches = []
    path = os.path.join(workdir, "h.sock")
    flags = [
        "--handover-socket",
        path,
        "--shutdown-delay",
        f"{SHUTDOWN_DELAY_S:g}s",
        "--shutdown-watch-termination-grace-period",
        f"{GRACE_S:g}s",
    ]
    exit_bound = SHUTDOWN_DELAY_S + GRACE_S + args.exit_slack
    watch_bound = SHUTDOWN_DELAY_S + GRACE_S + WATCH_SLACK_S

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    def new_generation(listen):
        gen = c.Generation(binary, f"{runtime}.{len(gens) + 1}", workdir)
        gen.start(["--listen", listen, *flags])
        gens.append(gen)
        return gen

    try:
        cur = new_generation("127.0.0.1:0")
        addrs = cur.wait_listening(1, timeout=15)
        port = h.port_of(addrs[0])
        note(f"{cur.name} (pid {cur.pid}) listening on {addrs[0]}")

        load = c.Load(port, args, workdir, problems)
        for i in range(args.handovers):
            load.wait_event(i)
            old = cur
            watch = h.WatchStream(port, timeout=watch_bound + 5)
            watches.append(watch)
            if watch.status != 200:
                problems.append(f"GET /watch on {old.name}: {watch.status}")
            deadline = time.monotonic() + 3
            while watch.lines < 1 and watch.ended_at is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if watch.lines < 1:
                problems.append(f"GET /watch on {old.name}: no line within 3s")

            before = socket_identity(path)
            if before is not None:
                notes.append(f"before hand-over {i + 1}: a socket file was already at {path}")
            succ = new_generation("handover")
            wait_new_socket(path, before, succ.proc, 15)
            sig_at = time.monotonic()
            old.signal(signal.SIGUSR2)
            try:
                addrs = succ.wait_listening(1, timeout=args.handover_bound)
            except RuntimeError as e:
                raise RuntimeError(f"{e}\n{old.name}'s stderr:\n{old.stderr_tail()}") from None
            up_at = time.monotonic()
            if addrs != [f"127.0.0.1:{port}"]:
                problems.append(f"{succ.name}: listening on {addrs}, want [127.0.0.1:{port}]")
            code = old.wait_exit(exit_bound)
            exit_at = time.monotonic()
            watch.wait(max(0.0, sig_at + watch_bound - time.monotonic()))
            ended = (
                f"ended {'cleanly' if watch.clean else 'UNCLEANLY'} +{watch.ended_at - sig_at:.2f}s "
                f"after {watch.lines} lines"
                if watch.ended_at is not None
                else f"still open {watch_bound:g}s after SIGUSR2"
            )
            note(
                f"SIGUSR2 {old.name} (pid {old.pid}); {succ.name} (pid {succ.pid}) listening "
                f"+{up_at - sig_at:.2f}s; {old.name} "
                + (f"exited {code} +{exit_at - sig_at:.2f}s" if code is not None else f"still running after {exit_bound:g}s (killed)")
                + f"; /watch {ended}"
            )
            result["watch"].append(None if watch.ended_at is None else watch.ended_at - sig_at)
            if code != 0:
                problems.append(f"{old.name} exited {code} (want 0):\n{old.stderr_tail()}")
            if "listeners handed over" not in old.stderr_text():
                problems.append(f"{old.name}'s stderr has no `listeners handed over`:\n{old.stderr_tail()}")
            if watch.ended_at is None:
                problems.append(f"/watch on {old.name} still open {watch_bound:g}s after SIGUSR2")
                watch.close()
            elif not watch.clean:
                problems.append(f"/watch on {old.name} ended without its final chunk: {watch.error}")
            elif watch.ended_at - sig_at > watch_bound:
                problems.append(f"/watch on {old.name} ended {watch.ended_at - sig_at:.2f}s after SIGUSR2 (bound {watch_bound:g}s)")
            status, _ = h.http_get(port, "/readyz")
            if status != 200:
                problems.append(f"/readyz after {old.name} exited: {status} (want 200 from {succ.name})")
            if succ.proc.poll() is not None:
                raise RuntimeError(f"{succ.name} exited {succ.proc.returncode}:\n{succ.stderr_tail()}")
            cur = succ
        load.end_events(result, note, problems, "hand-overs", "--handovers")
        if socket_identity(path) is not None:
            notes.append(f"after the last hand-over the socket file {path} is still there")

        result["wrk"] = load.finish(cur, exit_bound, note, problems)
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            load.stop()
        for watch in watches:
            watch.close()
        for gen in gens:
            gen.kill()
        if not args.keep and not problems:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


# The short form, CI's run (see harness.cli), each run with its 3 hand-overs in 11 s of load:
# every runtime; over TLS on tokio_server (socket_activation's short form has TLS on
# actix_server).
QUICK = ["--duration", "11", "--first", "2", "--interval", "2.5"]
SHORT = [QUICK, ["--tls", "--runtimes", "tokio_server", *QUICK]]


# The full form, the release check: the same two, each on every runtime with 15 s of load.
FULL = [[], ["--tls"]]


def main(argv=None):
    p = h.parser("handover", __doc__)
    c.add_load_flags(p, "hand-over", "--handovers", first=2.0)
    p.add_argument("--handover-bound", type=float, default=10.0,
                   help="seconds from SIGUSR2 to the successor's `listening on` line")
    p.add_argument("--exit-slack", type=float, default=10.0,
                   help="seconds an old generation may take to exit beyond its delay + grace period")
    c.add_run_flags(p)
    h.add_forms(p, SHORT, FULL)
    ready = c.setup(p, argv, "wrk")
    if ready is None:
        return 2
    args, runtimes, examples = ready
    h.log(
        f"load: wrk -t2 -c{args.connections} -d{args.duration}s (keep-alive) on GET /; {args.handovers} "
        f"hand-overs {args.interval:g}s apart from +{args.first:g}s; --shutdown-delay {SHUTDOWN_DELAY_S:g}s "
        f"--shutdown-watch-termination-grace-period {GRACE_S:g}s"
    )

    plan = [(r, run_one) for _ in range(max(1, args.runs)) for r in runtimes]
    results = c.run_runtimes(plan, examples, args)
    if results is None:
        return 2
    rows = [
        c.load_columns(r) + [" ".join("-" if x is None else f"{x:.1f}s" for x in r["watch"]) or "-"]
        + c.end_columns(r)
        for r in results
    ]
    return c.report(results, c.LOAD_HEAD + ["/watch ends"] + c.END_HEAD, rows,
                    "every hand-over kept the port served; wrk saw no error and no non-2xx reply.")

