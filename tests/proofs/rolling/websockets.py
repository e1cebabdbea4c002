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
import asyncio
import base64
import collections
import hashlib
import inspect
import os
import shutil
import signal
import tempfile
import time

import harness as h

# The server's goodbye (RFC 6455, section 7.4.1: 1001 Going Away).
GOING_AWAY = 1001
GOING_AWAY_REASON = "server shutting down"
# The statuses of a Close that fails a connection for bad input: protocol error, data
# inconsistent with its type (not UTF-8), policy violation.
ERROR_CLOSES = (1002, 1007, 1008)
# The misbehaviours whose Close has one status only: text that is not UTF-8 gets 1007
# (invalid payload data; RFC 6455, section 8.1).
EXACT_CLOSES = {"bad UTF-8": (1007,)}
# The GUID of the opening handshake (RFC 6455, section 1.3).
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
# Bounds of the setup: the server's start, one socket's opening handshake, every socket's
# first echo.
START_TIMEOUT_S = 30
CONNECT_TIMEOUT_S = 10
FIRST_ECHO_TIMEOUT_S = 60
# Opening handshakes in flight at once (the listener's backlog is not flooded).
CONNECT_CONCURRENCY = 64
# A client's last echo comes at most its echo interval and this much before its Close.
ECHO_GAP_SLACK_S = 0.5
# The server ends a connection at most this long after the Close the client answered (the
# client waits for it to: RFC 6455, section 7.1.1, the server closes the TCP connection
# first).
CLOSE_TO_END_S = 0.5
# actix-web ends a connection whose response is over only once the client has closed or its
# client-disconnect timeout (1 s, on its 500 ms clock) has passed: it gets this instead. (It
# cuts a silent client that much sooner, so its exit is still within the grace period.)
ACTIX_CLOSE_TO_END_S = 1.5


def close_to_end_s(runtime):
    return ACTIX_CLOSE_TO_END_S if runtime == "actix_server" else CLOSE_TO_END_S

# A silent client's connection ends no later than delay + grace + this, and no sooner than
# delay + grace - SILENT_HELD_S (the server waits for the answer until 100 ms before the end
# of the grace period).
SILENT_CUT_SLACK_S = 0.5
SILENT_HELD_S = 1.0
# The least spread of the Closes asserted on its own, when the slots span at least
# MIN_SPREAD_SPAN_S.
MIN_SPREAD_S = 2.0
MIN_SPREAD_SPAN_S = 2.5
# Bad input: what a misbehaving socket must get within this long, and the raw sockets per
# misbehaviour.
BAD_ANSWER_S = 5.0
BAD_REPEAT = 2
MAX_HEAD = 16384



class ClientError(Exception):
    """What ends one socket's opening as a failure."""


# --- frames and raw sockets ---------------------------------------------------------------------

def encode_frame(opcode, payload, fin=True, rsv=0, mask=True):
    """One frame as a client sends it (masked unless `mask` is False)."""
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    m = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, m | 127]) + n.to_bytes(8, "big")
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code, reason=b""):
    return code.to_bytes(2, "big") + reason


def parse_close(payload):
    """(status, reason) of a Close frame's payload; (None, "") when it has no status."""
    if len(payload) < 2:
        return None, ""
    return int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8", "replace")


def accept_key(key):
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


class Frame:
    """A frame the server sent, with the time of the read that completed it."""

    __slots__ = ("at", "fin", "rsv", "opcode", "masked", "payload")

    def __init__(self, at, fin, rsv, opcode, masked, payload):
        self.at, self.fin, self.rsv, self.opcode, self.masked, self.payload = at, fin, rsv, opcode, masked, payload

    def describe(self):
        if self.opcode == OP_CLOSE:
            code, reason = parse_close(self.payload)
            return f"Close {code} {reason!r}"
        return f"opcode {self.opcode:#x} ({len(self.payload)} bytes)"


class RawSocket(asyncio.Protocol):
    """One connection spoken to by hand: the response head, then the server's frames parsed
    as they come, each with the time of the read that completed it, and the connection's
    end (`eof`, or `reset` on an error)."""

    def __init__(self):
        self.transport = None
        self.buf = bytearray()
        self.status = None
        self.headers = {}
        self.frames = []
        self.bad = None  # what of the server's bytes could not be parsed
        self.ended_at = None
        self.end_how = None
        self.changed = asyncio.Event()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        now = time.monotonic()
        if self.bad:
            return
        self.buf += data
        if self.status is None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                if len(self.buf) > MAX_HEAD:
                    self.bad = f"a response head longer than {MAX_HEAD} bytes"
                self.changed.set()
                return
            lines = bytes(self.buf[:i]).decode("latin-1").split("\r\n")
            del self.buf[: i + 4]
            parts = lines[0].split(" ", 2)
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
        while len(self.buf) >= 2:
            b0, b1 = self.buf[0], self.buf[1]
            n, at = b1 & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    break
                n, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif n == 127:
                if len(self.buf) < 10:
                    break
                n, at = int.from_bytes(self.buf[2:10], "big"), 10
            masked = bool(b1 & 0x80)
            key = b""
            if masked:
                key, at = bytes(self.buf[at:at + 4]), at + 4
            if len(self.buf) < at + n:
                break
            payload = bytes(self.buf[at:at + n])
            if masked and len(key) == 4:
                payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            del self.buf[: at + n]
            self.frames.append(Frame(now, bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0x0F, masked, payload))
        self.changed.set()

    def eof_received(self):
        self._end("eof")
        return False  # the transport closes itself

    def connection_lost(self, exc):
        self._end("eof" if exc is None else f"reset ({type(exc).__name__})")

    def _end(self, how):
        if self.ended_at is None:
            self.ended_at, self.end_how = time.monotonic(), how
        self.changed.set()

    def send(self, data):
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def abort(self):
        if self.transport is not None:
            self.transport.abort()

    def close_frame(self, after=0):
        """The first Close frame from frame number `after` on, or None."""
        return next((f for f in self.frames[after:] if f.opcode == OP_CLOSE), None)

    async def wait(self, predicate, deadline):
        """Waits until `predicate()` or `deadline` (monotonic); returns `predicate()`."""
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return predicate()
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                return predicate()
        return True


