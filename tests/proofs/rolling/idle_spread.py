"""The idle-close spread (`--idle-close-spread`): when the server stops listening, its idle
connections are closed (HTTP/1.1) or told GOAWAY (HTTP/2) each at its own random point of the
window, so that their clients reconnect at an even rate instead of in one burst; without the
option they all end at the same instant. Checked on every example server (tokio_server,
axum_server, smol_server, actix_server).

For each runtime (--runtimes) the proof runs the example server on 127.0.0.1 twice, in the
default close-listener mode, with `--shutdown-delay 1s` (--delay): once with
`--idle-close-spread 2s` (--spread) and once without it (the baseline). Each run opens
--http1 (5000 by default) HTTP/1.1 keep-alive connections and --h2c (500) HTTP/2 connections
with prior knowledge (the client preface, an empty SETTINGS, then one `GET /` on stream 1:
minimal frames written by hand, HPACK without Huffman coding; the client acknowledges the
server's SETTINGS and answers its PINGs). Every connection carries one `GET /` and reads its
200 answer, then stays idle; all connections are opened before any request is sent, and the
requests go out together, so that no connection has been idle long before SIGTERM (actix-web
closes a keep-alive connection idle for 5 s). Then the proof sends the server SIGTERM and
records, for each connection, when the server ended it: the end of the stream (or a reset)
for HTTP/1.1, the arrival of the first GOAWAY frame for HTTP/2 (the client then closes the
connection and counts that moment as its reconnection). The window starts when the server
stops listening: its `NotAcceptingNewRequest` log line (elapsed since the signal), or
--delay after SIGTERM if the line is missing.

Asserted, per runtime:
  * every connection got its 200 (HTTP/2: a HEADERS frame on stream 1 starting with the HPACK
    index of `:status: 200`, and the stream's end) before SIGTERM, and was ended by the server
    afterwards, none before the window's start (50 ms of tolerance) and none left open;
  * with the spread: every end falls within the window plus 1 s of slack (--slack), and no
    100 ms bucket (counted from the window's start) holds more than 1.5 x the even rate,
    (http1 + h2c) / (spread / 100 ms): 412 of 5500 with the defaults;
  * without it (the baseline): the ends come in a burst, the busiest 100 ms bucket holding
    more than 1.5 x the same even rate, so the run shows what the option changes;
  * the server exited 0 within delay + spread + 5 s after SIGTERM in both runs.

The busiest bucket of both runs, against the even rate, is printed per runtime, and all
runtimes' figures in one table at the end; with --json FILE they are written with every
run's 100 ms histogram. A failed run keeps its directory (the server's logs) and says where.

Stdlib only. Needs the release build of the example servers (built unless --no-build).
Loopback only. Raises this process's limit on open files (the servers inherit it). Every
process started here is killed by its PID when the script ends, however it ends; every wait
is bounded, and the whole proof by --timeout.

Exit status: 0 when every assertion held on every runtime; 1 otherwise (each failure listed);
2 on a setup problem (no server binary, a failed build, a server that does not start, a
connection that cannot be made, too low a file-descriptor limit).
"""

import os
import re
import socket
import struct
import time

import harness as h
from harness.paced_ends import parse_debug_duration

# Bounds of the setup: one connection, every connection's answer.
CONNECT_TIMEOUT_S = 10
ANSWER_TIMEOUT_S = 30
# An end this much before the window's start counts as before it.
EARLY_TOLERANCE_S = 0.05
# The buckets the ends are counted in, and the limit on the busiest against the even rate.
BUCKET_S = 0.1
PEAK_FACTOR = 1.5
# How long after SIGTERM, beyond delay + spread, the server may take to exit.
EXIT_SLACK_S = 5.0
MAX_HEAD = 16384

NOT_ACCEPTING = re.compile(r"name=\"?NotAcceptingNewRequest\"? elapsed=(\S+)")

# HTTP/2 frames (RFC 9113): types and flags the client reads or writes.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY, CONTINUATION = 0x0, 0x1, 0x4, 0x6, 0x7, 0x9
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
# HPACK's static table: index 8 is `:status: 200`.
STATUS_200 = 0x88



def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def h2_request(port):
    """Preface, empty SETTINGS, and `GET /` on stream 1 as one HEADERS frame that ends the
    stream: `:method: GET` (index 2), `:scheme: http` (6), `:path: /` (4), and `:authority`
    as a literal without indexing (name index 1), without Huffman coding."""
    authority = f"127.0.0.1:{port}".encode()
    block = bytes([0x82, 0x86, 0x84, 0x01, len(authority)]) + authority
    return H2_PREFACE + h2_frame(SETTINGS, 0, 0) + h2_frame(HEADERS, END_STREAM | END_HEADERS, 1, block)


# --- the connections ------------------------------------------------------------------------------

