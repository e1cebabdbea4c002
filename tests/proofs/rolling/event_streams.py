"""Server-Sent Events at shutdown: every `/events` stream open at SIGTERM keeps its events
coming, then ends the way an EventSource client expects: one last `retry:` event, then the
end of the response body, the ends paced over the long-running drain. Checked on every
example server (tokio_server, axum_server, smol_server, actix_server).

For each runtime (--runtimes) and mode (--modes; A: the default close-listener mode, B:
`--shutdown-send-retry-after`) the proof starts the example server on 127.0.0.1 with
`--shutdown-delay 1s --shutdown-watch-termination-grace-period 10s` (--delay, --grace) and
opens --streams (500 by default) `GET /events` requests, each on its own HTTP/1.1 connection,
with `Accept: text/event-stream` as a browser's EventSource sends it. The route answers 200
`text/event-stream` (chunked) with an event `id: N` / `data: event N` every 100 ms. All the
connections are read by one reader that works as an EventSource does: it decodes the chunked
body itself, accumulates the text and cuts it into events at blank lines (lines ending in LF
or CRLF). Once every stream has received at least one event, the proof sends the server
SIGTERM and records, for each stream, the events that came after the signal, when its
`retry:` event came, when its terminating chunk (`0` CRLF CRLF) came, both measured from the
SIGTERM, and any error (a connection reset, or an end of the connection without the
terminating chunk, is a failure).

What the server is expected to do: serve the streams through the shutdown delay; when it
stops accepting (one shutdown delay after SIGTERM), end each stream at its turn in the paced
long-running drain, one end every 1 / max(streams / grace, 200) seconds (500 streams and a
10 s grace: one every 5 ms, about 2.5 s in all), each stream's events coming until its turn;
at its turn a stream sends `retry: <ms>` (the Retry-After of the mode: 1000 in mode A, 5000
in mode B) as its last event and ends its body with the terminating chunk.

Asserted, per runtime and mode:
  * every stream answered 200 `text/event-stream`, chunked, and received an event before
    SIGTERM; its events are the route's, numbered 0, 1, 2, ... without a gap;
  * every stream's last event is exactly `retry: 1000` (A) or `retry: 5000` (B), the only
    event with a `retry` field, and the body then ended with the terminating chunk, with
    nothing left over (no part of an event, no bytes after it);
  * events kept coming after the signal: at least 1 on every stream and, on average, at
    least (shutdown delay / 100 ms) - 2 per stream;
  * no stream ended before the shutdown delay was over, and every one ended within shutdown
    delay + grace + 2 s after SIGTERM;
  * the ends were paced: the spread between the first and the last end is at least 80% of
    (streams - 1) x the pacing interval (about 2 s for 500 streams), and no 100 ms window
    holds more than half of the ends (with few streams: twice the window's slots);
  * the server exited 0 within shutdown delay + grace + 2 s after SIGTERM, and its
    termination summary says streams_ended=<streams> streams_remaining=0.

Each run's figures are printed as a table, and all runs' in one table at the end; with --json
FILE they are written with every stream's record. A failed run keeps its directory (the
server's logs) and says where; the server's `[graceful-termination]` lines are printed.

Stdlib only. Needs the release build of the example servers (built unless --no-build).
Loopback only. Every process started here is killed by its PID when the script ends, however
it ends; every wait is bounded.

Exit status: 0 when every assertion held in every run; 1 otherwise (each failure listed); 2 on
a setup problem (no server binary, a failed build, a server that does not start, a
connection that cannot be made, too low a file-descriptor limit).
"""

import codecs
import os
import re
import socket
import time

import harness as h

# The `retry:` of each mode's last event: its Retry-After (1 s, 5 s) in milliseconds.
RETRY_MS = {"A": 1000, "B": 5000}
# The route's interval between two events (crates/lameduck-demo/src/routes.rs,
# EVENTS_INTERVAL).
EVENT_INTERVAL_S = 0.1
# Bounds of the setup: one connection, every stream's first event.
CONNECT_TIMEOUT_S = 10
FIRST_EVENT_TIMEOUT_S = 30
# Limits on what a well-formed response can hold before its body (and a chunk-size line).
MAX_HEAD = 16384
MAX_SIZE_LINE = 1024

