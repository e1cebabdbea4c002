"""Servers and where they listen: free loopback ports, listening sockets held by the proof,
one example-server instance on a fixed port, and HAProxy's runtime API (stats socket)."""

import os
import random
import signal
import socket
import time

from harness.processes import reap, spawn, tail

# Ports handed out by free_port in this process: never handed out twice.
_given_ports = set()


def _ephemeral_low():
    """The lowest port of the kernel's ephemeral range (outgoing connections' local ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port on 127.0.0.1 that nothing listens on, for a server started later. It is taken
    below the ephemeral range: a port from `bind(0)` is one the kernel also gives to outgoing
    connections (the load clients' and HAProxy's thousands of them), and one of those can hold
    it by the time the server binds it ("Address already in use")."""
    low = _ephemeral_low()
    start = max(1024, low - 12000)
    for _ in range(200):
        port = random.randrange(start, low)
        if port in _given_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_socket(backlog=1024, port=0):
    """A TCP socket listening on 127.0.0.1:`port` (0: any free port), as systemd would hold it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(backlog)
    return s


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


class Instance:
    """One example-server process on a fixed port (0: the port the server picks, read from its
    `listening on` line), with its logs in `workdir`; with `tls` (a harness.Tls) it serves TLS
    with that certificate."""

    def __init__(self, binary, name, port, flags, workdir, tls=None):
        self.binary, self.name, self.port, self.flags = binary, name, port, flags
        self.tls = tls
        if tls:
            self.flags = [*flags, *tls.flags]
        self.workdir = workdir
        self.generation = 0
        self.proc = None

    def start(self, timeout=30.0):
        self.generation += 1
        base = os.path.join(self.workdir, f"{self.name}.{self.generation}")
        self.stdout_path, self.stderr_path = base + ".stdout", base + ".stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            args = [self.binary, "--listen", f"127.0.0.1:{self.port}", *self.flags]
            self.proc = spawn(args, out, err)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.stdout_path, "r", errors="replace") as f:
                line = f.readline()
            if line.endswith("\n"):
                scheme = "https" if self.tls else "http"
                prefix = f"listening on {scheme}://127.0.0.1:"
                picked = line.strip()[len(prefix):]
                if self.port == 0 and line.startswith(prefix) and picked.isdigit():
                    self.port = int(picked)
                expected = f"{prefix}{self.port}"
                if line.strip() != expected:
                    raise RuntimeError(f"{self.name}: first stdout line {line!r}, want {expected!r}")
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before listening:\n"
                    + self.stderr_tail()
                )
            time.sleep(0.01)
        raise RuntimeError(f"{self.name}: no `listening on` line within {timeout}s")

    def terminate_and_wait(self, timeout):
        os.kill(self.proc.pid, signal.SIGTERM)
        code = reap(self.proc, timeout)
        if code is None:
            raise RuntimeError(
                f"{self.name} still running {timeout}s after SIGTERM (killed):\n" + self.stderr_tail()
            )
        return code

    def stderr_tail(self, n=30):
        return tail(self.stderr_path, n)


def haproxy_command(sock_path, command, timeout=2.0):
    """Sends one command to HAProxy's stats socket (the runtime API); returns its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(command.encode() + b"\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace")


def show_stat(sock_path, backend="be"):
    """`show stat` of `backend`'s servers: {server name: {field: value}} (BACKEND row left out)."""
    rows = haproxy_command(sock_path, "show stat").splitlines()
    if not rows or not rows[0].startswith("# "):
        return {}
    header = rows[0][2:].split(",")
    out = {}
    for row in rows[1:]:
        fields = dict(zip(header, row.split(",")))
        if fields.get("pxname") == backend and fields.get("svname") not in ("BACKEND", None):
            out[fields["svname"]] = fields
    return out
