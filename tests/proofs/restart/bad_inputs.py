"""The restart features' edge cases: bad inherited state at start, systemd socket names, and
hand-overs that fail (the old process must keep serving).

Per example server, one case each:

  listen-pid-other    LISTEN_PID names another (live) process: exit 1, `error:` naming LISTEN_PID
  listen-fds-abc      LISTEN_FDS=abc: exit 1, `error:` naming LISTEN_FDS
  fd3-regular-file    descriptor 3 is a regular file: exit 1, `error:` naming descriptor 3
  fd3-udp-socket      descriptor 3 is a bound UDP socket: exit 1, `error:` naming descriptor 3
  fd3-unlistened-tcp  descriptor 3 is a bound TCP socket without listen(2): exit 1, naming 3
  no-listen-fds       `--listen systemd` without LISTEN_FDS: exit 1 with `error:`
  fdnames             two sockets named http and admin: `--listen systemd:admin` serves only
                      admin's port (one `listening on` line; a connection to http's port is never
                      accepted), `--listen systemd` serves both (two lines); both exit 0 on SIGTERM
  sigusr2-ignored     SIGUSR2 without --handover-socket: a log line, still serving, SIGTERM: exit 0
  no-successor        SIGUSR2 with nobody at the hand-over socket (--handover-timeout 1s): logs
                      `hand-over failed`, `/readyz` and `GET /` still 200; then a real successor
                      takes over (old logs `listeners handed over`, exits 0; successor serves)
  fake-closes         a fake successor (this script) takes the message, checks the header
                      `lameduck-handover 1`, one name per descriptor and that every descriptor
                      is a listening TCP socket, then closes without `ready`: the old process
                      logs `hand-over failed` within 3 s (long before its --handover-timeout
                      10s), keeps serving (`/readyz`, `GET /` 200), SIGTERM: exit 0
  fake-stalls         the fake successor takes the message and never answers
                      (--handover-timeout 1s): `hand-over failed` within 1 s + 3 s, still
                      serving, SIGTERM: exit 0
  successor-alone     `--listen handover` with no predecessor (--handover-timeout 1s): waits
                      about 1 s, then exits 1 with `error:`

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every case passed; 1 otherwise; 2 on a setup problem.
"""

import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time

import harness as h
from restart import common as c

EXIT_BOUND = 10.0
HANDOVER_HEADER = b"lameduck-handover 1\n"


