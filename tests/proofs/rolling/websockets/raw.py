"""The websockets proof's raw clients: a connection spoken to by hand (`RawSocket`, an asyncio
protocol), upgraded to a WebSocket on `/ws` with the handshake checked (`open_raw`), and one
message's echo checked (`raw_echo`). The frames are harness.ws_frames'."""

import asyncio
import time

from harness.ws_frames import OP_CLOSE, OP_TEXT, accept_key, encode_frame, new_key, read_frames, upgrade_request

# The longest response head read.
MAX_HEAD = 16384


class ClientError(Exception):
    """What ends one socket's opening as a failure."""


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
        self.frames += read_frames(self.buf, now)
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
    key = new_key()
    p.send(upgrade_request(port, key))
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


