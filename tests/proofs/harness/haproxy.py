"""HAProxy in front of example-server instances, on 127.0.0.1, `retries 0` and no `option
redispatch`, so nothing masks a failed request:

  HAProxy      `mode http`, health-checked with `option httpchk GET /readyz` (`inter`, `fall`,
               `rise`, `timeout check`), or without health checks with servers taken out and
               put back through the runtime API (Kubernetes-style endpoint removal). A thread
               polls `show stat` every 20 ms and records each server's status transitions.
  TcpBalancer  `mode tcp`, no health checks, fixed server slots enabled and disabled through
               the runtime API (kube-proxy's behaviour); which client connections it has on
               each server, and the bytes it forwarded from each.
"""

import os
import re
import subprocess
import threading
import time

from harness.processes import kill, spawn, tail, wait_until
from harness.servers import haproxy_command, show_stat

# A `show sess all` answer, one block per session.
SESSION_BLOCK = re.compile(r"\n(?=0x[0-9a-f]+: \[)")
# TcpBalancer's session log: client port, backend/server, HAProxy's source port towards the
# server, accept time (Unix seconds and milliseconds), the times to queue, connect and end
# (ms), bytes from and to the client, and the termination state; one line when each session
# ends. HAProxy's times leave out the moments its process was held up for longer than its
# poll's timeout (it takes them for a clock change): on a busy machine they can come out short.
SESSION_LOG_FORMAT = '"session %cp %b/%s %bp %Ts.%ms %Tw/%Tc/%Tt %U/%B %ts"'
SESSION_LINE = re.compile(
    r"^session (\d+) \S+/(\S+) (\d+) (\d+)\.(\d+) (-?\d+)/(-?\d+)/(-?\d+) (\d+)/(\d+) (\S+)$"
)


def config_lines(sock_path, port, maxconn, defaults, backend):
    """An HAProxy configuration: the runtime API on `sock_path`, frontend `fe` on
    127.0.0.1:`port` to backend `be` (`balance roundrobin`), with the lines of `defaults`
    and `backend` (without their indentation)."""
    return [
        "global",
        f"    maxconn {maxconn}",
        f"    stats socket {sock_path} mode 600 level admin",
        "",
        "defaults",
        *("    " + line for line in defaults),
        "",
        "frontend fe",
        f"    bind 127.0.0.1:{port}",
        "    default_backend be",
        "",
        "backend be",
        "    balance roundrobin",
        *("    " + line for line in backend),
    ]


def start_behind(haproxy, instances, up="UP", timeout=15):
    """Starts each of `instances` (harness Instances), then `haproxy` in front of them, and
    waits until it shows each of them `up` (`UP`; `no check` without health checks)."""
    for inst in instances:
        inst.start()
    haproxy.start()
    for inst in instances:
        haproxy.wait_status(inst.name, up, timeout)


def stop_behind(haproxy, instances, procs=()):
    """Kills `procs` (the load's processes; None ones left out), stops `haproxy` and kills
    `instances`, whichever still run."""
    for proc in procs:
        if proc is not None:
            kill(proc)
    haproxy.stop()
    for inst in instances:
        if inst.proc:
            kill(inst.proc)


class _Process:
    """One HAProxy process: its configuration, log and runtime API (stats socket) in
    `workdir`."""

    def __init__(self, workdir, port, lines):
        self.workdir = workdir
        self.port = port
        self.sock_path = os.path.join(workdir, "haproxy.sock")
        self.cfg_path = os.path.join(workdir, "haproxy.cfg")
        self.log_path = os.path.join(workdir, "haproxy.log")
        with open(self.cfg_path, "w") as f:
            f.write("\n".join(lines(self.sock_path)) + "\n")
        self.proc = None

    def _spawn(self):
        """Checks the configuration (`haproxy -c`), then starts HAProxy in the foreground."""
        subprocess.run(["haproxy", "-c", "-q", "-f", self.cfg_path], check=True, timeout=30)
        with open(self.log_path, "wb") as out:
            self.proc = spawn(["haproxy", "-db", "-f", self.cfg_path], out, subprocess.STDOUT)

    def show_stat(self):
        return show_stat(self.sock_path)

    def command(self, cmd):
        """One runtime-API command that answers nothing on success; raises on any answer."""
        answer = haproxy_command(self.sock_path, cmd).strip()
        if answer:
            raise RuntimeError(f"haproxy `{cmd}`: {answer}")

    def stop(self):
        if self.proc:
            kill(self.proc)


