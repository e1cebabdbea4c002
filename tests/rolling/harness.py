"""Helpers shared by the rolling-restart proofs (rolling_restart.py, rolling_restart_grpc.py,
rolling_restart_l4.py): child processes tracked by PID and killed on every exit path, the
example-server instance, free loopback ports, and HAProxy's runtime API (stats socket).

Stdlib only. Loopback only.
"""

import http.client
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Children alive right now, by PID: killed on the way out, however the script ends.
_children = {}
_children_lock = threading.Lock()


def log(msg):
    print(msg, flush=True)


def log_run(r, keep_logs):
    """Logs one run's events, notes and problems, and where its logs are kept when
    `keep_logs` (the caller decides: problems, or --keep)."""
    for e in r["events"]:
        log("    " + e)
    for n in r.get("notes", []):
        log("    note: " + n)
    for problem in r["problems"]:
        log("    PROBLEM: " + problem)
    if keep_logs:
        log(f"    logs kept in {r['workdir']}")


def fmt_ms(ms):
    return f"{ms / 1000:g}s" if ms % 1000 == 0 else f"{ms}ms"


def spawn(args, stdout, stderr, env=None, pass_fds=()):
    """Starts `args` with NO_COLOR=1 and `env` (name: value, or None to remove the name) over
    this process's environment, and with the descriptors `pass_fds` left open."""
    environ = dict(os.environ, NO_COLOR="1")
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=environ,
        pass_fds=pass_fds,
    )
    with _children_lock:
        _children[proc.pid] = proc
    return proc


def reap(proc, timeout):
    """Waits up to `timeout` seconds for `proc`; kills it (by PID) if it is still running."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        return None
    finally:
        with _children_lock:
            _children.pop(proc.pid, None)


def kill(proc):
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with _children_lock:
        _children.pop(proc.pid, None)


def kill_all_children():
    with _children_lock:
        procs = list(_children.values())
    for proc in procs:
        kill(proc)


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


def target_dir():
    if os.environ.get("CARGO_TARGET_DIR"):
        return os.path.abspath(os.environ["CARGO_TARGET_DIR"])
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    return json.loads(out)["target_directory"]


class TlsFiles:
    """A throwaway CA and a server certificate it signed, made with the openssl CLI in `workdir`
    (ECDSA P-256, valid one day): SANs IP 127.0.0.1 and DNS localhost, serverAuth.

    `flags` are the example servers' TLS flags; `context()` is a client context that trusts
    only this CA and checks the name."""

    def __init__(self, workdir):
        d = os.path.join(workdir, "tls")
        os.makedirs(d, exist_ok=True)
        self.ca = os.path.join(d, "ca.crt")
        self.cert = os.path.join(d, "server.crt")
        self.key = os.path.join(d, "server.key")
        ca_key = os.path.join(d, "ca.key")
        csr = os.path.join(d, "server.csr")
        ext = os.path.join(d, "server.ext")
        with open(ext, "w") as f:
            f.write(
                "basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth\n"
                "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
            )
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for cmd in (
            ["req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "1",
             "-subj", "/CN=lameduck rolling-test CA",
             "-addext", "basicConstraints = critical, CA:TRUE",
             "-addext", "keyUsage = critical, keyCertSign, cRLSign"],
            ["req", "-new", *ec, "-keyout", self.key, "-out", csr, "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", self.cert, "-days", "1", "-sha256", "-extfile", ext],
        ):
            done = subprocess.run(["openssl", *cmd], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError(f"openssl {cmd[0]} failed:\n{done.stderr}")
        self.flags = ["--tls-cert-file", self.cert, "--tls-private-key-file", self.key]

    def context(self):
        return ssl.create_default_context(cafile=self.ca)


def get_status(port, path, tls=None, timeout=1.0):
    """GET `path` on 127.0.0.1:`port` (over TLS when `tls`, a TlsFiles); the status code."""
    if tls:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=tls.context())
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


class Instance:
    """One example-server process on a fixed port, with its logs in `workdir`; with `tls` (a
    TlsFiles) it serves TLS with that certificate."""

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
                expected = f"listening on {scheme}://127.0.0.1:{self.port}"
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
        try:
            with open(self.stderr_path, "r", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


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


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run_main(main):
    """Runs `main()` as the script's body: SIGTERM ends it like Ctrl-C, and every child still
    running is killed by its PID however it ends. Exits with main's status (130 when
    interrupted)."""
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    finally:
        kill_all_children()
    sys.exit(code)
