"""Helpers shared by the restart proofs (socket_activation.py, handover.py, bad_inputs.py):
server generations started with inherited listening sockets (systemd's socket-activation
protocol) or as hand-over successors, their `listening on` lines and logs, wrk runs, plain HTTP
requests and a `/watch` stream reader. With `--tls` every generation serves TLS (a CA and a
server certificate made with the openssl CLI) and every client speaks it.

Builds on tests/rolling/harness.py: every child is tracked by its PID there and killed on every
exit path (`harness.run_main`).

Stdlib only. Loopback only. Every wait is bounded.
"""

import fcntl
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "rolling"))
import harness as h  # noqa: E402

RUNTIMES = ["tokio_server", "axum_server", "smol_server", "actix_server"]
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
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated example names")
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


class Tls:
    """The TLS of a run: a CA and a server certificate for 127.0.0.1 signed by it (openssl),
    the servers' flags for them, and a client context that verifies the server."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="restart-tls-")
        self.ca, self.cert, self.key = (os.path.join(self.dir, n) for n in ("ca.crt", "tls.crt", "tls.key"))
        ca_key, csr, ext = (os.path.join(self.dir, n) for n in ("ca.key", "tls.csr", "ext"))
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for cmd in (
            ["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-subj", "/CN=restart-ca", "-days", "2"],
            ["openssl", "req", *ec, "-keyout", self.key, "-out", csr, "-subj", "/CN=127.0.0.1"],
            ["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", self.cert, "-days", "2", "-extfile", ext],
        ):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        self.context = ssl.create_default_context(cafile=self.ca)

    def flags(self):
        return ["--tls-cert-file", self.cert, "--tls-private-key-file", self.key]

    def wrap(self, sock):
        return self.context.wrap_socket(sock, server_hostname="127.0.0.1")


# The run's TLS, once `use_tls` is called (--tls); None: plaintext.
TLS = None


def use_tls(args):
    """Turns TLS on for every generation and client of this process when `args.tls`."""
    global TLS
    if getattr(args, "tls", False) and TLS is None:
        TLS = Tls()
        h.log(f"TLS: every generation serves TLS with a certificate from {TLS.dir}")


def connect(port, timeout):
    """A connection to 127.0.0.1:`port`, over TLS when the run uses it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if TLS is None:
        return sock
    try:
        return TLS.wrap(sock)
    except BaseException:
        sock.close()
        raise


def report(results, head, rows, ok):
    """Prints the result table; returns the exit code: 1 if a run failed, else 0 after `ok`."""
    h.log("\n" + table(head, rows))
    bad = [r["runtime"] for r in results if r["problems"]]
    if bad:
        h.log("\nFAILED: " + ", ".join(bad))
        return 1
    h.log("\nOK: " + ok)
    return 0


def build(args):
    """Builds the examples (release) unless --no-build or --bin-dir; returns their directory,
    or None after a failed build."""
    if args.bin_dir:
        return os.path.abspath(args.bin_dir)
    if not args.no_build:
        h.log("==> cargo build --release --examples")
        if subprocess.run(["cargo", "build", "--release", "--examples"], cwd=h.ROOT).returncode != 0:
            return None
    return os.path.join(h.target_dir(), "release", "examples")


def parse_runtimes(parser, text):
    runtimes = [r for r in text.split(",") if r]
    for r in runtimes:
        if r not in RUNTIMES:
            parser.error(f"unknown runtime {r!r} (known: {', '.join(RUNTIMES)})")
    return runtimes