DATA_EVENT = re.compile(r"^id: (\d+)\ndata: event (\d+)$")



class StreamError(Exception):
    """What ends one stream as a failure: a protocol error, a reset, a cut."""


# --- one stream, read as an EventSource reads it ---------------------------------------------

class EventStream:
    """One `GET /events` on its own connection: the response head, the chunked body decoded
    as it comes, and the events cut from its text at blank lines, each with the time of the
    read that completed it."""

    def __init__(self, index):
        self.index = index
        self.sock = None
        self.buf = bytearray()
        self.state = "head"  # head, size, data, data-crlf, trailer, done
        self.chunk_left = 0
        self.status = None
        self.headers = {}
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.partial = ""  # text of a line not yet complete
        self.lines = []  # the lines of the event being accumulated
        self.events = []  # (monotonic time, event text: its lines joined with LF)
        self.ended = None  # the terminating chunk's time (a clean end)
        self.error = None
        self.error_at = None
        self.leftover = 0  # bytes after the terminating chunk

    @property
    def finished(self):
        return self.ended is not None or self.error is not None

    def data_events(self):
        return sum(1 for _, e in self.events if not e.startswith("retry:"))

    def fail(self, message, now):
        if self.error is None:
            self.error = message
            self.error_at = now

    def where(self):
        """Where in the response the stream stands, for an error's message."""
        return f"{self.data_events()} events read, in the {self.state} state"

    def feed(self, data, now):
        """Consumes `data`; raises StreamError on a malformed response."""
        self.buf += data
        while True:
            if self.state == "head":
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    if len(self.buf) > MAX_HEAD:
                        raise StreamError(f"a response head longer than {MAX_HEAD} bytes")
                    return
                head = bytes(self.buf[:i]).decode("latin-1")
                del self.buf[: i + 4]
                self.on_head(head)
                self.state = "size"
            elif self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    if len(self.buf) > MAX_SIZE_LINE:
                        raise StreamError("a chunk-size line too long")
                    return
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError as e:
                    raise StreamError(f"a bad chunk-size line {line[:40]!r}") from e
                if size == 0:
                    self.state = "trailer"
                else:
                    self.chunk_left = size
                    self.state = "data"
            elif self.state == "data":
                if not self.buf:
                    return
                take = min(len(self.buf), self.chunk_left)
                self.on_text(bytes(self.buf[:take]), now)
                del self.buf[:take]
                self.chunk_left -= take
                if self.chunk_left == 0:
                    self.state = "data-crlf"
            elif self.state == "data-crlf":
                if len(self.buf) < 2:
                    return
                if self.buf[:2] != b"\r\n":
                    raise StreamError(f"no CRLF after a chunk: {bytes(self.buf[:10])!r}")
                del self.buf[:2]
                self.state = "size"
            elif self.state == "trailer":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    if len(self.buf) > MAX_HEAD:
                        raise StreamError("a trailer line too long")
                    return
                del self.buf[: i + 2]
                if i == 0:
                    # The empty line after the last chunk (and its trailers, if any): the
                    # body is complete.
                    self.state = "done"
                    self.ended = now
                    self.leftover = len(self.buf)
                    return
            else:
                self.leftover += len(self.buf)
                self.buf.clear()
                return

    def on_head(self, head):
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        content_type = self.headers.get("content-type", "")
        chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        if self.status != 200 or not chunked or not content_type.startswith("text/event-stream"):
            raise StreamError(
                f"not a 200 chunked text/event-stream: {lines[0]!r}, content-type {content_type!r}, "
                f"transfer-encoding {self.headers.get('transfer-encoding')!r}"
            )

    def on_text(self, data, now):
        """The body's text: lines end with LF (a CR before it dropped); a blank line ends an
        event (one without any line dispatches nothing, as in an EventSource)."""
        self.partial += self.decoder.decode(data)
        *complete, self.partial = self.partial.split("\n")
        for line in complete:
            if line.endswith("\r"):
                line = line[:-1]
            if line:
                self.lines.append(line)
            elif self.lines:
                self.events.append((now, "\n".join(self.lines)))
                self.lines = []

    def pending_text(self):
        """Text of an event the body ended inside (nothing, on a well-formed stream)."""
        return "\n".join(self.lines) + self.partial + self.decoder.decode(b"", final=True)