class HAProxy(_Process):
    def __init__(self, workdir, frontend_port, servers, inter_ms=250, fall=2, rise=2,
                 check_timeout_ms=500, checks=True, downinter_ms=None):
        """`servers`: (name, port) pairs. With `checks` False the servers have no health check:
        they are UP until `disable` (as endpoints without a readiness probe in the balancer).
        `downinter_ms`: the check interval of a server that is DOWN (HAProxy's `downinter`;
        `inter` when None)."""
        backend = ["http-reuse safe"]
        if checks:
            backend += [
                "option httpchk GET /readyz",
                "http-check expect status 200",
                f"default-server inter {inter_ms}ms fall {fall} rise {rise}"
                + (f" downinter {downinter_ms}ms" if downinter_ms else ""),
            ]
        backend += [f"server {name} 127.0.0.1:{port}" + (" check" if checks else "") for name, port in servers]
        defaults = [
            "mode http",
            "option http-keep-alive",
            "retries 0",
            "timeout connect 2s",
            "timeout client 30s",
            "timeout server 30s",
            f"timeout check {check_timeout_ms}ms",
        ]
        # Small enough for a default open-files limit (HAProxy needs about 2 x maxconn).
        super().__init__(workdir, frontend_port, lambda sock: config_lines(sock, frontend_port, 256, defaults, backend))
        self.transitions = []  # (monotonic time, server, status)
        self._stop = threading.Event()
        self._monitor = None
        self._status = {}

    def start(self):
        self._spawn()
        self._monitor = threading.Thread(target=self._watch, daemon=True)
        self._monitor.start()

    def stop(self):
        self._stop.set()
        if self._monitor:
            self._monitor.join(timeout=5)
        super().stop()

    def disable(self, name):
        """Takes server `name` out (maintenance): no new request or connection goes to it."""
        self.command(f"set server be/{name} state maint")

    def enable(self, name):
        self.command(f"set server be/{name} state ready")

    def _watch(self):
        while not self._stop.is_set():
            try:
                stats = self.show_stat()
            except OSError:
                stats = {}
            now = time.monotonic()
            for name, fields in stats.items():
                status = fields.get("status", "?")
                if self._status.get(name) != status:
                    self._status[name] = status
                    self.transitions.append((now, name, status))
            self._stop.wait(0.02)

    def check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"haproxy exited with {self.proc.returncode}:\n{tail(self.log_path)}")

    def status(self, name):
        return self._status.get(name)

    def wait_status(self, name, want, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status(name) == want:
                return time.monotonic()
            self.check_alive()
            time.sleep(0.02)
        raise RuntimeError(f"HAProxy did not report {name} {want} within {timeout}s (now {self.status(name)})")

    def wait_transition(self, name, want, after, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            at = self.first_transition(name, want, after)
            if at is not None:
                return at
            self.check_alive()
            time.sleep(0.02)
        raise RuntimeError(f"HAProxy did not report {name} {want} within {timeout}s (now {self.status(name)})")

    def first_transition(self, name, status, after):
        for at, n, s in self.transitions:
            if n == name and s == status and at >= after:
                return at
        return None


class TcpBalancer(_Process):
    """HAProxy in `mode tcp` with fixed server slots, changed through its runtime API."""

    def __init__(self, workdir, port, slots, session_log=False):
        """`slots`: (name, port, enabled) triples; a slot not enabled is declared `disabled`.
        With `session_log`, HAProxy logs each session when it ends (`sessions_ended`)."""
        defaults = ["mode tcp", "retries 0", "timeout connect 2s", "timeout client 60s", "timeout server 60s"]
        if session_log:
            defaults += ["log stdout format raw local0", f"log-format {SESSION_LOG_FORMAT}"]
        backend = [f"server {name} 127.0.0.1:{pod_port}" + ("" if enabled else " disabled")
                   for name, pod_port, enabled in slots]
        super().__init__(workdir, port, lambda sock: config_lines(sock, port, 512, defaults, backend))

    def start(self):
        self._spawn()
        if not wait_until(self.show_stat, self.proc, 10):
            raise RuntimeError("haproxy did not answer on its stats socket:\n" + tail(self.log_path))

    def sessions_ended(self):
        """The sessions HAProxy logged so far (with `session_log`): `parse_sessions`."""
        return self.parse_sessions(self.log_path)

    @staticmethod
    def parse_sessions(log_path):
        """The sessions logged in HAProxy's log `log_path` (with `session_log`): one dict each,
        with the client `port`, the `server`, `source_port` (HAProxy's, towards the server),
        `start` and `end` (Unix seconds: the accept and the end of both sides), `tw`, `tc`,
        `tt` (ms), `bytes_in`, `bytes_out` and the termination `state`."""
        out = []
        with open(log_path, "r", errors="replace") as f:
            for line in f:
                m = SESSION_LINE.match(line.strip())
                if not m:
                    continue
                start = int(m.group(4)) + int(m.group(5)) / 1000
                tt = int(m.group(8))
                out.append(dict(
                    port=int(m.group(1)), server=m.group(2), source_port=int(m.group(3)), start=start,
                    end=start + tt / 1000, tw=int(m.group(6)), tc=int(m.group(7)), tt=tt,
                    bytes_in=int(m.group(9)), bytes_out=int(m.group(10)), state=m.group(11),
                ))
        return out

    def sessions(self):
        """`show sess all`, one block of text per session."""
        return SESSION_BLOCK.split(haproxy_command(self.sock_path, "show sess all"))

    def pinned_ports(self, server):
        """The client ports of the sessions HAProxy has on `server` right now."""
        ports = set()
        for block in self.sessions():
            source = re.search(r"^0x[0-9a-f]+: \[.*\bsource=127\.0\.0\.1:(\d+)", block)
            if source and re.search(rf"^  server={re.escape(server)} ", block, re.M):
                ports.add(int(source.group(1)))
        return ports

    def bytes_out(self):
        """Bytes forwarded from each server to clients so far: `show stat`'s `bout` (a session's
        bytes, added when it ends: in `mode tcp` HAProxy forwards without waking the session,
        so `bout` stands still while a long-lived connection lives) plus each live session's
        response-channel total (`show sess all`, counted as data arrives). With the `show stat`
        it was read against: ({server: bytes}, stats)."""
        live = {}
        for block in self.sessions():
            server = re.search(r"^  server=(\S+) ", block, re.M)
            total = re.search(r"^  res=\S+ \(.*\btotal=(\d+)\)", block, re.M)
            if server and total:
                live[server.group(1)] = live.get(server.group(1), 0) + int(total.group(1))
        return {n: int(f["bout"]) + live.get(n, 0) for n, f in self.show_stat().items()}, self.show_stat()