def listening_socket(backlog=1024, port=0):
    """A TCP socket listening on 127.0.0.1:`port` (0: any free port), as systemd would hold it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(backlog)
    return s


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
            command = [self.binary, *args, *(TLS.flags() if TLS else [])]
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


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def http_get(port, path="/", timeout=3.0):
    """(status, body) of GET `path` on a fresh connection to 127.0.0.1:`port`."""
    if TLS is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=TLS.context)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


def wrk(port, duration, workdir, name, threads=2, connections=32, path="/"):
    """Starts wrk (keep-alive) against 127.0.0.1:`port`; returns (proc, output path)."""
    out_path = os.path.join(workdir, f"{name}.out")
    with open(out_path, "wb") as out:
        proc = h.spawn(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{duration}s",
                "--timeout",
                "5s",
                "--latency",
                f"{'http' if TLS is None else 'https'}://127.0.0.1:{port}{path}",
            ],
            out,
            subprocess.STDOUT,
        )
    return proc, out_path


def wrk_result(proc, out_path, timeout):
    code = h.reap(proc, timeout)
    with open(out_path, "r", errors="replace") as f:
        text = f.read()
    if code != 0:
        raise RuntimeError(f"wrk exited {code}:\n{text}")
    return h.parse_wrk(text)


class WatchStream:
    """A `GET /watch` on its own connection, read to its end by a thread.

    Each read waits at most `timeout`. `ended_at` is when the body ended; `clean` is True when
    it ended with HTTP/1.1's final chunk (`0` CRLF CRLF), False when the connection was cut (or
    a read timed out) before it."""

    def __init__(self, port, timeout=30.0):
        self.port = port
        self.lines = 0
        self.ended_at = None
        self.clean = None
        self.error = None
        self.status = None
        self._sock = connect(port, timeout)
        self._sock.sendall(b"GET /watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self._file = self._sock.makefile("rb")
        status_line = self._file.readline(1024)
        parts = status_line.split()
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        headers = {}
        for _ in range(100):
            line = self._file.readline(8192)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        self.chunked = headers.get("transfer-encoding") == "chunked"
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            if not self.chunked:
                raise ValueError("the response is not chunked")
            while True:
                size_line = self._file.readline(1024)
                if not size_line.endswith(b"\n"):
                    raise ConnectionError("cut before the final chunk")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    # Trailers (none expected), then the empty line.
                    for _ in range(100):
                        line = self._file.readline(8192)
                        if line in (b"\r\n", b"\n"):
                            break
                        if not line.endswith(b"\n"):
                            raise ConnectionError("cut inside the final chunk")
                    self.clean = True
                    return
                data = self._file.read(size + 2)
                if len(data) != size + 2:
                    raise ConnectionError("cut inside a chunk")
                self.lines += data.count(b"\n") - 1
        except (OSError, ValueError) as e:
            self.clean = False
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ended_at = time.monotonic()
            self._close()

    def _close(self):
        for closable in (self._file, self._sock):
            try:
                closable.close()
            except OSError:
                pass

    def wait(self, timeout):
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(5)


class KeepAliveProbe:
    """`connections` HTTP/1.1 keep-alive clients sending `GET /` one after the other (with
    `pause` seconds between requests) to 127.0.0.1:`port` until `stop()`, and recording how
    each connection ended. wrk only counts "read errors"; this says what they were:

      clean             the server said `Connection: close` on a 2xx reply (the client then
                        opens a new connection: no request lost)
      eof               the server closed the connection after a request was sent and before
                        any reply byte (a keep-alive connection closed while the client reused it)
      reset             ECONNRESET/EPIPE while sending or reading
      timeout           no reply within the timeout
      status NNN        a non-2xx reply (with its `Connection` header and the start of its body)
      refused           a new connection was refused
    """

    def __init__(self, port, connections=4, pause=0.005, timeout=5.0):
        self.port, self.pause, self.timeout = port, pause, timeout
        self.requests = 0
        self.outcomes = {}
        self.examples = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(connections)]
        for t in self._threads:
            t.start()

    def _note(self, kind, example=None):
        with self._lock:
            self.outcomes[kind] = self.outcomes.get(kind, 0) + 1
            if example and kind not in self.examples:
                self.examples[kind] = example

    def _run(self):
        sock = None
        while not self._stop.is_set():
            try:
                if sock is None:
                    sock = connect(self.port, self.timeout)
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise EOFError
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                status = lines[0].split(" ")[1]
                fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
                length = int(fields.get("content-length", "0"))
                deadline = time.monotonic() + self.timeout
                while len(body) < length and time.monotonic() < deadline:
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise EOFError
                    body += chunk
                with self._lock:
                    self.requests += 1
                close = fields.get("connection", "").lower() == "close"
                if not status.startswith("2"):
                    self._note(
                        f"status {status}",
                        f"{lines[0]}; connection: {fields.get('connection', '-')}; body {body[:80]!r}",
                    )
                elif close:
                    self._note("clean")
                if close:
                    sock.close()
                    sock = None
            except (EOFError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                self._note("eof")
                sock.close()
                sock = None
            except ConnectionRefusedError:
                self._note("refused")
                sock = None
            except (ConnectionResetError, BrokenPipeError):
                self._note("reset")
                sock.close()
                sock = None
            except socket.timeout:
                self._note("timeout")
                sock.close()
                sock = None
            except OSError as e:
                self._note(f"{type(e).__name__}", str(e))
                if sock is not None:
                    sock.close()
                sock = None
            if self.pause:
                self._stop.wait(self.pause)
        if sock is not None:
            sock.close()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + 5)

    def bad(self):
        """The outcomes that lost a request (all but `clean`)."""
        return {k: v for k, v in self.outcomes.items() if k != "clean"}

    def summary(self):
        parts = [f"{k} {v}" for k, v in sorted(self.outcomes.items())] or ["no connection ended"]
        text = f"{self.requests} requests; connection ends: " + ", ".join(parts)
        for k, ex in sorted(self.examples.items()):
            text += f"\n        e.g. {k}: {ex}"
        return text


def table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def check_tools(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    for t in missing:
        h.log(f"error: {t} not found")
    return not missing


def term_and_wait(gen, timeout):
    gen.signal(signal.SIGTERM)
    return gen.wait_exit(timeout)


def finish_load(wrk_proc, wrk_out, args, port, last, exit_bound, note, problems):
    """Ends a proof's load: wrk's result (0 errors of each kind, 0 non-2xx, at least
    --min-requests), a GET / after it, then SIGTERM to the last generation (exit 0 within
    `exit_bound`). Appends what is wrong to `problems`; returns wrk's result."""
    res = wrk_result(wrk_proc, wrk_out, args.duration + 30)
    note(
        f"wrk: {res['requests']} requests; non-2xx {res['non2xx']}, socket errors connect "
        f"{res['connect']}, read {res['read']}, write {res['write']}, timeout {res['timeout']}"
    )
    for kind in ("connect", "read", "write", "timeout", "non2xx"):
        if res[kind] != 0:
            problems.append(f"wrk: {res[kind]} {kind} errors (want 0)")
    if res["requests"] < args.min_requests:
        problems.append(f"wrk: {res['requests']} requests, fewer than --min-requests {args.min_requests}")
    status, _ = http_get(port)
    if status != 200:
        problems.append(f"GET / after the load: {status}")
    code = term_and_wait(last, exit_bound)
    note(f"SIGTERM {last.name}: exited {code}")
    if code != 0:
        problems.append(f"{last.name} exited {code} (want 0):\n{last.stderr_tail()}")
    return res


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