class CaseFailed(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise CaseFailed(msg)


def expect_start_error(gen, pattern, what):
    """`gen` must exit 1 within EXIT_BOUND, with an `error:` line matching `pattern`."""
    code = gen.wait_exit(EXIT_BOUND)
    err = gen.stderr_text()
    expect(code is not None, f"still running {EXIT_BOUND:g}s after start (killed); want exit 1 ({what})")
    expect(code == 1, f"exit {code}, want 1 ({what}); stderr:\n{err}")
    lines = [line for line in err.splitlines() if "error:" in line]
    expect(lines, f"no `error:` line on stderr ({what}):\n{err}")
    expect(
        any(re.search(pattern, line) for line in lines),
        f"no `error:` line matching {pattern!r} ({what}):\n{err}",
    )
    expect(not gen.stdout_lines(), f"printed on stdout although it failed: {gen.stdout_lines()!r}")
    return lines[0].strip()


def expect_serving(port, when):
    for path in ("/readyz", "/"):
        status, body = h.http_get(port, path)
        expect(status == 200, f"{when}: GET {path} -> {status} {body[:100]!r} (want 200)")


def expect_clean_exit(gen, when, bound=EXIT_BOUND):
    code = c.term_and_wait(gen, bound)
    expect(code == 0, f"{when}: SIGTERM -> exit {code} (want 0); stderr:\n{gen.stderr_tail()}")


def systemd_env(count=1, names=None):
    env = {"LISTEN_FDS": str(count)}
    if names is not None:
        env["LISTEN_FDNAMES"] = names
    return env


# --- bad inherited state -------------------------------------------------------------------


def case_listen_pid_other(binary, workdir):
    with h.listening_socket() as s:
        gen = c.Generation(binary, "srv", workdir)
        # This script's PID: a live process other than the server.
        gen.start(["--listen", "systemd"], fds=[s.fileno()], listen_pid=os.getpid(), env=systemd_env(1, "http"))
        return expect_start_error(gen, r"LISTEN_PID", "LISTEN_PID of another process")


def case_listen_fds_abc(binary, workdir):
    with h.listening_socket() as s:
        gen = c.Generation(binary, "srv", workdir)
        gen.start(["--listen", "systemd"], fds=[s.fileno()], listen_pid="self", env={"LISTEN_FDS": "abc"})
        return expect_start_error(gen, r"LISTEN_FDS", "LISTEN_FDS=abc")


def _bad_fd3(binary, workdir, make, what):
    obj = make()
    try:
        fd = obj.fileno()
        gen = c.Generation(binary, "srv", workdir)
        gen.start(["--listen", "systemd"], fds=[fd], listen_pid="self", env=systemd_env(1, "http"))
        return expect_start_error(gen, r"(?<![\d:.])3(?!\d)", what)
    finally:
        obj.close()


def case_fd3_regular_file(binary, workdir):
    return _bad_fd3(binary, workdir, lambda: open(os.path.join(workdir, "regular-file"), "w+b"), "fd 3 a regular file")


def _bound_socket(kind):
    """A function that makes a socket of `kind` bound to a free port of 127.0.0.1."""
    def make():
        s = socket.socket(socket.AF_INET, kind)
        s.bind(("127.0.0.1", 0))
        return s

    return make


def case_fd3_udp_socket(binary, workdir):
    return _bad_fd3(binary, workdir, _bound_socket(socket.SOCK_DGRAM), "fd 3 a UDP socket")


def case_fd3_unlistened_tcp(binary, workdir):
    return _bad_fd3(binary, workdir, _bound_socket(socket.SOCK_STREAM), "fd 3 a TCP socket without listen(2)")


def case_no_listen_fds(binary, workdir):
    gen = c.Generation(binary, "srv", workdir)
    gen.start(["--listen", "systemd"])  # LISTEN_* removed from the environment
    return expect_start_error(gen, r".", "--listen systemd without LISTEN_FDS")


# --- systemd socket names ------------------------------------------------------------------


def case_fdnames(binary, workdir):
    with h.listening_socket() as http_sock, h.listening_socket() as admin_sock:
        http_port, admin_port = http_sock.getsockname()[1], admin_sock.getsockname()[1]
        fds = [http_sock.fileno(), admin_sock.fileno()]
        env = systemd_env(2, "http:admin")

        gen = c.Generation(binary, "admin-only", workdir)
        gen.start(["--listen", "systemd:admin"], fds=fds, listen_pid="self", env=env)
        addrs = gen.wait_listening(1, timeout=15)
        time.sleep(0.3)  # a second line would come at once
        addrs = gen.wait_listening(1, timeout=1)
        expect(addrs == [f"127.0.0.1:{admin_port}"], f"--listen systemd:admin: listening on {addrs}, want only 127.0.0.1:{admin_port}")
        status, _ = h.http_get(admin_port)
        expect(status == 200, f"--listen systemd:admin: GET / on admin's port -> {status}")
        # http's socket is still listening (we hold it), but nobody accepts from it: a request
        # gets no answer.
        try:
            status, _ = h.http_get(http_port, timeout=0.5)
            raise CaseFailed(f"--listen systemd:admin: http's port answered {status}")
        except (TimeoutError, socket.timeout):
            pass
        expect_clean_exit(gen, "--listen systemd:admin")

        gen = c.Generation(binary, "both", workdir)
        gen.start(["--listen", "systemd"], fds=fds, listen_pid="self", env=env)
        addrs = gen.wait_listening(2, timeout=15)
        want = sorted([f"127.0.0.1:{http_port}", f"127.0.0.1:{admin_port}"])
        expect(sorted(addrs) == want, f"--listen systemd: listening on {addrs}, want {want}")
        for port in (http_port, admin_port):
            status, _ = h.http_get(port)
            expect(status == 200, f"--listen systemd: GET / on {port} -> {status}")
        expect_clean_exit(gen, "--listen systemd")
    return f"systemd:admin -> {admin_port} only; systemd -> both"


# --- hand-overs that fail ------------------------------------------------------------------


def start_plain(binary, workdir, name, flags):
    gen = c.Generation(binary, name, workdir)
    gen.start(["--listen", "127.0.0.1:0", *flags])
    addrs = gen.wait_listening(1, timeout=15)
    return gen, h.port_of(addrs[0])


def case_sigusr2_ignored(binary, workdir):
    gen, port = start_plain(binary, workdir, "srv", [])
    expect_serving(port, "before SIGUSR2")
    before = len(gen.stderr_text())
    gen.signal(signal.SIGUSR2)
    deadline = time.monotonic() + 3
    while len(gen.stderr_text()) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    logged = gen.stderr_text()[before:].strip()
    expect(gen.proc.poll() is None, f"exited {gen.proc.returncode} on SIGUSR2; stderr:\n{gen.stderr_tail()}")
    expect(logged, "nothing logged within 3s of SIGUSR2")
    expect_serving(port, "after SIGUSR2")
    expect_clean_exit(gen, "after SIGUSR2")
    return logged.splitlines()[0]


def wait_failed(gen, bound, when):
    t = time.monotonic()
    ok = gen.wait_stderr("hand-over failed", bound)
    expect(ok, f"{when}: no `hand-over failed` within {bound:g}s; stderr:\n{gen.stderr_tail()}")
    expect(gen.proc.poll() is None, f"{when}: exited {gen.proc.returncode}; stderr:\n{gen.stderr_tail()}")
    line = next(line for line in gen.stderr_text().splitlines() if "hand-over failed" in line)
    return time.monotonic() - t, line.strip()


def case_no_successor(binary, workdir):
    path = os.path.join(workdir, "h.sock")
    flags = ["--handover-socket", path, "--handover-timeout", "1s", "--shutdown-delay", "0s"]
    gen, port = start_plain(binary, workdir, "old", flags)
    gen.signal(signal.SIGUSR2)
    took, line = wait_failed(gen, 1 + 3, "SIGUSR2 with no successor")
    expect_serving(port, "after the failed hand-over")
    # A later hand-over to a real successor still works.
    succ = c.Generation(binary, "successor", workdir)
    succ.start(["--listen", "handover", *flags[:2], "--handover-timeout", "10s", "--shutdown-delay", "0s"])
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        expect(succ.proc.poll() is None, f"successor exited {succ.proc.returncode}:\n{succ.stderr_tail()}")
        time.sleep(0.01)
    expect(os.path.exists(path), f"the successor did not bind {path} within 10s")
    gen.signal(signal.SIGUSR2)
    addrs = succ.wait_listening(1, timeout=10)
    expect(addrs == [f"127.0.0.1:{port}"], f"successor listening on {addrs}, want 127.0.0.1:{port}")
    code = gen.wait_exit(EXIT_BOUND)
    expect(code == 0, f"old after the second (real) hand-over: exit {code} (want 0):\n{gen.stderr_tail()}")
    expect("listeners handed over" in gen.stderr_text(), f"old: no `listeners handed over`:\n{gen.stderr_tail()}")
    expect_serving(port, "successor after the hand-over")
    expect_clean_exit(succ, "successor")
    return f"{line} (+{took:.2f}s); a later real hand-over succeeded"


class FakeSuccessor:
    """Listens on `path`, takes one predecessor's message, checks it, and then either closes
    (`answer=False`, at once) or holds the connection until `release()`."""

    def __init__(self, path, hold):
        self.path, self.hold = path, hold
        self.findings = []
        self.errors = []
        self.received = threading.Event()
        self._release = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.sock.settimeout(15)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        conn = None
        fds = []
        try:
            conn, _ = self.sock.accept()
            conn.settimeout(10)
            msg, fds, _flags, _addr = socket.recv_fds(conn, 4096, 16)
            if not msg.startswith(HANDOVER_HEADER):
                self.errors.append(f"payload does not start with {HANDOVER_HEADER!r}: {msg[:100]!r}")
            names = msg[len(HANDOVER_HEADER):].decode(errors="replace").split("\n")
            if names and names[-1] == "":
                names.pop()
            else:
                self.errors.append(f"the names do not end with a newline: {msg!r}")
            if not fds:
                self.errors.append("no descriptors received")
            if len(names) != len(fds):
                self.errors.append(f"{len(names)} names {names!r} for {len(fds)} descriptors")
            for fd in fds:
                s = socket.socket(fileno=os.dup(fd))
                try:
                    listening = s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    desc = f"{s.family.name}/{s.type.name} {s.getsockname()} listening={listening}"
                    self.findings.append(desc)
                    if s.family != socket.AF_INET or s.type != socket.SOCK_STREAM or not listening:
                        self.errors.append(f"descriptor is not a listening TCP socket: {desc}")
                finally:
                    s.close()
            self.findings.append(f"names {names!r}")
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            for fd in fds:
                os.close(fd)
            self.received.set()
            if conn is not None:
                if self.hold:
                    self._release.wait(30)
                conn.close()
            self.sock.close()

    def release(self):
        self._release.set()
        self._thread.join(10)


def _fake(binary, workdir, hold, timeout, fail_bound):
    path = os.path.join(workdir, "h.sock")
    flags = ["--handover-socket", path, "--handover-timeout", timeout, "--shutdown-delay", "0s"]
    gen, port = start_plain(binary, workdir, "old", flags)
    fake = FakeSuccessor(path, hold)
    try:
        sig_at = time.monotonic()
        gen.signal(signal.SIGUSR2)
        expect(fake.received.wait(10), "the old process never connected to the fake successor")
        expect(not fake.errors, "the hand-over message: " + "; ".join(fake.errors))
        took, line = wait_failed(gen, max(0.0, sig_at + fail_bound - time.monotonic()), "fake successor")
        took = time.monotonic() - sig_at
        expect_serving(port, "after the failed hand-over")
    finally:
        fake.release()
    expect_serving(port, "after the fake successor closed")
    expect_clean_exit(gen, "after the failed hand-over")
    return f"{line} (+{took:.2f}s after SIGUSR2); received {'; '.join(fake.findings)}"


def case_fake_closes(binary, workdir):
    return _fake(binary, workdir, hold=False, timeout="10s", fail_bound=3)


def case_fake_stalls(binary, workdir):
    return _fake(binary, workdir, hold=True, timeout="1s", fail_bound=1 + 3)


def case_successor_alone(binary, workdir):
    path = os.path.join(workdir, "h.sock")
    gen = c.Generation(binary, "successor", workdir)
    gen.start(["--listen", "handover", "--handover-socket", path, "--handover-timeout", "1s"])
    code = gen.wait_exit(1 + EXIT_BOUND)
    took = time.monotonic() - gen.started_at
    expect(code is not None, f"still running {1 + EXIT_BOUND:g}s after start (killed)")
    expect(code == 1, f"exit {code} without a predecessor (want 1); stderr:\n{gen.stderr_tail()}")
    expect(took >= 0.9, f"exit {code} after {took:.2f}s: it did not wait for its --handover-timeout 1s")
    lines = [line.strip() for line in gen.stderr_text().splitlines() if "error:" in line]
    expect(lines, f"exit {code} without an `error:` line:\n{gen.stderr_tail()}")
    return f"exit {code} after {took:.2f}s: {lines[0]}"


CASES = [
    ("listen-pid-other", case_listen_pid_other),
    ("listen-fds-abc", case_listen_fds_abc),
    ("fd3-regular-file", case_fd3_regular_file),
    ("fd3-udp-socket", case_fd3_udp_socket),
    ("fd3-unlistened-tcp", case_fd3_unlistened_tcp),
    ("no-listen-fds", case_no_listen_fds),
    ("fdnames", case_fdnames),
    ("sigusr2-ignored", case_sigusr2_ignored),
    ("no-successor", case_no_successor),
    ("fake-closes", case_fake_closes),
    ("fake-stalls", case_fake_stalls),
    ("successor-alone", case_successor_alone),
]


# The short form, CI's run (see harness.cli): the defaults.
SHORT = [[]]


def main(argv=None):
    p = h.parser("bad_inputs", __doc__)
    h.add_runtimes(p)
    p.add_argument("--cases", default=",".join(n for n, _ in CASES), help="comma-separated case names")
    c.add_build_flags(p)
    p.add_argument("--keep", action="store_true", help="keep every case's logs (failed cases always keep them)")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    known = dict(CASES)
    cases = h.parse_list(p, args.cases, known, "case")

    examples = h.ready_examples(runtimes, args)
    if examples is None:
        return 2
    rows, bad = [], []
    for runtime in runtimes:
        binary = os.path.join(examples, runtime)
        h.log(f"\n==> {runtime}")
        for name in cases:
            workdir = tempfile.mkdtemp(prefix=f"restart-bad-{runtime}-{name}-")
            started = time.monotonic()
            try:
                detail = known[name](binary, workdir)
                ok = True
            except CaseFailed as e:
                detail, ok = str(e), False
            except Exception as e:
                detail, ok = f"{type(e).__name__}: {e}", False
            finally:
                h.kill_all_children()
            took = time.monotonic() - started
            h.log(f"    {'ok  ' if ok else 'FAIL'} {name} ({took:.1f}s): {detail}")
            if not ok or args.keep:
                h.log(f"         logs kept in {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
            if not ok:
                bad.append(f"{runtime} {name}")
            rows.append([runtime, name, f"{took:.1f}s", "ok" if ok else "FAIL"])
    h.log("\n" + h.table(["runtime", "case", "time", "result"], rows))
    return h.conclude(bad, f"{len(rows)} cases passed.")