class Reader(h.SocketReader):
    """Every stream's connection in one selector, read in this thread."""

    def __init__(self):
        super().__init__()
        self.streams = self.items

    def connect(self, port, n):
        request = (
            f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            "Cache-Control: no-cache\r\n\r\n"
        ).encode()
        for i in range(n):
            s = EventStream(i)
            try:
                s.sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
                s.sock.sendall(request)
            except OSError as e:
                raise h.SetupError(f"stream {i}: cannot connect to 127.0.0.1:{port}: {e}") from e
            self.add(s)
            self.watch(s)
            # Read what has come already: the server answers while the others connect.
            if i % 50 == 49:
                self.poll()

    def _read(self, s):
        """One read of stream `s`'s connection."""
        try:
            data = s.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            s.fail(f"{type(e).__name__}: {e} ({s.where()})", time.monotonic())
            self.close(s)
            return
        now = time.monotonic()
        if not data:
            s.fail(f"the connection ended without the terminating chunk ({s.where()})", now)
            self.close(s)
            return
        try:
            s.feed(data, now)
        except StreamError as e:
            s.fail(f"{e} ({s.where()})", now)
        if s.finished:
            # An EventSource closes its connection at the body's end.
            self.close(s)

    def close_all(self):
        now = time.monotonic()
        for s in self.streams:
            if s.sock is not None:
                s.fail(f"still open when the reader gave up ({s.where()})", now)
        super().close_all()


# --- one run -------------------------------------------------------------------------------------

def run(binary, runtime, mode, args):
    n = args.streams
    bound_s = h.ends_bound(args.delay, args.grace)
    run = h.DrainRun(f"event-streams-{runtime}-{mode}", mode, args, runtime=runtime, streams=n)
    failures, note = run.failures, run.note
    reader = Reader()
    try:
        inst = run.start_server(binary, runtime, run.flags)
        reader.connect(inst.port, n)
        note(f"{n} streams connected")
        first_by = time.monotonic() + FIRST_EVENT_TIMEOUT_S
        waiting = lambda: sum(1 for s in reader.streams if not s.finished and not s.events)  # noqa: E731
        reader.pump(first_by, lambda: waiting() == 0)
        with_event = sum(1 for s in reader.streams if s.events)
        broken = sum(1 for s in reader.streams if s.finished)
        note(f"{with_event} of {n} streams have an event ({broken} ended already)")
        if with_event < n:
            failures.append(
                f"only {with_event} of {n} streams received an event within {FIRST_EVENT_TIMEOUT_S}s "
                f"({broken} ended already); SIGTERM sent anyway"
            )
        run.check_running()
        run.sigterm()
        # Every stream ends within the bound, or fails; 5 s more to see the late ones.
        reader.pump(run.t_term + bound_s + 5, lambda: all(s.finished for s in reader.streams), run.watch_exit)
        note(f"{sum(1 for s in reader.streams if s.finished)} of {n} streams finished")
        run.wait_exit(bound_s)
    except Exception as e:  # noqa: BLE001 (a setup problem, or a failed run with the logs kept)
        run.record(e)
    finally:
        reader.close_all()
        run.kill_server()
    if run.t_term is not None:
        analyse(run.result, reader.streams, run.inst, run.t_term, run.exit_at, run.code, args)
    return run.end(args.keep)


