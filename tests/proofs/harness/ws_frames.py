"""The WebSocket protocol (RFC 6455) as the proofs' raw clients speak it: the opening
handshake's request and accept key, frames written as a client writes them (masked) and read
as the server sends them, and Close payloads.

Stdlib only."""

import base64
import hashlib
import os

# The GUID of the opening handshake (RFC 6455, section 1.3).
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
# The example servers' goodbye at shutdown (section 7.4.1: 1001 Going Away).
GOING_AWAY = 1001
GOING_AWAY_REASON = "server shutting down"


# --- the opening handshake ---------------------------------------------------------------------

def new_key():
    """A fresh Sec-WebSocket-Key: 16 random bytes, base64."""
    return base64.b64encode(os.urandom(16)).decode()


def accept_key(key):
    """The Sec-WebSocket-Accept the server must answer `key` with."""
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


def upgrade_request(port, key, path="/ws"):
    """The opening handshake's request for `path` on 127.0.0.1:`port`, with `key`."""
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


# --- frames ------------------------------------------------------------------------------------

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


def read_frames(buf, at):
    """Takes every complete frame off the front of `buf` (a bytearray), unmasking a masked
    one; the Frames, each read `at`. What is left is the start of a frame not yet whole."""
    frames = []
    while len(buf) >= 2:
        b0, b1 = buf[0], buf[1]
        n, start = b1 & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, start = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, start = int.from_bytes(buf[2:10], "big"), 10
        masked = bool(b1 & 0x80)
        key = b""
        if masked:
            key, start = bytes(buf[start:start + 4]), start + 4
        if len(buf) < start + n:
            break
        payload = bytes(buf[start:start + n])
        if masked and len(key) == 4:
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        del buf[: start + n]
        frames.append(Frame(at, bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0x0F, masked, payload))
    return frames