async def open_raw(port, deadline):
    """A raw socket upgraded to a WebSocket on `/ws` (the handshake checked); ClientError
    otherwise."""
    loop = asyncio.get_running_loop()
    try:
        _, p = await asyncio.wait_for(
            loop.create_connection(RawSocket, "127.0.0.1", port), max(0.1, deadline - time.monotonic())
        )
    except (OSError, asyncio.TimeoutError) as e:
        raise ClientError(f"connecting: {type(e).__name__}: {e}") from e
    key = base64.b64encode(os.urandom(16)).decode()
    p.send(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    if not await p.wait(lambda: p.status is not None or p.ended_at is not None or p.bad, deadline):
        p.abort()
        raise ClientError("no response to the upgrade in time")
    if p.status is None:
        raise ClientError(f"no response to the upgrade: {p.bad or p.end_how}")
    want = accept_key(key)
    if (
        p.status != 101
        or p.headers.get("upgrade", "").lower() != "websocket"
        or "upgrade" not in p.headers.get("connection", "").lower()
        or p.headers.get("sec-websocket-accept") != want
    ):
        p.abort()
        raise ClientError(
            f"a bad upgrade response: status {p.status}, upgrade {p.headers.get('upgrade')!r}, connection "
            f"{p.headers.get('connection')!r}, accept {p.headers.get('sec-websocket-accept')!r} (want {want!r})"
        )
    return p


async def raw_echo(p, text, deadline):
    """Sends `text` in one masked text frame and checks its echo; ClientError otherwise."""
    n = len(p.frames)
    p.send(encode_frame(OP_TEXT, text.encode()))
    if not await p.wait(lambda: len(p.frames) > n or p.ended_at is not None or p.bad, deadline):
        raise ClientError("no echo in time")
    if len(p.frames) <= n:
        raise ClientError(f"no echo: {p.bad or p.end_how}")
    f = p.frames[n]
    if f.opcode != OP_TEXT or f.payload != text.encode() or not f.fin or f.masked:
        raise ClientError(f"a bad echo: {f.describe()}, fin {f.fin}, masked {f.masked}, {f.payload[:60]!r}")


# --- the clients ------------------------------------------------------------------------------

class NormalClient:
    """One client of the `websockets` library: its echoes (times) and its end."""

    def __init__(self, index):
        self.index = index
        self.ws = None
        self.task = None
        self.error = None
        self.opened_at = None
        self.sent = 0
        self.pending = collections.deque()
        self.echoes = []
        self.mismatch = None
        self.close_frame_at = None  # when the bytes holding the server's Close were read
        self.lost_at = None  # when the connection ended
        self.rcvd = None  # (status, reason) of the server's Close
        self.sent_close = None  # (status, reason) of the client's Close
        self.rcvd_then_sent = None
        self.done = False
        self.gave_up = False  # still open when the proof gave up on it


# Loopback needs no proxy: the library (15 and later) would take one from the environment.
NO_PROXY = {}


def timed_connection_class():
    """The library's client connection, noting when the server's Close frame was read and
    when the connection ended."""
    from websockets.asyncio.client import ClientConnection
    from websockets.frames import Frame as WsFrame
    from websockets.frames import Opcode

    class TimedConnection(ClientConnection):
        rx_at = None
        close_frame_at = None
        lost_at = None

        def data_received(self, data):
            self.rx_at = time.monotonic()
            super().data_received(data)

        def process_event(self, event):
            if isinstance(event, WsFrame) and event.opcode is Opcode.CLOSE and self.close_frame_at is None:
                self.close_frame_at = self.rx_at
            super().process_event(event)

        def connection_lost(self, exc):
            if self.lost_at is None:
                self.lost_at = time.monotonic()
            super().connection_lost(exc)

    return TimedConnection


async def normal_client(c, port, sem, interval, connection_class):
    """Opens `c`'s socket, then echoes a message every `interval` until the connection
    closes."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    try:
        async with sem:
            c.ws = await connect(
                f"ws://127.0.0.1:{port}/ws",
                ping_interval=None,
                open_timeout=CONNECT_TIMEOUT_S,
                create_connection=connection_class,
                **NO_PROXY,
            )
    except Exception as e:  # noqa: BLE001 (recorded as the socket's failure)
        c.error = f"opening: {type(e).__name__}: {e}"
        c.done = True
        return
    c.opened_at = time.monotonic()
    ws = c.ws

    async def send_loop():
        k = 0
        try:
            while ws.close_frame_at is None:
                msg = f"text {c.index} #{k}" if k % 2 == 0 else f"binary {c.index} #{k}".encode() + b"\x00\xff"
                c.pending.append(msg)
                await ws.send(msg)
                c.sent += 1
                k += 1
                await asyncio.sleep(interval)
        except ConnectionClosed:
            pass

    sender = asyncio.create_task(send_loop())
    try:
        while True:
            msg = await ws.recv()
            now = time.monotonic()
            want = c.pending.popleft() if c.pending else None
            if msg != want and c.mismatch is None:
                c.mismatch = f"echo {msg!r:.60} after {len(c.echoes)} echoes, want {want!r:.60}"
            c.echoes.append(now)
    except ConnectionClosed as e:
        c.rcvd = (e.rcvd.code, e.rcvd.reason) if e.rcvd is not None else None
        c.sent_close = (e.sent.code, e.sent.reason) if e.sent is not None else None
        c.rcvd_then_sent = e.rcvd_then_sent
    except Exception as e:  # noqa: BLE001
        c.error = f"{type(e).__name__}: {e}"
    finally:
        sender.cancel()
        c.close_frame_at = ws.close_frame_at
        c.lost_at = ws.lost_at or time.monotonic()
        c.done = True


class SilentClient:
    """One raw client that never answers the server's Close."""

    def __init__(self, index):
        self.index = index
        self.p = None
        self.task = None
        self.error = None
        self.ready_at = None
        self.after = 0  # frames before the silence
        self.gave_up = False  # still open when the proof gave up on it

    @property
    def finished(self):
        return self.error is not None or (self.p is not None and self.p.ended_at is not None)


async def silent_client(c, port, sem):
    try:
        async with sem:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            c.p = await open_raw(port, deadline)
            await raw_echo(c.p, f"silent {c.index}", deadline)
        c.after = len(c.p.frames)
        c.ready_at = time.monotonic()
    except ClientError as e:
        c.error = str(e)




# --- what a run shares -----------------------------------------------------------------------

class Run:
    """One server run: its result, its events, the server and its exit."""

    def __init__(self, binary, runtime, mode, args, scenario):
        self.args = args
        self.runtime = runtime
        self.workdir = tempfile.mkdtemp(prefix=f"websockets-{scenario}-{runtime}-{mode}-")
        self.flags = h.shutdown_flags(args.delay, args.grace, mode)
        self.binary = binary
        self.result = {
            "scenario": scenario, "runtime": runtime, "mode": mode, "mode_name": h.MODE_NAMES[mode],
            "flags": self.flags, "setup_error": None, "failures": [], "events": [], "workdir": self.workdir,
        }
        self.failures = self.result["failures"]
        self.t0 = time.monotonic()
        self.inst = None
        self.t_term = self.exit_at = self.code = None
        self.max_lag = 0.0

    def note(self, msg):
        self.result["events"].append(f"{time.monotonic() - self.t0:6.2f}s {msg}")

    def start(self):
        runtime = self.result["runtime"]
        self.inst = h.Instance(self.binary, runtime, h.free_port(), self.flags, self.workdir)
        try:
            self.inst.start(timeout=START_TIMEOUT_S)
        except RuntimeError as e:
            raise h.SetupError(str(e)) from e
        self.note(
            f"{runtime} listening on 127.0.0.1:{self.inst.port} (pid {self.inst.proc.pid}): {' '.join(self.flags)}"
        )

    def alive(self):
        return self.inst.proc.poll() is None

    def sigterm(self):
        runtime = self.result["runtime"]
        if not self.alive():
            raise h.SetupError(f"{runtime} exited {self.inst.proc.returncode} before SIGTERM:\n{self.inst.stderr_tail()}")
        self.t_term = time.monotonic()
        os.kill(self.inst.proc.pid, signal.SIGTERM)
        self.note(f"SIGTERM to {runtime} (pid {self.inst.proc.pid})")

    def watch_exit(self):
        if self.exit_at is None and self.inst is not None and self.inst.proc.poll() is not None:
            self.exit_at, self.code = time.monotonic(), self.inst.proc.returncode

    async def lag_monitor(self):
        """The event loop's lateness after SIGTERM (a late loop sees every Close late)."""
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            if self.t_term is not None:
                self.max_lag = max(self.max_lag, time.monotonic() - t - 0.01)

    async def wait_clients(self, finished, until):
        """Waits until `finished()` or `until` (monotonic), watching the server's exit."""
        while True:
            self.watch_exit()
            if finished() or time.monotonic() >= until:
                return
            await asyncio.sleep(0.02)

    def reap(self):
        """Waits for the server's exit (bounded) once the clients are done."""
        runtime = self.result["runtime"]
        bound_s = h.ends_bound(self.args.delay, self.args.grace)
        if self.t_term is None:
            return
        self.watch_exit()
        if self.exit_at is None:
            left = max(0.0, self.t_term + bound_s + 10 - time.monotonic())
            got = h.reap(self.inst.proc, left)
            if got is None:
                self.failures.append(f"{runtime} still running {bound_s + 10:g}s after SIGTERM: killed")
            else:
                self.exit_at, self.code = time.monotonic(), got
        else:
            h.reap(self.inst.proc, 5)
        if self.exit_at is not None:
            self.note(f"{runtime} exited {self.code}, +{self.exit_at - self.t_term:.3f}s after SIGTERM")

    def finish(self):
        if self.inst is not None and self.inst.proc is not None:
            h.kill(self.inst.proc)
        r = self.result
        r["duration_s"] = round(time.monotonic() - self.t0, 1)
        r["client_loop_lag_max_s"] = round(self.max_lag, 4)
        if not self.args.keep and not r["failures"] and not r["setup_error"]:
            shutil.rmtree(self.workdir, ignore_errors=True)
            r["workdir"] = None
        return r

    def check_server(self, n_long_running=None, **fields):
        """The server's drain line (informative), exit, panics and termination summary: with
        `n_long_running`, streams_ended=<it> streams_remaining=0 and `fields`
        (check_streams_summary); without, streams_remaining=0 and `fields` alone."""
        r, failures = self.result, self.failures
        stderr_path = self.inst.stderr_path if self.inst else None
        r["drain"] = h.drain_line(stderr_path) if stderr_path else None
        r["exit_code"] = self.code
        r["exit_s"] = h.check_server_exit(
            self.code, self.exit_at, self.t_term, h.ends_bound(self.args.delay, self.args.grace), failures
        )
        if stderr_path:
            panics = panic_lines(stderr_path)
            if panics:
                failures.append(f"the server logged {len(panics)} panics (first: {panics[0][:200]})")
        if n_long_running is not None:
            r["summary"] = h.check_streams_summary(stderr_path, n_long_running, failures, **fields)
        else:
            summary = h.termination_summary(stderr_path) if stderr_path else None
            r["summary"] = summary
            if summary is None:
                failures.append("the server logged no termination summary")
            else:
                for field, value in {"streams_remaining": "0", **fields}.items():
                    if summary.get(field) != value:
                        failures.append(f"summary {field}={summary.get(field)}, want {value}")
        if failures and stderr_path:
            r["server_log"] = h.server_log_lines(stderr_path)


def panic_lines(stderr_path):
    with open(stderr_path, "r", errors="replace") as f:
        return [line.rstrip("\n") for line in f if "panicked" in line]


async def cleanup(clients):
    """Ends whatever the run left open: the clients' tasks and connections."""
    for c in clients:
        ws = getattr(c, "ws", None)
        if ws is not None and ws.transport is not None:
            if not c.done:
                c.gave_up = True
            ws.transport.abort()
        p = getattr(c, "p", None)
        if p is not None:
            if p.ended_at is None:
                c.gave_up = True
            p.abort()
        if c.task is not None and not c.task.done():
            c.task.cancel()
    tasks = [c.task for c in clients if c.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=5)


def normal_checks(c, t_term, problem, close_to_end):
    """The checks of one client of the library after SIGTERM, each failure through
    `problem(kind, example)`; returns (its record, ok)."""
    rel = lambda t: None if t is None else round(t - t_term, 4)  # noqa: E731
    before = sum(1 for t in c.echoes if t < t_term)
    after = sum(1 for t in c.echoes if t >= t_term)
    ok = True

    def fail(kind, example):
        nonlocal ok
        ok = False
        problem(kind, example)

    if c.error:
        fail(f"error: {c.error.split(':')[0]}", c.error)
    if c.mismatch:
        fail("an echo that is not the message sent", c.mismatch)
    if c.opened_at is not None and before == 0:
        fail("no echo before SIGTERM", f"{len(c.echoes)} echoes")
    if c.opened_at is not None:
        if c.gave_up or not c.done:
            fail("still open when the proof gave up", f"{after} echoes after SIGTERM")
        elif c.rcvd is None:
            fail("no Close frame from the server (1006)", f"sent {c.sent_close}, ended +{rel(c.lost_at)}s")
        elif c.rcvd != (GOING_AWAY, GOING_AWAY_REASON):
            fail(f"Close {c.rcvd[0]} {c.rcvd[1]!r}", f"+{rel(c.close_frame_at)}s after SIGTERM")
        if c.rcvd is not None and not (c.sent_close is not None and c.rcvd_then_sent):
            fail("the closing handshake did not complete", f"received {c.rcvd}, sent {c.sent_close}")
        if c.close_frame_at is not None and c.lost_at is not None and c.lost_at - c.close_frame_at > close_to_end:
            fail(f"the connection ended more than {close_to_end:g}s after the Close",
                 f"{c.lost_at - c.close_frame_at:.3f}s")
    return {
        "index": c.index, "ok": ok, "error": c.error, "sent": c.sent, "echoes_before": before, "echoes_after": after,
        "last_echo_s": rel(c.echoes[-1]) if c.echoes else None, "close_s": rel(c.close_frame_at),
        "end_s": rel(c.lost_at), "close": list(c.rcvd) if c.rcvd else None,
        "client_close": list(c.sent_close) if c.sent_close else None, "rcvd_then_sent": c.rcvd_then_sent,
        "mismatch": c.mismatch,
    }, ok


class Problems:
    """Failures of many sockets, grouped by kind, with the first example of each."""

    def __init__(self):
        self.idx, self.examples = {}, {}

    def adder(self, what, index):
        def add(kind, example):
            self.idx.setdefault(kind, []).append(index)
            self.examples.setdefault(kind, f"{what} {index}: {example}")
        return add

    def report(self, n, what, failures):
        for kind, idx in self.idx.items():
            failures.append(f"{len(idx)} of {n} {what}: {kind} (first {self.examples[kind]})")
        return {k: len(v) for k, v in self.idx.items()}


# --- the drain scenario ------------------------------------------------------------------------

def run_drain(binary, runtime, mode, args):
    run = Run(binary, runtime, mode, args, "drain")
    normals = [NormalClient(i) for i in range(args.streams)]
    silents = [SilentClient(i) for i in range(args.silent)]
    run.result.update(sockets=args.streams, silent=args.silent)
    try:
        asyncio.run(drive_drain(run, normals, silents))
        run.reap()
    except h.SetupError as e:
        run.result["setup_error"] = str(e)
    except Exception as e:  # noqa: BLE001 (reported as a failed run, with the logs kept)
        run.failures.append(f"{type(e).__name__}: {e}")
    finally:
        if run.inst is not None and run.inst.proc is not None:
            h.kill(run.inst.proc)
    if run.t_term is not None:
        analyse_drain(run, normals, silents)
    return run.finish()


async def drive_drain(run, normals, silents):
    args = run.args
    monitor = asyncio.create_task(run.lag_monitor())
    try:
        run.start()
        sem = asyncio.Semaphore(CONNECT_CONCURRENCY)
        connection_class = timed_connection_class()
        port = run.inst.port
        for c in normals:
            c.task = asyncio.create_task(normal_client(c, port, sem, args.echo_interval, connection_class))
        for c in silents:
            c.task = asyncio.create_task(silent_client(c, port, sem))
        ready = lambda: (  # noqa: E731
            sum(1 for c in normals if c.echoes) + sum(1 for c in silents if c.ready_at is not None)
        )
        settled = lambda: (  # noqa: E731
            all(c.echoes or c.done for c in normals) and all(c.ready_at is not None or c.error for c in silents)
        )
        await run.wait_clients(settled, time.monotonic() + FIRST_ECHO_TIMEOUT_S)
        n = len(normals) + len(silents)
        got = ready()
        run.note(f"{got} of {n} sockets open and echoed ({len(normals)} of the library, {len(silents)} silent)")
        if got == 0:
            raise h.SetupError("no socket opened: " + next((c.error for c in normals + silents if c.error), "?"))
        if got < n:
            run.failures.append(
                f"only {got} of {n} sockets opened and echoed within {FIRST_ECHO_TIMEOUT_S}s; SIGTERM sent anyway"
            )
        run.sigterm()
        finished = lambda: all(c.done for c in normals) and all(c.finished for c in silents)  # noqa: E731
        bound_s = h.ends_bound(args.delay, args.grace)
        await run.wait_clients(finished, run.t_term + bound_s + 5)
        run.note(
            f"{sum(1 for c in normals if c.done)} of {len(normals)} clients of the library and "
            f"{sum(1 for c in silents if c.finished)} of {len(silents)} silent clients ended"
        )
    finally:
        monitor.cancel()
        await cleanup(normals + silents)


def analyse_drain(run, normals, silents):
    """The figures of one drain run and its failed assertions."""
    r, failures, args, t_term = run.result, run.failures, run.args, run.t_term
    delay_s, grace_s = args.delay, args.grace
    n = len(normals) + len(silents)
    rel = lambda t: None if t is None else round(t - t_term, 4)  # noqa: E731

    problems = Problems()
    records, gaps = [], []
    for c in normals:
        add = problems.adder("socket", c.index)
        rec, ok = normal_checks(c, t_term, add, close_to_end_s(run.runtime))
        if c.opened_at is not None and c.done:
            if rec["echoes_after"] < 1:
                add("no echo after SIGTERM", f"{rec['echoes_before']} echoes before it")
                ok = False
            if c.close_frame_at is not None and c.echoes:
                gap = c.close_frame_at - c.echoes[-1]
                gaps.append(gap)
                if gap > args.echo_interval + ECHO_GAP_SLACK_S:
                    add(f"the echoes stopped more than {args.echo_interval + ECHO_GAP_SLACK_S:g}s before the Close",
                        f"last echo +{rec['last_echo_s']}s, Close +{rec['close_s']}s after SIGTERM")
                    ok = False
        rec["ok"] = ok
        records.append(rec)
    r["ok"] = sum(1 for x in records if x["ok"])
    r["problems"] = problems.report(len(normals), "clients of the library", failures)
    after = [x["echoes_after"] for x in records if x["error"] is None]
    r["echoes_after_min"] = min(after) if after else None
    r["echoes_after_avg"] = round(sum(after) / len(after), 2) if after else None
    r["echo_gap_max_s"] = round(max(gaps), 4) if gaps else None
    ends_after_close = [
        x["end_s"] - x["close_s"] for x in records if x["end_s"] is not None and x["close_s"] is not None
    ]
    r["close_to_end_max_s"] = round(max(ends_after_close), 4) if ends_after_close else None

    # The silent clients: Close 1001, then the connection held until just before the grace
    # period's end, and cut.
    sp = Problems()
    cut_latest = delay_s + grace_s + SILENT_CUT_SLACK_S
    cut_earliest = delay_s + grace_s - SILENT_HELD_S
    silent_records = []
    for c in silents:
        add = sp.adder("silent client", c.index)
        ok = True

        def fail(kind, example):
            nonlocal ok
            ok = False
            add(kind, example)

        close = c.p.close_frame(c.after) if c.p is not None and c.ready_at is not None else None
        code, reason = parse_close(close.payload) if close else (None, None)
        end_at = c.p.ended_at if c.p is not None and not c.gave_up else None
        others = [f.describe() for f in c.p.frames[c.after:] if f.opcode != OP_CLOSE] if c.p is not None else []
        if c.error:
            fail(f"error: {c.error.split(':')[0]}", c.error)
        elif close is None:
            fail("no Close frame", f"connection {c.p.end_how or 'still open'} +{rel(end_at)}s after SIGTERM")
        elif (code, reason) != (GOING_AWAY, GOING_AWAY_REASON):
            fail(f"Close {code} {reason!r}", f"+{rel(close.at)}s after SIGTERM")
        if c.ready_at is not None:
            if end_at is None:
                fail("connection still open when the proof gave up", f"Close +{rel(close.at) if close else None}s")
            elif close is not None and end_at < close.at:
                fail("connection ended before the Close", f"end +{rel(end_at)}s, Close +{rel(close.at)}s")
            elif end_at - t_term > cut_latest:
                fail(f"connection ended later than delay + grace + {SILENT_CUT_SLACK_S:g}s = {cut_latest:g}s",
                     f"+{rel(end_at)}s after SIGTERM ({c.p.end_how})")
            elif end_at - t_term < cut_earliest:
                fail(f"connection cut before delay + grace - {SILENT_HELD_S:g}s = {cut_earliest:g}s "
                     "(the server did not wait for the answer)", f"+{rel(end_at)}s after SIGTERM ({c.p.end_how})")
        silent_records.append({
            "index": c.index, "ok": ok, "error": c.error, "close_s": rel(close.at) if close else None,
            "close": [code, reason] if close else None, "end_s": rel(end_at),
            "end_how": c.p.end_how if end_at is not None else None, "other_frames": others[:5],
        })
    r["silent_ok"] = sum(1 for x in silent_records if x["ok"])
    r["silent_problems"] = sp.report(len(silents), "silent clients", failures)
    cuts = sorted(x["end_s"] for x in silent_records if x["end_s"] is not None and x["close_s"] is not None)
    r["silent_cut_s"] = {"first": cuts[0], "last": cuts[-1]} if cuts else None
    r["silent_cut_want_s"] = [round(cut_earliest, 3), round(cut_latest, 3)]
    r["silent_end_how"] = dict(collections.Counter(x["end_how"] for x in silent_records if x["end_how"]))

    # Every Close: after the delay, within delay + grace, paced, in no burst.
    closes = sorted(
        [x["close_s"] for x in records if x["close_s"] is not None]
        + [x["close_s"] for x in silent_records if x["close_s"] is not None]
    )
    interval = h.pacing_interval(n, grace_s)
    r.update(h.check_ends(closes, n, delay_s, grace_s, interval, failures))
    r["max_ends_per_window"], r["max_ends_per_window_want"] = h.check_bursts(closes, n, interval, failures)
    late = [t for t in closes if t > delay_s + grace_s]
    if late:
        failures.append(
            f"{len(late)} Closes came later than delay + grace = {delay_s + grace_s:g}s after SIGTERM "
            f"(last +{closes[-1]:.3f}s)"
        )
    span = (n - 1) * interval
    r["min_spread_s"] = MIN_SPREAD_S if span >= MIN_SPREAD_SPAN_S else None
    if closes and span >= MIN_SPREAD_SPAN_S and r["spread_s"] < MIN_SPREAD_S:
        failures.append(f"the Closes spread over {r['spread_s']:.3f}s, want at least {MIN_SPREAD_S:g}s")

    run.check_server(
        n, websocket_closes=str(n), websocket_unanswered=str(len(silents)), code="0"
    )
    # The silent clients are cut before the grace period ends, so the server's own account of
    # its exit is within it.
    took = h.seconds((r.get("summary") or {}).get("signal_to_exit"))
    bound = delay_s + grace_s
    r["signal_to_exit_s"] = took
    if took is not None and took > bound:
        failures.append(f"the summary's signal_to_exit={took:.3f}s, later than delay + grace = {bound:g}s")
    r["socket_records"] = records
    r["silent_records"] = silent_records


# --- the bad-input scenario ---------------------------------------------------------------------

def _bad_kinds():
    """(name, what it is, the bytes sent, whether they hold the client's Close)."""
    return [
        ("reserved bits", "a text frame with RSV1, RSV2 and RSV3 set",
         lambda: encode_frame(OP_TEXT, b"reserved bits", rsv=7), False),
        ("opcode 0x3", "a frame with the reserved opcode 0x3", lambda: encode_frame(0x3, b"opcode 3"), False),
        ("garbage", "bytes that are no frame", lambda: b"this is not a WebSocket frame\r\n" * 4, False),
        ("unmasked", "an unmasked text frame", lambda: encode_frame(OP_TEXT, b"unmasked", mask=False), False),
        ("close 1005", "a Close with status 1005", lambda: encode_frame(OP_CLOSE, close_payload(1005)), True),
        ("close 999", "a Close with status 999", lambda: encode_frame(OP_CLOSE, close_payload(999)), True),
        ("data after close", "a Close 1000, then a text frame",
         lambda: encode_frame(OP_CLOSE, close_payload(1000, b"bye")) + encode_frame(OP_TEXT, b"after close"), True),
        ("bad UTF-8", "a text frame that is not UTF-8",
         lambda: encode_frame(OP_TEXT, b"\xff\xfe\xfd not utf-8"), False),
        ("ping of 126 bytes", "a Ping longer than 125 bytes", lambda: encode_frame(OP_PING, b"p" * 126), False),
        ("fragmented ping", "a Ping without FIN", lambda: encode_frame(OP_PING, b"ping", fin=False), False),
    ]


class BadClient:
    """One raw socket that misbehaves once, and what it got."""

    def __init__(self, index, kind, data, sends_close):
        self.index, self.kind, self.data, self.sends_close = index, kind, data, sends_close
        self.p = None
        self.task = None
        self.error = None
        self.bad_at = None
        self.after = 0
        self.close = None  # the server's Close frame
        self.answered = False
        self.ended_at = None  # the connection's end, when it came within the watch
        self.end_how = None
        self.done = False
        self.gave_up = False


async def bad_client(c, port, sem, go):
    """Opens and echoes, waits for `go`, misbehaves, then watches what comes for BAD_ANSWER_S
    (answering an error Close as a client would)."""
    try:
        async with sem:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            c.p = await open_raw(port, deadline)
            await raw_echo(c.p, f"bad {c.index}", deadline)
    except ClientError as e:
        c.error = str(e)
        c.done = True
        return
    await go.wait()
    p = c.p
    c.after = len(p.frames)
    c.bad_at = time.monotonic()
    p.send(c.data)
    until = c.bad_at + BAD_ANSWER_S
    await p.wait(lambda: p.ended_at is not None or p.close_frame(c.after) is not None, until)
    c.close = p.close_frame(c.after)
    if c.close is not None and p.ended_at is None and not c.sends_close:
        code, _ = parse_close(c.close.payload)
        p.send(encode_frame(OP_CLOSE, close_payload(code) if code in ERROR_CLOSES else close_payload(1000)))
        c.answered = True
    await p.wait(lambda: p.ended_at is not None, until)
    c.ended_at, c.end_how = p.ended_at, p.end_how
    # A client gives up on a connection the server keeps open.
    p.abort()
    c.done = True


def run_bad(binary, runtime, mode, args):
    run = Run(binary, runtime, mode, args, "bad-input")
    kinds = _bad_kinds()
    bads = []
    for name, _, make, sends_close in kinds:
        for _ in range(BAD_REPEAT):
            bads.append(BadClient(len(bads), name, make(), sends_close))
    normals = [NormalClient(i) for i in range(args.bad_normal)]
    run.result.update(sockets=len(normals), misbehaving=len(bads))
    try:
        asyncio.run(drive_bad(run, normals, bads))
        run.reap()
    except h.SetupError as e:
        run.result["setup_error"] = str(e)
    except Exception as e:  # noqa: BLE001
        run.failures.append(f"{type(e).__name__}: {e}")
    finally:
        if run.inst is not None and run.inst.proc is not None:
            h.kill(run.inst.proc)
    if run.t_term is not None or any(c.bad_at for c in bads):
        analyse_bad(run, normals, bads)
    return run.finish()


async def drive_bad(run, normals, bads):
    args = run.args
    monitor = asyncio.create_task(run.lag_monitor())
    try:
        run.start()
        sem = asyncio.Semaphore(CONNECT_CONCURRENCY)
        connection_class = timed_connection_class()
        port = run.inst.port
        go = asyncio.Event()
        for c in normals:
            c.task = asyncio.create_task(normal_client(c, port, sem, args.echo_interval, connection_class))
        for c in bads:
            c.task = asyncio.create_task(bad_client(c, port, sem, go))
        settled = lambda: (  # noqa: E731
            all(c.echoes or c.done for c in normals) and all(c.p is not None and c.p.frames or c.done for c in bads)
        )
        await run.wait_clients(settled, time.monotonic() + FIRST_ECHO_TIMEOUT_S)
        opened = sum(1 for c in bads if c.p is not None and c.p.frames)
        echoing = sum(1 for c in normals if c.echoes)
        run.note(f"{echoing} of {len(normals)} clients of the library and {opened} of {len(bads)} raw sockets echoed")
        if opened < len(bads) or echoing < len(normals):
            raise h.SetupError(
                "not every socket opened and echoed: "
                + next((c.error for c in normals + bads if c.error), "no echo in time")
            )
        go.set()
        t_bad = time.monotonic()
        run.result["t_bad"] = t_bad
        await run.wait_clients(lambda: all(c.done for c in bads), t_bad + BAD_ANSWER_S + 1)
        ended = sum(1 for c in bads if c.ended_at)
        run.note(f"misbehaved on {len(bads)} raw sockets; the server ended {ended} of them")
        # The server is still up, and every client of the library still echoes.
        await asyncio.sleep(max(0.5, 3 * args.echo_interval))
        run.watch_exit()
        run.result["alive_after_bad_input"] = run.alive()
        if not run.alive():
            run.failures.append(
                f"the server exited {run.inst.proc.returncode} after the bad input:\n{run.inst.stderr_tail()}"
            )
            return
        t_check = time.monotonic()
        run.result["t_check"] = t_check
        run.sigterm()
        finished = lambda: all(c.done for c in normals)  # noqa: E731
        await run.wait_clients(finished, run.t_term + h.ends_bound(args.delay, args.grace) + 5)
        run.note(f"{sum(1 for c in normals if c.done)} of {len(normals)} clients of the library ended")
    finally:
        monitor.cancel()
        await cleanup(normals + bads)


def analyse_bad(run, normals, bads):
    r, failures = run.result, run.failures
    t_bad = r.get("t_bad")
    bad_records = []
    for c in bads:
        rec = {"index": c.index, "kind": c.kind, "error": c.error, "close": None, "close_ms": None,
               "end": None, "end_ms": None, "answered": c.answered, "ok": False}
        if c.bad_at is not None:
            p = c.p
            if c.close is not None:
                code, reason = parse_close(c.close.payload)
                rec["close"] = [code, reason]
                rec["close_ms"] = round((c.close.at - c.bad_at) * 1000, 1)
            if c.ended_at is not None:
                rec["end"] = c.end_how
                rec["end_ms"] = round((c.ended_at - c.bad_at) * 1000, 1)
            wanted = EXACT_CLOSES.get(c.kind, ERROR_CLOSES)
            rec["wanted"] = list(wanted)
            error_close = (
                c.close is not None and rec["close"][0] in wanted and c.close.at - c.bad_at <= BAD_ANSWER_S
            )
            if c.kind in EXACT_CLOSES:
                # The connection's end alone does not do: the status is asserted.
                rec["ok"] = error_close
                rec["other_frames"] = [f.describe() for f in p.frames[c.after:] if f.opcode != OP_CLOSE][:5]
                bad_records.append(rec)
                continue
            ended = c.ended_at is not None and c.ended_at - c.bad_at <= BAD_ANSWER_S
            rec["ok"] = error_close or ended
            rec["other_frames"] = [f.describe() for f in p.frames[c.after:] if f.opcode != OP_CLOSE][:5]
        bad_records.append(rec)
    wrong = [x for x in bad_records if not x["ok"]]
    for x in wrong:
        failures.append(
            f"misbehaviour {x['kind']!r} (raw socket {x['index']}): no Close "
            f"{'/'.join(map(str, x.get('wanted', ERROR_CLOSES)))}"
            f"{'' if x['kind'] in EXACT_CLOSES else ' and no end of the connection'} within {BAD_ANSWER_S:g}s "
            f"(got {describe_bad(x)})"
        )
    r["bad_ok"] = len(bad_records) - len(wrong)
    r["bad_records"] = bad_records

    if run.t_term is None:
        return
    problems = Problems()
    records = []
    # The last misbehaving socket's end (or the end of its watch): echoes after it show the
    # server still serving.
    last_bad = max((c.ended_at or c.bad_at + BAD_ANSWER_S for c in bads if c.bad_at is not None), default=t_bad)
    for c in normals:
        add = problems.adder("socket", c.index)
        rec, ok = normal_checks(c, run.t_term, add, close_to_end_s(run.runtime))
        rec["echoes_after_bad_input"] = sum(1 for t in c.echoes if last_bad <= t < run.t_term)
        if c.error is None and rec["echoes_after_bad_input"] == 0:
            add("no echo between the bad input and SIGTERM", f"{len(c.echoes)} echoes in all")
            ok = False
        rec["ok"] = ok
        records.append(rec)
    r["ok"] = sum(1 for x in records if x["ok"])
    r["problems"] = problems.report(len(normals), "clients of the library", failures)
    r["socket_records"] = records
    # The summary's streams_ended counts the drain's ends, which the misbehaving sockets
    # (ended before SIGTERM) may or may not be part of: it is not asserted here.
    run.check_server(websocket_closes=str(len(normals)), websocket_unanswered="0", code="0")
    d = r.get("drain")
    if d is None:
        failures.append("the server logged no `draining in-flight requests` line")
    elif d["long_running"] != len(normals):
        failures.append(
            f"the drain counted long_running={d['long_running']}, want {len(normals)} (the clients of the library "
            f"alone: the {len(bads)} misbehaving sockets ended before SIGTERM)"
        )


def describe_bad(x, times=True):
    """What a misbehaving socket got: the server's Close, the connection's end, other frames."""
    if x.get("error"):
        return f"setup error: {x['error']}"
    at = lambda ms: f" +{ms:g}ms" if times and ms is not None else ""  # noqa: E731
    got = []
    if x.get("close"):
        got.append(f"Close {x['close'][0]} {x['close'][1]!r}{at(x['close_ms'])}")
    if x.get("other_frames"):
        got.append(", ".join(x["other_frames"]))
    got.append(f"connection {x['end']}{at(x['end_ms'])}" if x.get("end") else "connection still open")
    return ", then ".join(got)


# --- report ----------------------------------------------------------------------------------------

DRAIN_HEAD = [
    "runtime", "mode", "clients OK", "silent OK", "echoes after SIGTERM min/avg", "first Close", "last Close",
    "spread (want >=)", "max Closes/100ms (want <=)", "silent cut first/last", "exit", "exit after SIGTERM",
    "websocket_closes", "websocket_unanswered", "streams_ended", "streams_remaining",
]


def drain_row(r):
    name = [r["runtime"], f"{r['mode']} ({r['mode_name']})"]
    if "ok" not in r:
        return name + ["error"] + ["-"] * (len(DRAIN_HEAD) - 3)
    e = r["ends_s"]
    s = r.get("summary") or {}
    cut = r.get("silent_cut_s")
    want = r["spread_want_s"] if r.get("min_spread_s") is None else max(r["spread_want_s"], r["min_spread_s"])
    return name + [
        f"{r['ok']}/{r['sockets']}", f"{r['silent_ok']}/{r['silent']}",
        f"{r['echoes_after_min']}/{r['echoes_after_avg']}",
        h.fmt_s(e["first"]), h.fmt_s(e["last"]),
        f"{h.fmt_s(r['spread_s'])} ({want:.3f}s)",
        f"{r['max_ends_per_window']} ({r['max_ends_per_window_want']:g})",
        f"{h.fmt_s(cut['first'])}/{h.fmt_s(cut['last'])}" if cut else "-",
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
        s.get("websocket_closes", "-"), s.get("websocket_unanswered", "-"),
        s.get("streams_ended", "-"), s.get("streams_remaining", "-"),
    ]


BAD_HEAD = [
    "runtime", "mode", "misbehaving OK", "up after", "clients OK", "exit", "exit after SIGTERM", "long_running",
    "websocket_closes", "websocket_unanswered", "streams_ended", "streams_remaining",
]


def bad_row(r):
    name = [r["runtime"], f"{r['mode']} ({r['mode_name']})"]
    if "bad_ok" not in r:
        return name + ["error"] + ["-"] * (len(BAD_HEAD) - 3)
    s = r.get("summary") or {}
    d = r.get("drain") or {}
    return name + [
        f"{r['bad_ok']}/{r['misbehaving']}", str(r.get("alive_after_bad_input", "-")),
        f"{r['ok']}/{r['sockets']}" if "ok" in r else "-",
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")), d.get("long_running", "-"),
        s.get("websocket_closes", "-"), s.get("websocket_unanswered", "-"),
        s.get("streams_ended", "-"), s.get("streams_remaining", "-"),
    ]


def bad_table(r):
    """What each misbehaviour got (its sockets' answers, told apart when they differ)."""
    what = {name: text for name, text, _, _ in _bad_kinds()}
    kinds = {}
    for x in r.get("bad_records", []):
        kinds.setdefault(x["kind"], []).append(x)
    rows = []
    for kind, xs in kinds.items():
        got = " | ".join(sorted({describe_bad(x, times=False) for x in xs}))
        latest = lambda key: max((x[key] for x in xs if x[key] is not None), default=None)  # noqa: E731
        close_ms, end_ms = latest("close_ms"), latest("end_ms")
        ok = sum(1 for x in xs if x["ok"])
        rows.append([
            kind, what.get(kind, ""), got, "-" if close_ms is None else f"{close_ms:g}ms",
            "-" if end_ms is None else f"{end_ms:g}ms", f"{ok}/{len(xs)}",
        ])
    return h.table(["misbehaviour", "sent", "got", "Close within", "end within", "OK"], rows)


def log_drain_figures(r):
    h.log(
        f"    echoes after SIGTERM per client: min {r['echoes_after_min']}, avg {r['echoes_after_avg']}; "
        f"last echo at most {h.fmt_s(r['echo_gap_max_s'])} before the Close; connection ended at most "
        f"{h.fmt_s(r['close_to_end_max_s'])} after the Close"
    )
    cut = r.get("silent_cut_s")
    if cut:
        h.log(
            f"    silent clients cut +{cut['first']:.3f}s to +{cut['last']:.3f}s after SIGTERM (want within "
            f"{r['silent_cut_want_s'][0]:g}s..{r['silent_cut_want_s'][1]:g}s): {r['silent_end_how']}"
        )
    h.log(f"    client's event loop at most {r['client_loop_lag_max_s'] * 1000:.0f}ms late after SIGTERM")


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="tests/proofs websockets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runtimes", default=",".join(h.RUNTIMES), help="comma-separated example names")
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
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    if not runtimes:
        p.error("--runtimes: at least one runtime")
    modes = h.drain_modes(p, args)
    if args.silent < 0 or args.bad_normal < 1:
        p.error("--silent must be 0 or more, --bad-normal at least 1")
    if args.echo_interval <= 0:
        p.error("--echo-interval must be positive")

    try:
        import websockets  # noqa: F401
        from websockets.asyncio.client import connect
    except ImportError as e:
        h.log(f"error: the websockets library (13 or later) is needed: pip install websockets ({e})")
        return 2
    if "proxy" in inspect.signature(connect).parameters:
        NO_PROXY["proxy"] = None
    try:
        h.raise_fd_limit(max(args.streams + args.silent, args.bad_normal + BAD_REPEAT * len(_bad_kinds())), "sockets")
    except h.SetupError as e:
        h.log(f"error: {e}")
        return 2
    if not h.ready_examples(runtimes, args.no_build):
        return 2

    n = args.streams + args.silent
    interval = h.pacing_interval(n, args.grace)
    bound = h.ends_bound(args.delay, args.grace)
    h.log(
        f"--shutdown-delay {args.delay:g}s, --shutdown-watch-termination-grace-period {args.grace:g}s; "
        f"{args.streams} clients of websockets {websockets.__version__} echoing every "
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
            binary = os.path.join(h.examples_dir(), runtime)
            for mode in modes:
                h.log(f"\n==> drain: {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
                r = run_drain(binary, runtime, mode, args)
                h.log_result(r, log_drain_figures)
                h.log("\n" + "\n".join("    " + line for line in h.table(DRAIN_HEAD, [drain_row(r)]).split("\n")))
                results.append(r)
    if not args.no_bad_input:
        mode = modes[0]
        for runtime in runtimes:
            binary = os.path.join(h.examples_dir(), runtime)
            h.log(f"\n==> bad input: {runtime}, mode {mode} ({h.MODE_NAMES[mode]})")
            r = run_bad(binary, runtime, mode, args)
            h.log_result(r, lambda r: None)
            h.log("\n" + "\n".join("    " + line for line in bad_table(r).split("\n")))
            h.log("\n" + "\n".join("    " + line for line in h.table(BAD_HEAD, [bad_row(r)]).split("\n")))
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