def analyse(result, streams, inst, t_term, exit_at, code, args):
    """The figures of one run and its failed assertions."""
    failures = result["failures"]
    mode, delay_s, grace_s, n = result["mode"], args.delay, args.grace, args.streams
    retry = f"retry: {RETRY_MS[mode]}"
    rel = lambda t: None if t is None else round(t - t_term, 4)  # noqa: E731

    problems = h.Problems()
    records = []
    for s in streams:
        problem = problems.adder("stream", s.index)
        data = [(t, e) for t, e in s.events if not e.startswith("retry:")]
        retries = [(t, e) for t, e in s.events if any(line.startswith("retry:") for line in e.split("\n"))]
        before = sum(1 for t, _ in data if t < t_term)
        after = sum(1 for t, _ in data if t >= t_term)
        retry_at = retries[-1][0] if retries else None
        last = s.events[-1][1] if s.events else None
        ok = True
        if s.error:
            problem(f"error: {s.error.split(' (')[0]}", f"{s.error}, +{rel(s.error_at)}s after SIGTERM")
            ok = False
        if s.ended is None and not s.error:
            problem("no terminating chunk", f"{s.where()}")
            ok = False
        if last != retry:
            problem(f"last event is not `{retry}`", f"last event {last!r}")
            ok = False
        if len(retries) != 1:
            problem("not exactly one retry event", f"{len(retries)} retry events: {[e for _, e in retries][:3]}")
            ok = False
        if s.ended is not None and (s.pending_text() or s.leftover):
            problem("bytes left over at the end",
                    f"text inside an event {s.pending_text()[:60]!r}, {s.leftover} bytes after the terminating chunk")
            ok = False
        ids, strange = [], []
        for _, e in data:
            m = DATA_EVENT.match(e)
            if m and m.group(1) == m.group(2):
                ids.append(int(m.group(1)))
            else:
                strange.append(e)
        if strange:
            problem("events that are not the route's", f"{strange[:3]!r}")
            ok = False
        if ids != list(range(len(ids))):
            problem("events not numbered 0, 1, 2, ...", f"ids {ids[:8]}...{ids[-3:]}")
            ok = False
        if before == 0:
            problem("no event before SIGTERM", f"{len(data)} events, first +{rel(data[0][0]) if data else None}s")
            ok = False
        if after < 1:
            problem("no event after SIGTERM", f"{before} events before it, none after")
            ok = False
        records.append({
            "index": s.index, "status": s.status, "ok": ok, "events_before": before, "events_after": after,
            "retry_s": rel(retry_at), "end_s": rel(s.ended), "last_event": last, "retry_events": len(retries),
            "last_data_s": rel(data[-1][0]) if data else None, "error": s.error, "error_s": rel(s.error_at),
        })
    ok_count = sum(1 for r in records if r["ok"])
    result["ok"] = ok_count
    result["problems"] = problems.report(n, "streams", failures)

    after = [r["events_after"] for r in records]
    result["events_after_min"] = min(after) if after else None
    result["events_after_avg"] = round(sum(after) / len(after), 2) if after else None
    result["events_after_max"] = max(after) if after else None
    # The shutdown delay holds delay / 100 ms events of every stream; 2 fewer leaves room for
    # the edges (the signal and the reader's lateness).
    want_avg = max(0.0, delay_s / EVENT_INTERVAL_S - 2)
    result["events_after_avg_want"] = want_avg
    if after and sum(after) / len(after) < want_avg:
        failures.append(
            f"{sum(after) / len(after):.1f} events after SIGTERM per stream on average, want at least "
            f"{delay_s:g}s / {EVENT_INTERVAL_S * 1000:g}ms - 2 = {want_avg:g}"
        )

    # The retry events and the ends: after the delay, within the bound, paced, in no burst.
    retry_times = sorted(r["retry_s"] for r in records if r["retry_s"] is not None)
    ends = sorted(r["end_s"] for r in records if r["end_s"] is not None)
    retry_to_end = [r["end_s"] - r["retry_s"] for r in records if r["end_s"] is not None and r["retry_s"] is not None]
    result["retry_s"] = {"first": retry_times[0], "last": retry_times[-1]} if retry_times else None
    result["retry_to_end_max_s"] = round(max(retry_to_end), 4) if retry_to_end else None
    interval = h.pacing_interval(n, grace_s)
    result.update(h.check_ends(ends, n, delay_s, grace_s, interval, failures))
    result["max_ends_per_window"], result["max_ends_per_window_want"] = h.check_bursts(ends, n, interval, failures)

    # The server: its drain line (informative), exit and summary.
    stderr_path = inst.stderr_path if inst else None
    result["drain"] = h.drain_line(stderr_path) if stderr_path else None
    result["exit_code"] = code
    result["exit_s"] = h.check_server_exit(code, exit_at, t_term, h.ends_bound(delay_s, grace_s), failures)
    result["summary"] = h.check_streams_summary(stderr_path, n, failures)
    if failures and stderr_path:
        result["server_log"] = h.server_log_lines(stderr_path)
    result["stream_records"] = records


