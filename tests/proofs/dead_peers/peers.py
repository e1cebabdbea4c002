"""The clients of the dead_peers proof: the connections it opens before SIGTERM and leaves
silent (idle HTTP/1.1 keep-alive, HTTP/2 that never reads again, TLS handshakes never
finished, WebSockets that never answer), the responses it stops reading, the requests in
flight at the signal, and the watch that sees, without reading, when the server ended each
connection.

Every socket has a timeout; a connection that cannot be opened is a setup error."""

import http.client
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import harness as h
from dead_peers.h2peer import HEALTH_CHECK, H2Client, client_context, dial, health_check_ok, sleep_call
from harness.ws_frames import accept_key, new_key, upgrade_request

# Bounds of one connection's opening (connect, handshake, its request's answer) and of an
# in-flight request.
OPEN_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 30.0
# Connections opened at once.
OPEN_WORKERS = 8
MAX_HEAD = 16384
# Linux's TCP_ESTABLISHED (tcp_info's first byte): any other state means a FIN or a reset came.
TCP_ESTABLISHED = 1
# How often the watch looks at every connection's state.
WATCH_INTERVAL_S = 0.02
# The unread responses: the body asked for, what the client reads of it before it stops, and
# its receive buffer (small, set before the connect, so that the kernel does not take in
# megabytes the client never reads).
UNREAD_SIZE = 10_000_000
UNREAD_READ = 100_000
UNREAD_RCVBUF = 65536
SLEEP_BODY = b"Welcome HTTP Server"


class Peer:
    """One connection kept open: its kind, its socket (and the object that owns it), and when
    the server ended it (`closed_at`, monotonic). With `server_port`, that is when the
    server's end left ESTABLISHED (a response the client stopped reading: the server's FIN
    waits behind the bytes the client does not read, so the client never sees it); otherwise
    when the client's end did (the server's FIN or reset came)."""

    __slots__ = ("kind", "index", "sock", "owner", "closed_at", "server_port", "client_port")

    def __init__(self, kind, index, sock, owner=None, server_port=None):
        self.kind, self.index, self.sock, self.owner = kind, index, sock, owner
        self.closed_at = None
        self.server_port = server_port
        self.client_port = sock.getsockname()[1] if server_port else None

    def close(self):
        try:
            (self.owner or self.sock).close()
        except OSError:
            pass


def server_established(server_port):
    """The client ports of the established connections of 127.0.0.1:`server_port`, as the
    server's ends show in /proc/net/tcp."""
    local = f"0100007F:{server_port:04X}"
    out = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1] == local and fields[3] == "01":
                out.add(int(fields[2].rsplit(":", 1)[1], 16))
    return out


def tcp_state(sock):
    """The socket's TCP state (Linux tcp_info), or None once it cannot be read."""
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except OSError:
        return None


class Dialer:
    """How this run's clients reach the server: its port and, over TLS (`tls`, a harness.Tls),
    client contexts offering ALPN http/1.1 and h2."""

    def __init__(self, port, tls):
        self.port, self.tls = port, tls
        self.http1 = client_context(tls, "http/1.1") if tls else None
        self.h2 = client_context(tls, "h2") if tls else None

    def h2_client(self, rcvbuf=None):
        return H2Client(self.port, self.h2, OPEN_TIMEOUT_S, rcvbuf)


def open_many(what, n, open_one):
    """`open_one(i)` for i in 0..n on OPEN_WORKERS threads: the results in order; SetupError
    naming `what` when one fails (the ones opened are closed)."""
    if n <= 0:
        return []
    with ThreadPoolExecutor(OPEN_WORKERS) as pool:
        futures = [pool.submit(open_one, i) for i in range(n)]
        done, error = [], None
        for i, f in enumerate(futures):
            try:
                done.append(f.result())
            except Exception as e:  # noqa: BLE001 (the first failure is the setup error)
                error = error or f"{what} #{i}: {type(e).__name__}: {e}"
    if error:
        for p in done:
            p.close()
        raise h.SetupError(error)
    return done