class Conn:
    """One connection: its answer, then when the server ended it."""

    def __init__(self, index, proto):
        self.index, self.proto = index, proto
        self.sock = None
        self.buf = bytearray()
        self.answered = None  # when the 200 was complete
        self.status_ok = None
        self.ended = None  # when the server ended the connection
        self.how = None  # "eof", "reset" or "goaway"
        self.error = None
        # HTTP/2: the response's state.
        self.headers_seen = False
        self.stream_ended = False

    def fail(self, message):
        if self.error is None:
            self.error = message

    def feed(self, data, now):
        self.buf += data
        if self.proto == "http1":
            self._feed_http1(now)
        else:
            self._feed_h2(now)

    def _feed_http1(self, now):
        if self.answered is not None:
            if self.buf:
                self.fail(f"{len(self.buf)} unexpected bytes after the answer: {bytes(self.buf[:40])!r}")
                self.buf.clear()
            return
        i = self.buf.find(b"\r\n\r\n")
        if i < 0:
            if len(self.buf) > MAX_HEAD:
                self.fail("an answer head longer than 16 KiB")
            return
        head = bytes(self.buf[:i]).decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        if len(self.buf) < i + 4 + length:
            return
        self.status_ok = head.startswith("HTTP/1.1 200")
        if not self.status_ok:
            self.fail(f"answered {head.splitlines()[0]!r}")
        if "connection: close" in head.lower():
            self.fail("answered with `Connection: close` before SIGTERM")
        del self.buf[: i + 4 + length]
        self.answered = now

    def _feed_h2(self, now):
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + length:
                return
            kind, flags = self.buf[3], self.buf[4]
            stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFF_FFFF
            payload = bytes(self.buf[9 : 9 + length])
            del self.buf[: 9 + length]
            if kind == SETTINGS and not flags & ACK:
                self.sock.sendall(h2_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                self.sock.sendall(h2_frame(PING, ACK, 0, payload))
            elif kind == HEADERS and stream == 1:
                if not self.headers_seen:
                    self.headers_seen = True
                    self.status_ok = payload[:1] == bytes([STATUS_200])
                    if not self.status_ok:
                        self.fail(f"stream 1's HEADERS do not start with `:status: 200`: {payload[:8].hex()}")
                self.stream_ended |= bool(flags & END_STREAM)
            elif kind == DATA and stream == 1:
                self.stream_ended |= bool(flags & END_STREAM)
            elif kind == GOAWAY:
                if self.ended is None:
                    self.ended, self.how = now, "goaway"
                return
            if self.headers_seen and self.stream_ended and self.answered is None:
                self.answered = now


class Clients(h.SocketReader):
    """Every connection in one selector, read in this thread."""

    def __init__(self):
        super().__init__()
        self.conns = self.items
        # Kept as they change: the loop checks them after every read.
        self.answered = 0
        self.ended = 0

    def connect(self, port, http1, h2c):
        for i in range(http1 + h2c):
            c = Conn(i, "http1" if i < http1 else "h2c")
            try:
                c.sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
            except OSError as e:
                raise h.SetupError(f"connection {i}: cannot connect to 127.0.0.1:{port}: {e}") from e
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.add(c)

    def send_requests(self, port):
        http1 = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        h2 = h2_request(port)
        for c in self.conns:
            try:
                c.sock.sendall(http1 if c.proto == "http1" else h2)
            except OSError as e:
                raise h.SetupError(f"connection {c.index} ({c.proto}): cannot send its request: {e}") from e
            self.watch(c)

    def _read(self, c):
        answered, ended = c.answered is not None, c.ended is not None
        self._read_once(c)
        self.answered += (c.answered is not None) - answered
        self.ended += (c.ended is not None) - ended

    def _read_once(self, c):
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            now = time.monotonic()
            if c.ended is None:
                c.ended, c.how = now, "reset"
            if c.answered is None:
                c.fail(f"{type(e).__name__}: {e} before the answer")
            self.close(c)
            return
        now = time.monotonic()
        if not data:
            if c.ended is None:
                c.ended, c.how = now, "eof"
            if c.answered is None:
                c.fail("the connection ended before the answer")
            self.close(c)
            return
        try:
            c.feed(data, now)
        except OSError as e:  # an ACK that could not be written: the connection is gone
            c.fail(f"{type(e).__name__}: {e}")
        if c.ended is not None:
            # The client "reconnects" now: it leaves the old connection.
            self.close(c)


# --- one run -------------------------------------------------------------------------------------

def window_start_after_term(stderr_path, delay_s):
    """The `NotAcceptingNewRequest` line's elapsed time (since the signal), or `delay_s`."""
    try:
        with open(stderr_path, "r", errors="replace") as f:
            for line in f:
                m = NOT_ACCEPTING.search(line)
                if m:
                    elapsed = parse_debug_duration(m.group(1))
                    if elapsed is not None:
                        return elapsed, True
    except OSError:
        pass
    return delay_s, False


def histogram(ends, start):
    """{bucket index: count} of `ends` in 100 ms buckets from `start` (negative: before it)."""
    out = {}
    for t in ends:
        b = int((t - start) // BUCKET_S)
        out[b] = out.get(b, 0) + 1
    return dict(sorted(out.items()))


def run(binary, runtime, spread_s, args):
    label = "spread" if spread_s else "baseline"
    flags = ["--shutdown-delay", f"{args.delay:g}s"]
    if spread_s:
        flags += ["--idle-close-spread", f"{spread_s:g}s"]
    total = args.http1 + args.h2c
    run = h.Run(f"idle-spread-{runtime}-{label}", runtime=runtime, run=label, flags=flags, http1=args.http1,
                h2c=args.h2c)
    failures, note = run.failures, run.note
    clients = Clients()
    try:
        inst = run.start_server(binary, runtime, flags)
        clients.connect(inst.port, args.http1, args.h2c)
        note(f"{args.http1} HTTP/1.1 and {args.h2c} h2c connections open")
        clients.send_requests(inst.port)
        clients.pump(time.monotonic() + ANSWER_TIMEOUT_S, lambda: clients.answered + clients.ended >= total)
        note(f"{clients.answered} of {total} connections answered, then idle")
        run.check_running()
        if clients.answered < total:
            failures.append(f"only {clients.answered} of {total} connections answered within {ANSWER_TIMEOUT_S}s")
        before = [c for c in clients.conns if c.ended is not None]
        if before:
            failures.append(f"{len(before)} connections ended before SIGTERM (first: {before[0].proto} {before[0].how})")
        run.sigterm()
        bound_s = args.delay + spread_s + args.slack
        clients.pump(run.t_term + bound_s + 1, lambda: clients.ended >= total)
        note(f"{clients.ended} of {total} connections ended by the server")
        run.wait_exit(args.delay + spread_s + EXIT_SLACK_S, slack=0)
    except Exception as e:  # noqa: BLE001 (a setup problem, or a failed run with the logs kept)
        run.record(e)
    finally:
        clients.close_all()
        run.kill_server()
    if run.t_term is not None:
        analyse(run.result, clients.conns, run.inst, run.t_term, run.exit_at, run.code, spread_s, args)
    return run.end(args.keep)


def analyse(result, conns, inst, t_term, exit_at, code, spread_s, args):
    failures = result["failures"]
    total = len(conns)
    start_after, logged = window_start_after_term(inst.stderr_path, args.delay)
    start = t_term + start_after
    result["window_start_s"] = round(start_after, 4)
    result["window_start_logged"] = logged

    errors = [c for c in conns if c.error]
    if errors:
        failures.append(f"{len(errors)} of {total} connections failed (first: {errors[0].proto} #{errors[0].index}: {errors[0].error})")
    open_left = [c for c in conns if c.ended is None]
    if open_left:
        failures.append(f"{len(open_left)} of {total} connections were never ended by the server (first: {open_left[0].proto})")
    ends = [c.ended for c in conns if c.ended is not None and c.ended >= t_term]
    early = [t for t in ends if t < start - EARLY_TOLERANCE_S]
    if early:
        failures.append(
            f"{len(early)} connections ended before the window's start (+{start_after:.3f}s after SIGTERM), "
            f"the first +{min(early) - t_term:.3f}s after SIGTERM"
        )
    hist = histogram(ends, start)
    result["histogram"] = hist
    result["ends_by"] = {p: dict(sorted(_count(c.how for c in conns if c.proto == p).items())) for p in ("http1", "h2c")}
    result["first_end_s"] = round(min(ends) - start, 4) if ends else None
    result["last_end_s"] = round(max(ends) - start, 4) if ends else None
    window_s = spread_s or args.spread
    even = total / (window_s / BUCKET_S)
    peak = max(hist.values()) if hist else 0
    result["even_per_bucket"] = round(even, 1)
    result["peak"] = peak
    result["peak_limit"] = round(PEAK_FACTOR * even, 1)
    if spread_s:
        late = [t for t in ends if t > start + spread_s + args.slack]
        if late:
            failures.append(
                f"{len(late)} connections ended after the window + {args.slack:g}s, the last "
                f"{max(late) - start:.3f}s after its start"
            )
        if peak > PEAK_FACTOR * even:
            busiest = max(hist, key=hist.get)
            failures.append(
                f"the busiest 100 ms bucket (+{busiest * BUCKET_S:.1f}s) holds {peak} ends, more than "
                f"{PEAK_FACTOR:g} x the even rate {even:.1f}"
            )
    elif peak <= PEAK_FACTOR * even:
        failures.append(
            f"the baseline shows no burst: its busiest 100 ms bucket holds {peak} ends, not more than "
            f"{PEAK_FACTOR:g} x the even rate {even:.1f}"
        )
    result["exit_code"] = code
    result["exit_s"] = round(exit_at - t_term, 3) if exit_at is not None else None
    if code is not None and code != 0:
        failures.append(f"the server exited {code}, not 0")
    if failures:
        result["server_log"] = h.server_log_lines(inst.stderr_path)


def _count(values):
    out = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


# --- report ----------------------------------------------------------------------------------------

HEAD = ["runtime", "run", "window start", "first end", "last end", "peak/100ms", "even", "limit", "exit", "exit after SIGTERM"]


def row(r):
    if "peak" not in r:
        return [r["runtime"], r["run"], "error"] + ["-"] * (len(HEAD) - 3)
    limit = f"<= {r['peak_limit']:g}" if r["run"] == "spread" else f"> {r['peak_limit']:g}"
    return [
        r["runtime"], r["run"], h.fmt_s(r["window_start_s"]),
        h.fmt_s(r["first_end_s"]), h.fmt_s(r["last_end_s"]),
        str(r["peak"]), f"{r['even_per_bucket']:g}", limit,
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
    ]


def log_figures(r):
    """The run's own lines in its log (see h.log_result): the ends per 100 ms and how they
    ended."""
    if "histogram" in r:
        h.log("    ends per 100 ms from the window's start: " + ", ".join(f"{b * BUCKET_S:+.1f}s: {n}" for b, n in r["histogram"].items()))
        h.log("    how they ended: " + "; ".join(f"{p}: {v}" for p, v in r["ends_by"].items()))


# The short form, CI's run (see harness.cli): the defaults.
SHORT = [[]]


def main(argv=None):
    p = h.parser("idle_spread", __doc__)
    h.add_runtimes(p)
    p.add_argument("--http1", type=int, default=5000, help="idle HTTP/1.1 keep-alive connections")
    p.add_argument("--h2c", type=int, default=500, help="idle HTTP/2 (prior knowledge) connections")
    p.add_argument("--delay", type=float, default=1.0, help="--shutdown-delay, in seconds")
    p.add_argument("--spread", type=float, default=2.0, help="--idle-close-spread, in seconds")
    p.add_argument("--slack", type=float, default=1.0, help="how late after the window an end may come, in seconds")
    p.add_argument("--timeout", type=float, default=900.0, help="bound on the whole proof, in seconds")
    h.add_run_options(p)
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    if args.http1 < 0 or args.h2c < 0 or args.http1 + args.h2c < 1:
        p.error("--http1 and --h2c: at least one connection in all")
    if args.spread <= 0:
        p.error("--spread must be positive")
    if args.delay < 0 or args.slack < 0:
        p.error("--delay and --slack must be 0 or more")
    examples = h.ready_examples(runtimes, args, sockets=args.http1 + args.h2c, what="connections")
    if examples is None:
        return 2

    total = args.http1 + args.h2c
    even = total / (args.spread / BUCKET_S)
    h.log(
        f"--shutdown-delay {args.delay:g}s; {args.http1} idle HTTP/1.1 and {args.h2c} idle h2c connections; "
        f"with --idle-close-spread {args.spread:g}s, and without it"
    )
    h.log(
        f"expected with the spread: ends from the stop (+{args.delay:g}s) over {args.spread:g}s, "
        f"about {even:.0f} per 100 ms, at most {PEAK_FACTOR * even:.0f} in any 100 ms; without it: one burst"
    )
    started = time.monotonic()
    results = []
    for runtime in runtimes:
        binary = os.path.join(examples, runtime)
        for spread_s in (args.spread, 0.0):
            if time.monotonic() - started > args.timeout:
                h.log(f"\nerror: the proof took longer than --timeout {args.timeout:g}s: stopped")
                return 1
            h.log(f"\n==> {runtime}, " + (f"--idle-close-spread {spread_s:g}s" if spread_s else "baseline (no spread)"))
            r = run(binary, runtime, spread_s, args)
            h.log_result(r, log_figures)
            results.append(r)
    h.log(f"\nall runs ({time.monotonic() - started:.0f}s):\n" + h.table(HEAD, [row(r) for r in results]))
    status = h.exit_status(results, args, lambda r: f"{r['runtime']} {r['run']}")
    if status:
        return status
    h.log(
        f"\nOK: on {', '.join(runtimes)}: with --idle-close-spread {args.spread:g}s every one of the {total} idle "
        f"connections was ended within the window (+{args.slack:g}s), at most {PEAK_FACTOR:g} x the even rate "
        f"({even:.0f}) per 100 ms; without it they ended in one burst; every server exited 0."
    )
    return 0
