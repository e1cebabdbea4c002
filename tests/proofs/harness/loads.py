"""The loads' clients: plain HTTP requests, wrk (started, and its summary read), a `/watch`
stream reader and a keep-alive probe that says how each lost request was lost. Each speaks
TLS when the run uses it (`harness.use_tls`)."""

import http.client
import os
import re
import socket
import ssl
import subprocess
import threading
import time

from harness.processes import reap, spawn
from harness.tls import connect, run_tls


def http_get(port, path="/", timeout=3.0, tls=None):
    """(status, body) of GET `path` on a fresh connection to 127.0.0.1:`port`, over TLS with
    `tls` (a harness.Tls) or the run's TLS."""
    tls = tls or run_tls()
    if tls is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=tls.context)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


WRK_SUMMARY = re.compile(r"(\d+) requests in ([\d.]+)(\w+)")
WRK_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
WRK_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


def parse_wrk(text):
    """wrk's summary: requests, non-2xx/3xx replies, socket errors by kind, and their sum."""
    m = WRK_SUMMARY.search(text)
    if not m:
        raise RuntimeError("cannot read wrk's summary:\n" + text)
    requests = int(m.group(1))
    sock = WRK_SOCKET.search(text)
    errors = [int(x) for x in sock.groups()] if sock else [0, 0, 0, 0]
    non2xx = WRK_NON2XX.search(text)
    non2xx = int(non2xx.group(1)) if non2xx else 0
    return {
        "requests": requests,
        "non2xx": non2xx,
        "connect": errors[0],
        "read": errors[1],
        "write": errors[2],
        "timeout": errors[3],
        "failed": non2xx + sum(errors),
    }


def wrk(port, duration, workdir, name, threads=2, connections=32, path="/", headers=()):
    """Starts wrk (keep-alive, unless `headers` has `Connection: close`) against
    127.0.0.1:`port`, with each of `headers` added to every request; returns (proc, output
    path)."""
    out_path = os.path.join(workdir, f"{name}.out")
    with open(out_path, "wb") as out:
        proc = spawn(
            [
                "wrk",
                f"-t{threads}",
                f"-c{connections}",
                f"-d{duration}s",
                "--timeout",
                "5s",
                "--latency",
                *[a for hd in headers for a in ("-H", hd)],
                f"{'http' if run_tls() is None else 'https'}://127.0.0.1:{port}{path}",
            ],
            out,
            subprocess.STDOUT,
        )
    return proc, out_path


def wrk_result(proc, out_path, timeout):
    """wrk's summary (`parse_wrk`) once it has ended; raises when it exits non-zero."""
    code = reap(proc, timeout)
    with open(out_path, "r", errors="replace") as f:
        text = f.read()
    if code != 0:
        raise RuntimeError(f"wrk exited {code}:\n{text}")
    return parse_wrk(text)


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
