"""The websockets proof's clients of Python's `websockets` library (its asyncio client,
without keepalive pings): each opens its socket, then echoes a message every interval until
the connection closes, the library answering the server's Close as a browser does; and the
checks of one such client after SIGTERM."""

import asyncio
import collections
import inspect
import time

from harness.ws_frames import GOING_AWAY, GOING_AWAY_REASON

# The bound of one socket's opening handshake.
CONNECT_TIMEOUT_S = 10
# The server ends a connection at most this long after the Close the client answered (the
# client waits for it to: RFC 6455, section 7.1.1, the server closes the TCP connection
# first).
CLOSE_TO_END_S = 0.5
# actix-web ends a connection whose response is over only once the client has closed or its
# client-disconnect timeout (1 s, on its 500 ms clock) has passed: it gets this instead. (It
# cuts a silent client that much sooner, so its exit is still within the grace period.)
ACTIX_CLOSE_TO_END_S = 1.5
# Loopback needs no proxy: the library (15 and later) would take one from the environment.
NO_PROXY = {}


def close_to_end_s(runtime):
    return ACTIX_CLOSE_TO_END_S if runtime == "actix_server" else CLOSE_TO_END_S


def library_version():
    """The websockets library's version, its client told to use no proxy when it would;
    ImportError without the library (or its asyncio client, 13 and later)."""
    import websockets
    from websockets.asyncio.client import connect

    if "proxy" in inspect.signature(connect).parameters:
        NO_PROXY["proxy"] = None
    return websockets.__version__


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

