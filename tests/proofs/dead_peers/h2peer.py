"""HTTP/2 by hand for the dead_peers proof: Python's `h2` package (`pip install h2`) over a
raw socket, h2c with prior knowledge or TLS with ALPN h2, every read and write bounded by the
socket's timeout; and the few gRPC frames the proof sends (a health `Check`, a unary `Sleep`)."""

import socket
import ssl

from rolling.grpcio_load import SLEEP_METHOD, decode_sleep_reply, encode_sleep_request

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
# HealthCheckResponse { status = SERVING (1) }.
HEALTH_SERVING = b"\x08\x01"
# A response body past this is counted, not kept.
KEEP_BODY = 1 << 20
GOAWAY_FRAME = 0x7


def h2_modules():
    """The `h2` package's modules (config, connection, events), or SystemExit with how to get
    it: imported when the proof starts, so that `--help` works without it."""
    try:
        import h2.config
        import h2.connection
        import h2.events
    except ImportError as e:
        raise SystemExit(f"error: Python's h2 package is needed ({e}): pip install h2") from e
    return h2


def client_context(tls, alpn):
    """A client context that trusts only `tls`'s CA (a harness.Tls), checks the name, and
    offers the ALPN protocol `alpn` alone."""
    ctx = ssl.create_default_context(cafile=tls.ca)
    ctx.set_alpn_protocols([alpn])
    return ctx


def dial(port, timeout, ctx=None, rcvbuf=None):
    """A connection to 127.0.0.1:`port` (TCP_NODELAY), over TLS with the client context `ctx`;
    with `rcvbuf`, a receive buffer that small (set before the connect, so the kernel does not
    grow it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        return s
    except BaseException:
        s.close()
        raise


def grpc_message(payload):
    """One gRPC length-prefixed message, uncompressed."""
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def grpc_messages(body):
    """The payloads of the length-prefixed messages in `body`."""
    out, i = [], 0
    while i + 5 <= len(body):
        n = int.from_bytes(body[i + 1:i + 5], "big")
        out.append(bytes(body[i + 5:i + 5 + n]))
        i += 5 + n
    return out


class Answer:
    """What came back on one stream."""

    def __init__(self):
        self.status = None
        self.headers = {}
        self.trailers = {}
        self.body = bytearray()
        self.received = 0
        self.ended = False
        self.reset = None

    def grpc_status(self):
        """`grpc-status` from the trailers (or a trailers-only answer's headers), or None."""
        return self.trailers.get("grpc-status", self.headers.get("grpc-status"))


class H2Client:
    """One HTTP/2 connection to 127.0.0.1:`port` (h2c, or TLS with the client context `ctx`,
    which offers ALPN h2): the client preface and SETTINGS at once, requests on new streams,
    and reads that go on until a condition holds."""

    def __init__(self, port, ctx=None, timeout=10.0, rcvbuf=None):
        h2 = h2_modules()
        self._events = h2.events
        self.sock = dial(port, timeout, ctx, rcvbuf)
        if ctx is not None and self.sock.selected_alpn_protocol() != "h2":
            got = self.sock.selected_alpn_protocol()
            self.sock.close()
            raise ConnectionError(f"ALPN negotiated {got!r}, not h2")
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        self.authority = f"127.0.0.1:{port}"
        self.scheme = "http" if ctx is None else "https"
        self.streams = {}
        self.goaway = None
        # The server's bytes not yet fed to `conn` (a frame not complete yet); the preface
        # the server sends first is its SETTINGS frame, so the bytes are frames from the start.
        self._pending = bytearray()
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, headers=(), body=None):
        """Sends a request on a new stream (ended by its headers without `body`); its id."""
        sid = self.conn.get_next_available_stream_id()
        self.streams[sid] = Answer()
        fields = [(":method", method), (":scheme", self.scheme), (":authority", self.authority),
                  (":path", path), *headers]
        self.conn.send_headers(sid, fields, end_stream=body is None)
        if body is not None:
            self.conn.send_data(sid, body, end_stream=True)
        self.flush()
        return sid

    def read_until(self, done):
        """Reads (acknowledging the data read, the server's SETTINGS and PINGs) until `done()`;
        ConnectionError when the server ends the connection first, socket.timeout when a read
        waits longer than the socket's timeout."""
        while not done():
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            for event in self.conn.receive_data(self._without_goaway(data)):
                self._on(event)
            self.flush()

    def _without_goaway(self, data):
        """`data` without its GOAWAY frames, each noted in `goaway` (its error code). The `h2`
        package closes its connection at a GOAWAY and then refuses every frame, where a
        graceful GOAWAY lets the streams below its last stream id finish; so the client
        keeps them from it, and reads on as an HTTP/2 client does."""
        self._pending += data
        out = bytearray()
        while len(self._pending) >= 9:
            size = int.from_bytes(self._pending[:3], "big") + 9
            if len(self._pending) < size:
                break
            frame = self._pending[:size]
            del self._pending[:size]
            if frame[3] == GOAWAY_FRAME:
                self.goaway = int.from_bytes(frame[13:17], "big")
            else:
                out += frame
        return bytes(out)

    def _on(self, ev):
        e = self._events
        a = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, e.ResponseReceived) and a is not None:
            a.headers = dict(ev.headers)
            a.status = a.headers.get(":status")
        elif isinstance(ev, e.TrailersReceived) and a is not None:
            a.trailers = dict(ev.headers)
        elif isinstance(ev, e.DataReceived) and a is not None:
            a.received += len(ev.data)
            if len(a.body) < KEEP_BODY:
                a.body += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, e.StreamEnded) and a is not None:
            a.ended = True
        elif isinstance(ev, e.StreamReset) and a is not None:
            a.ended, a.reset = True, ev.error_code
        if isinstance(ev, e.DataReceived) and a is None:
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)

    def get(self, path):
        """GET `path` read to its end: its Answer."""
        sid = self.request("GET", path)
        self.read_until(lambda: self.streams[sid].ended)
        return self.streams[sid]

    def grpc_call(self, method, payload):
        """A unary gRPC call read to its end: its Answer."""
        headers = [("content-type", "application/grpc"), ("te", "trailers")]
        sid = self.request("POST", method, headers, grpc_message(payload))
        self.read_until(lambda: self.streams[sid].ended)
        return self.streams[sid]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def health_check_ok(answer):
    """Whether a health `Check` answered OK and SERVING."""
    return answer.grpc_status() == "0" and grpc_messages(answer.body) == [HEALTH_SERVING]


def sleep_call(client, duration):
    """`lameduck.example.Demo/Sleep(duration)` on `client`: (its Answer, None when it ended OK
    with the expected reply, else what went wrong)."""
    answer = client.grpc_call(SLEEP_METHOD, encode_sleep_request(duration))
    status = answer.grpc_status()
    if status != "0":
        return answer, f"grpc-status {status} {answer.trailers.get('grpc-message', '')!r}".strip()
    replies = grpc_messages(answer.body)
    if len(replies) != 1 or decode_sleep_reply(replies[0]) != "Welcome gRPC Server":
        return answer, f"unexpected reply {bytes(answer.body[:60])!r}"
    return answer, None