# --- report ----------------------------------------------------------------------------------------

HEAD = [
    "runtime", "mode", "streams OK", "events after SIGTERM min/avg", "first end", "last end",
    "spread (want >=)", "max ends/100ms (want <=)", "exit", "exit after SIGTERM", "streams_ended",
    "streams_remaining",
]


def row(r):
    name = [r["runtime"], f"{r['mode']} ({r['mode_name']})"]
    if "ok" not in r:
        return name + ["error"] + ["-"] * (len(HEAD) - 3)
    e = r["ends_s"]
    s = r.get("summary") or {}
    return name + [
        f"{r['ok']}/{r['streams']}",
        f"{r['events_after_min']}/{r['events_after_avg']}",
        h.fmt_s(e["first"]), h.fmt_s(e["last"]),
        f"{h.fmt_s(r['spread_s'])} ({r['spread_want_s']:.3f}s)",
        f"{r['max_ends_per_window']} ({r['max_ends_per_window_want']:g})",
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
        s.get("streams_ended", "-"), s.get("streams_remaining", "-"),
    ]


def log_figures(r):
    """The run's own lines in its log (see h.log_result): the retry events and the events."""
    if r["retry_s"]:
        h.log(
            f"    retry events +{r['retry_s']['first']:.3f}s to +{r['retry_s']['last']:.3f}s after SIGTERM; "
            f"terminating chunk at most {h.fmt_s(r['retry_to_end_max_s'])} after the retry event"
        )
    h.log(
        f"    events after SIGTERM per stream: min {r['events_after_min']}, avg {r['events_after_avg']}, "
        f"max {r['events_after_max']} (want avg >= {r['events_after_avg_want']:g})"
    )


# The short form, CI's run (see harness.cli): the defaults.
SHORT = [[]]


def main(argv=None):
    p = h.parser("event_streams", __doc__)
    h.add_runtimes(p)
    h.add_drain_arguments(p, 500, "/events streams")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    modes = h.drain_modes(p, args)
    examples = h.ready_examples(runtimes, args, sockets=args.streams, what="streams")
    if examples is None:
        return 2

    interval = h.pacing_interval(args.streams, args.grace)
    h.log(
        f"--shutdown-delay {args.delay:g}s, --shutdown-watch-termination-grace-period {args.grace:g}s; "
        f"{args.streams} /events streams, each on its own connection"
    )
    h.log(
        f"expected: events through the delay, then one end every 1 / max({args.streams} / {args.grace:g}s, "
        f"{h.DEFAULT_MIN_WATCH_DRAIN_QPS}) = {interval * 1000:g}ms from about {args.delay:g}s after SIGTERM "
        f"(({args.streams} - 1) x {interval * 1000:g}ms = {(args.streams - 1) * interval:.3f}s), each a last "
        f"`retry:` event and the terminating chunk; bound {h.ends_bound(args.delay, args.grace):g}s"
    )
    started = time.monotonic()
    results = []
    for runtime in runtimes:
        binary = os.path.join(examples, runtime)
        for mode in modes:
            h.log(f"\n==> {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
            r = run(binary, runtime, mode, args)
            h.log_result(r, h.drain_figures(log_figures))
            h.log_table(h.table(HEAD, [row(r)]))
            results.append(r)
    h.log(f"\nall runs ({time.monotonic() - started:.0f}s):\n" + h.table(HEAD, [row(r) for r in results]))
    status = h.exit_status(results, args, lambda r: f"{r['runtime']} mode {r['mode']}")
    if status:
        return status
    h.log(
        f"\nOK: on {', '.join(runtimes)}, in modes {', '.join(modes)}: all {args.streams} streams kept their "
        f"events through the shutdown delay and ended with one last `retry:` event ("
        + ", ".join(f"{RETRY_MS[m]} in {m}" for m in modes)
        + ") and "
        f"the terminating chunk, paced, within {h.ends_bound(args.delay, args.grace):g}s of SIGTERM; every server "
        f"exited 0 with streams_ended={args.streams} streams_remaining=0."
    )
    return 0
