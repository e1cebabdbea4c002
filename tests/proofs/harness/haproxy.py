"""HAProxy in `mode http` in front of example-server instances: health-checked with
`option httpchk GET /readyz` (`inter`, `fall`, `rise`, `timeout check`), or without health
checks with servers taken out and put back through the runtime API (Kubernetes-style
endpoint removal). `retries 0` and no `option redispatch`, so nothing masks a failed request.
A thread polls `show stat` every 20 ms and records each server's status transitions."""

import os
import subprocess
import threading
import time

from harness.processes import kill, spawn
from harness.servers import haproxy_command, show_stat


class HAProxy:
    def __init__(self, workdir, frontend_port, servers, inter_ms=250, fall=2, rise=2,
                 check_timeout_ms=500, checks=True, downinter_ms=None):
        """`servers`: (name, port) pairs. With `checks` False the servers have no health check:
        they are UP until `disable` (as endpoints without a readiness probe in the balancer).
        `downinter_ms`: the check interval of a server that is DOWN (HAProxy's `downinter`;
        `inter` when None)."""
        self.workdir = workdir
        self.port = frontend_port
        self.sock_path = os.path.join(workdir, "haproxy.sock")
        self.cfg_path = os.path.join(workdir, "haproxy.cfg")
        self.log_path = os.path.join(workdir, "haproxy.log")
        lines = [
            "global",
            # Small enough for a default open-files limit (HAProxy needs about 2 x maxconn).
            "    maxconn 256",
            f"    stats socket {self.sock_path} mode 600 level admin",
            "",
            "defaults",
            "    mode http",
            "    option http-keep-alive",
            "    retries 0",
            "    timeout connect 2s",
            "    timeout client 30s",
            "    timeout server 30s",
            f"    timeout check {check_timeout_ms}ms",
            "",
            "frontend fe",
            f"    bind 127.0.0.1:{frontend_port}",
            "    default_backend be",
            "",
            "backend be",
            "    balance roundrobin",
            "    http-reuse safe",
        ]
        if checks:
            lines += [
                "    option httpchk GET /readyz",
                "    http-check expect status 200",
                f"    default-server inter {inter_ms}ms fall {fall} rise {rise}"
                + (f" downinter {downinter_ms}ms" if downinter_ms else ""),
            ]
        lines += [f"    server {name} 127.0.0.1:{port}" + (" check" if checks else "") for name, port in servers]
        with open(self.cfg_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = None
        self.transitions = []  # (monotonic time, server, status)
        self._stop = threading.Event()
        self._monitor = None
        self._status = {}

    def start(self):
        subprocess.run(["haproxy", "-c", "-q", "-f", self.cfg_path], check=True, timeout=30)
        with open(self.log_path, "wb") as out:
            self.proc = spawn(["haproxy", "-db", "-f", self.cfg_path], out, subprocess.STDOUT)
        self._monitor = threading.Thread(target=self._watch, daemon=True)
        self._monitor.start()

    def stop(self):
        self._stop.set()
        if self._monitor:
            self._monitor.join(timeout=5)
        if self.proc:
            kill(self.proc)

    def show_stat(self):
        return show_stat(self.sock_path)

    def command(self, cmd):
        """One runtime-API command that answers nothing on success; raises on any answer."""
        answer = haproxy_command(self.sock_path, cmd).strip()
        if answer:
            raise RuntimeError(f"haproxy `{cmd}`: {answer}")

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
            with open(self.log_path, "r", errors="replace") as f:
                tail = "".join(f.readlines()[-20:])
            raise RuntimeError(f"haproxy exited with {self.proc.returncode}:\n{tail}")

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
