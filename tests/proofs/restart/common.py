"""Helpers shared by the restart proofs (socket_activation, handover, bad_inputs) and the
restart storm: server generations started with inherited listening sockets (systemd's
socket-activation protocol) or as hand-over successors, their `listening on` lines and logs,
the proofs' flags, and a run under wrk load ended and reported. With `--tls` every generation
serves TLS (a CA and a server certificate made with the openssl CLI) and every client speaks
it.

Builds on the harness: every child is tracked by its PID there and killed on every exit path
(`harness.run_main`); the loads' clients (wrk, the keep-alive probe, `/watch` streams) are
there too.

Stdlib only. Loopback only. Every wait is bounded.
"""

import fcntl
import os
import re
import signal
import time

import harness as h

LISTENING = re.compile(r"^listening on https?://(\S+)$")
# The first descriptor of systemd's socket-activation protocol (SD_LISTEN_FDS_START).
LISTEN_FDS_START = 3
# Parent-side copies of the descriptors to pass are moved at or above this number, so that
# placing them at 3, 4, ... in the child never overwrites one not yet placed.
HIGH_FD = 100


def add_build_flags(parser):
    parser.add_argument("--no-build", action="store_true", help="use the existing release build")
    parser.add_argument("--bin-dir", help="take the servers from this directory (implies --no-build)")


def add_load_flags(parser, event, count_flag, first):
    """The flags of a proof under wrk load: which runtimes, the load, and `count_flag` events
    (`event`: "restart", "hand-over") from `first` seconds into the load."""
    parser.add_argument("--runtimes", default=",".join(h.RUNTIMES), help="comma-separated example names")
    parser.add_argument("--duration", type=int, default=15, help="seconds of load per runtime")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections")
    parser.add_argument(count_flag, type=int, default=3, help=f"{event}s during the load")
    parser.add_argument("--first", type=float, default=first, help=f"seconds of load before the first {event}")
    parser.add_argument("--interval", type=float, default=4.0, help=f"seconds between {event}s")
    parser.add_argument("--min-requests", type=int, default=100000, help="fewest wrk requests that pass")
    parser.add_argument("--path", default="/", help="the path wrk requests (e.g. /sleep?duration=20ms)")
    parser.add_argument("--runs", type=int, default=1, help="run every runtime this many times; each run must pass")
    parser.add_argument("--probe-connections", type=int, default=4,
                        help="keep-alive probe connections beside wrk, which say how lost requests were lost (0: none)")


def add_run_flags(parser):
    """The build flags, --tls and --keep, last on every proof's command line."""
    add_build_flags(parser)
    parser.add_argument("--tls", action="store_true", help="serve and load over TLS")
    parser.add_argument("--keep", action="store_true", help="keep every run's logs (failed runs always keep them)")


def setup(p, argv, *tools):
    """Parses `argv` with the proof's parser `p`, turns TLS on or off (`use_tls`), checks
    `tools` and readies the example servers of --runtimes: (args, runtimes, their directory),
    or None after a setup problem (logged)."""
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    use_tls(args)
    if not h.check_tools(*tools):
        return None
    examples = h.ready_examples(runtimes, args)
    return None if examples is None else (args, runtimes, examples)


def use_tls(args):
    """Turns TLS on for every generation and client of this process when `args.tls`, off
    otherwise (a short form's runs follow one another in one process)."""
    if not getattr(args, "tls", False):
        h.use_tls(None)
    elif h.run_tls() is None:
        h.use_tls(h.Tls())
        h.log(f"TLS: every generation serves TLS with a certificate from {h.run_tls().dir}")


def report(results, head, rows, ok):
    """Prints the result table; returns the exit code: 1 if a run failed, else 0 after `ok`."""
    h.log("\n" + h.table(head, rows))
    return h.conclude([r["runtime"] for r in results if r["problems"]], ok)