def read_head(sock):
    """The response head (up to the empty line) read from `sock`, and what came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"the server closed the connection after {len(data)} bytes of head")
        data += chunk
        if len(data) > MAX_HEAD:
            raise ConnectionError("a response head longer than 16 KiB")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


# --- the silent connections --------------------------------------------------------------------

def idle_http1(d, i):
    """An HTTP/1.1 keep-alive connection whose `GET /` was answered 200, then left idle."""
    if d.tls:
        conn = http.client.HTTPSConnection("127.0.0.1", d.port, timeout=OPEN_TIMEOUT_S, context=d.http1)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=OPEN_TIMEOUT_S)
    try:
        conn.request("GET", "/")
        res = conn.getresponse()
        body = res.read()
        if res.status != 200 or body != b"ok" or res.will_close:
            raise ConnectionError(f"GET / answered {res.status} {body[:40]!r} (will close: {res.will_close})")
        return Peer("idle_http1", i, conn.sock, conn)
    except BaseException:
        conn.close()
        raise


def silent_h2(d, i, grpc=False):
    """An HTTP/2 connection that had one answer (a health `Check` when `grpc`, else `GET /`),
    read whole, and then never reads or writes again (never acknowledging a PING)."""
    c = d.h2_client()
    try:
        if grpc:
            answer = c.grpc_call(HEALTH_CHECK, b"")
            ok = health_check_ok(answer)
        else:
            answer = c.get("/")
            ok = answer.status == "200" and answer.body == b"ok"
        if not ok:
            raise ConnectionError(f"answered {answer.status} {answer.headers} {bytes(answer.body[:40])!r}")
        return Peer("silent_h2", i, c.sock, c)
    except BaseException:
        c.close()
        raise


def silent_ws(d, i):
    """A WebSocket on `/ws` whose opening handshake completed (101 with the right accept
    key); it then never reads or answers anything."""
    sock = dial(d.port, OPEN_TIMEOUT_S, d.http1)
    try:
        key = new_key()
        sock.sendall(upgrade_request(d.port, key))
        head, _ = read_head(sock)
        if not head.startswith("HTTP/1.1 101") or accept_key(key) not in head:
            raise ConnectionError(f"the upgrade answered {head.splitlines()[0]!r}")
        return Peer("silent_ws", i, sock)
    except BaseException:
        sock.close()
        raise


def client_hello_part(tls):
    """The first half of a real ClientHello to this server (made with an in-memory TLS
    object): what a client that stopped mid-handshake has sent."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context(tls, "h2").wrap_bio(inc, out, server_hostname="127.0.0.1")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    return hello[: len(hello) // 2]


def silent_tls(d, i, hello_part):
    """A TCP connection to the TLS port that never finishes the handshake: every other one
    sends nothing, the others half a ClientHello."""
    sock = dial(d.port, OPEN_TIMEOUT_S)
    try:
        if i % 2:
            sock.sendall(hello_part)
        return Peer("silent_tls", i, sock)
    except BaseException:
        sock.close()
        raise


# --- the responses the client stops reading ---------------------------------------------------

def unread_http1(d, i):
    """`GET /bytes?size=UNREAD_SIZE` over HTTP/1.1: 200 with its Content-Length, UNREAD_READ
    bytes of the body read, then nothing more (the socket stays open)."""
    sock = dial(d.port, OPEN_TIMEOUT_S, d.http1, rcvbuf=UNREAD_RCVBUF)
    try:
        sock.sendall(f"GET /bytes?size={UNREAD_SIZE} HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n\r\n".encode())
        head, body = read_head(sock)
        if not head.startswith("HTTP/1.1 200") or f"content-length: {UNREAD_SIZE}" not in head.lower():
            raise ConnectionError(f"/bytes answered {head!r}")
        got = len(body)
        while got < UNREAD_READ:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"the body ended after {got} bytes")
            got += len(chunk)
        return Peer("unread_http1", i, sock, server_port=d.port)
    except BaseException:
        sock.close()
        raise