class Generation:
    """One server process, its stdout and stderr in files under `workdir`.

    `fds`: descriptors (of this process) to place at 3, 4, ... in the child, as systemd does;
    `listen_pid`: "self" sets LISTEN_PID to the child's own PID (through a shell that execs the
    server), a number sets it to that, None leaves LISTEN_PID out; `env`: more environment
    changes (name: value, or None to remove)."""

    def __init__(self, binary, name, workdir):
        self.binary, self.name, self.workdir = binary, name, workdir
        self.proc = None
        self.addrs = []

    def start(self, args, fds=(), listen_pid=None, env=None):
        base = os.path.join(self.workdir, self.name)
        self.stdout_path, self.stderr_path = base + ".stdout", base + ".stderr"
        environ = {"LISTEN_PID": None, "LISTEN_FDS": None, "LISTEN_FDNAMES": None}
        environ.update(env or {})
        high = []
        try:
            for fd in fds:
                high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD))
            tls = h.run_tls()
            command = [self.binary, *args, *(tls.flags if tls else [])]
            if fds or listen_pid == "self":
                # bash (not dash: dash takes single-digit descriptors only) places the copies at
                # 3, 4, ... (dup2: not close-on-exec), closes the copies, sets LISTEN_PID to its
                # own PID and execs the server, which keeps that PID.
                redirs = [f"{LISTEN_FDS_START + i}<&{fd}" for i, fd in enumerate(high)]
                redirs += [f"{fd}<&-" for fd in high]
                script = ""
                if redirs:
                    script += "exec " + " ".join(redirs) + " || exit 125; "
                if listen_pid == "self":
                    script += "LISTEN_PID=$$; export LISTEN_PID; "
                script += 'exec "$@"'
                command = ["/bin/bash", "-c", script, "bash", *command]
            if listen_pid not in (None, "self"):
                environ["LISTEN_PID"] = str(listen_pid)
            with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                self.proc = h.spawn(command, out, err, env=environ, pass_fds=tuple(high))
        finally:
            for fd in high:
                os.close(fd)
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self):
        return self.proc.pid

    def stdout_lines(self):
        try:
            with open(self.stdout_path, "r", errors="replace") as f:
                text = f.read()
        except OSError:
            return []
        # Complete lines only.
        return text.split("\n")[:-1]

    def stderr_text(self):
        try:
            with open(self.stderr_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stderr_tail(self, n=30):
        return "".join(self.stderr_text().splitlines(keepends=True)[-n:])

    def wait_listening(self, count=1, timeout=30.0):
        """Waits for `count` `listening on http://ADDR` lines on stdout; returns the ADDRs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.stdout_lines()
            addrs = []
            for line in lines:
                m = LISTENING.match(line.strip())
                if m:
                    addrs.append(m.group(1))
            if len(addrs) >= count:
                self.addrs = addrs
                return addrs
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before {count} `listening on` "
                    f"line(s) (stdout {lines!r}):\n" + self.stderr_tail()
                )
            time.sleep(0.01)
        raise RuntimeError(f"{self.name}: fewer than {count} `listening on` lines within {timeout}s")

    def wait_stderr(self, needle, timeout):
        """Waits until stderr contains `needle`; returns True, or False after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.stderr_text():
                return True
            time.sleep(0.02)
        return needle in self.stderr_text()

    def signal(self, signum):
        os.kill(self.proc.pid, signum)

    def wait_exit(self, timeout):
        """The exit status, or None when still running after `timeout` (then killed)."""
        return h.reap(self.proc, timeout)

    def kill(self):
        if self.proc:
            h.kill(self.proc)


def term_and_wait(gen, timeout):
    gen.signal(signal.SIGTERM)
    return gen.wait_exit(timeout)


class Load:
    """A proof's load on 127.0.0.1:`port` after a GET / that must answer 200: wrk for
    --duration seconds (--connections, --path) and, beside it, the keep-alive probe
    (--probe-connections, none when 0), which says how lost requests were lost. `events`
    (restarts, hand-overs) come --interval apart from --first seconds into the load."""

    def __init__(self, port, args, workdir, problems):
        self.port, self.args = port, args
        status, _ = h.http_get(port)
        if status != 200:
            problems.append(f"GET / before the load: {status}")
        self.wrk_proc, self.wrk_out = h.wrk(port, args.duration, workdir, "wrk", connections=args.connections,
                                            path=args.path)
        self.started = time.monotonic()
        self.probe = h.KeepAliveProbe(port, connections=args.probe_connections) if args.probe_connections else None

    def wait_event(self, i):
        """Sleeps until event `i` (from 0) is due."""
        time.sleep(max(0.0, self.started + self.args.first + i * self.args.interval - time.monotonic()))

    def end_events(self, result, note, problems, events, flag):
        """After the last of the `events` (plural, e.g. "restarts", counted by option `flag`):
        the probe's losses (none wanted) and the events within the load."""
        if self.probe:
            self.probe.stop()
            result["probe"] = self.probe.bad()
            note("keep-alive probe: " + self.probe.summary())
            if self.probe.bad():
                problems.append(f"keep-alive probe: requests lost {self.probe.bad()} (want none)")
        if time.monotonic() - self.started > self.args.duration - 0.5:
            problems.append(f"the {events} outlasted the load: use a longer --duration or fewer {flag}")

    def finish(self, last, exit_bound, note, problems):
        """Ends the load: wrk's result (0 errors of each kind, 0 non-2xx, at least
        --min-requests), a GET / after it, then SIGTERM to the last generation (exit 0 within
        `exit_bound`). Appends what is wrong to `problems`; returns wrk's result."""
        args = self.args
        res = h.wrk_result(self.wrk_proc, self.wrk_out, args.duration + 30)
        self.wrk_proc = None
        note(
            f"wrk: {res['requests']} requests; non-2xx {res['non2xx']}, socket errors connect "
            f"{res['connect']}, read {res['read']}, write {res['write']}, timeout {res['timeout']}"
        )
        for kind in ("connect", "read", "write", "timeout", "non2xx"):
            if res[kind] != 0:
                problems.append(f"wrk: {res[kind]} {kind} errors (want 0)")
        if res["requests"] < args.min_requests:
            problems.append(f"wrk: {res['requests']} requests, fewer than --min-requests {args.min_requests}")
        status, _ = h.http_get(self.port)
        if status != 200:
            problems.append(f"GET / after the load: {status}")
        code = term_and_wait(last, exit_bound)
        note(f"SIGTERM {last.name}: exited {code}")
        if code != 0:
            problems.append(f"{last.name} exited {code} (want 0):\n{last.stderr_tail()}")
        return res

    def stop(self):
        """Kills wrk and stops the probe, whatever is still running."""
        if self.wrk_proc:
            h.kill(self.wrk_proc)
        if self.probe:
            self.probe.stop()


def run_runtimes(plan, examples, args):
    """Runs `fn(binary, runtime, args)` for each `(runtime, fn)` of `plan`, logging each run's
    events, notes and problems as it ends; returns the results (each with `seconds`), or None
    when a binary is missing."""
    results = []
    for runtime, fn in plan:
        binary = os.path.join(examples, runtime)
        if not os.path.isfile(binary):
            h.log(f"error: {binary} does not exist (build with cargo build --release --examples)")
            return None
        started = time.monotonic()
        r = fn(binary, runtime, args)
        r["seconds"] = time.monotonic() - started
        h.log(f"\n==> {r['runtime']} ({r['seconds']:.1f}s)")
        h.log_run(r, r["problems"] or args.keep)
        results.append(r)
    return results


# The result table's first and last columns, shared by the proofs.
LOAD_HEAD = ["runtime", "requests", "non-2xx", "errors c/r/w/t", "probe lost"]
END_HEAD = ["time", "result"]


def load_columns(r):
    """A run's runtime, wrk totals and probe losses, for LOAD_HEAD."""
    w = r["wrk"]
    return [
        r["runtime"],
        "-" if w is None else w["requests"],
        "-" if w is None else w["non2xx"],
        "-" if w is None else f"{w['connect']}/{w['read']}/{w['write']}/{w['timeout']}",
        "-" if r["probe"] is None else (", ".join(f"{k} {v}" for k, v in sorted(r["probe"].items())) or "0"),
    ]


def end_columns(r):
    """A run's time and verdict, for END_HEAD."""
    return [f"{r['seconds']:.1f}s", "FAIL" if r["problems"] else "ok"]