def unread_h2(d, i):
    """The same over HTTP/2 (h2c, or TLS ALPN h2): UNREAD_READ bytes read (and acknowledged),
    then nothing more, so the server's flow-control window runs out."""
    c = d.h2_client(rcvbuf=UNREAD_RCVBUF)
    try:
        sid = c.request("GET", f"/bytes?size={UNREAD_SIZE}")
        a = c.streams[sid]
        c.read_until(lambda: a.received >= UNREAD_READ or a.ended)
        if a.status != "200" or a.headers.get("content-length") != str(UNREAD_SIZE) or a.ended:
            raise ConnectionError(f"/bytes answered {a.status} {a.headers} (ended: {a.ended})")
        return Peer("unread_h2", i, c.sock, c, server_port=d.port)
    except BaseException:
        c.close()
        raise


# --- the requests in flight ----------------------------------------------------------------------

class InFlight:
    """One request in flight at the signal, on a thread of its own: `GET /sleep?duration=D`
    over HTTP/1.1 ("http1") or HTTP/2 ("h2"), or the unary gRPC call `Sleep(D)` ("grpc"). The
    HTTP/2 connection is opened at once; the request goes when `go` is set."""

    def __init__(self, d, proto, duration, go):
        self.d, self.proto, self.duration, self.go = d, proto, duration, go
        self.sent_at = self.done_at = self.error = None
        self.ok = False
        self.client = d.h2_client() if proto != "http1" else None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            if not self.go.wait(REQUEST_TIMEOUT_S):
                raise TimeoutError("never told to send")
            self.sent_at = time.monotonic()
            path = f"/sleep?duration={self.duration}"
            if self.proto == "http1":
                status, body = h.http_get(self.d.port, path, timeout=REQUEST_TIMEOUT_S, tls=self.d.tls)
                self.ok = status == 200 and body == SLEEP_BODY
                self.error = None if self.ok else f"{status} {body[:40]!r}"
            elif self.proto == "h2":
                self.client.sock.settimeout(REQUEST_TIMEOUT_S)
                a = self.client.get(path)
                self.ok = a.status == "200" and bytes(a.body) == SLEEP_BODY
                self.error = None if self.ok else f"{a.status} reset={a.reset} {bytes(a.body[:40])!r}"
            else:
                self.client.sock.settimeout(REQUEST_TIMEOUT_S)
                _, self.error = sleep_call(self.client, self.duration)
                self.ok = self.error is None
        except Exception as e:  # noqa: BLE001 (a failed request, reported)
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done_at = time.monotonic()
            if self.client is not None:
                self.client.close()

    def join(self, timeout):
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.error = self.error or "no answer in time"
            if self.client is not None:
                self.client.close()


# --- when the server ended each connection ------------------------------------------------------

class CloseWatch:
    """Looks at every peer's TCP state every WATCH_INTERVAL_S, from `start()` to `stop()`,
    without reading: a peer's `closed_at` is the first look that found it no longer
    established (the server's FIN or reset had come, whether it cut the connection or
    exited)."""

    def __init__(self, peers):
        self.peers = [p for p in peers if p.closed_at is None]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()

    def sweep(self):
        """One look at every peer still established."""
        now = time.monotonic()
        servers = {p.server_port: None for p in self.peers if p.server_port}
        for port in servers:
            servers[port] = server_established(port)
        for p in self.peers:
            if p.server_port:
                if p.client_port not in servers[p.server_port]:
                    p.closed_at = now
            elif tcp_state(p.sock) != TCP_ESTABLISHED:
                p.closed_at = now
        self.peers = [p for p in self.peers if p.closed_at is None]

    def _run(self):
        while self.peers and not self._stop.wait(WATCH_INTERVAL_S):
            self.sweep()

    def stop(self):
        self._stop.set()
        self._thread.join(10)
