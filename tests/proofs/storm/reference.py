"""The restart storm's reference points: the same client loads against two servers that reload
without a restart of their own, each answering every path with 200 `ok`:

  haproxy   HAProxy's seamless reload, master-worker mode (`haproxy -W -S DIR/master.sock -f
            CFG -x DIR/stats.sock`, `stats socket ... expose-fd listeners`): SIGUSR2 to the
            master starts a new worker that takes the listeners from the old one (the master
            passes them itself, `-x sockpair@N`; the `-x` given here only matters to a
            master started by hand next to an old one); the old worker finishes its
            connections (`hard-stop-after 10s`). The static answer is
            `http-request return status 200 content-type text/plain string ok`.
  nginx     `nginx -s reload` (SIGHUP to the master): new workers, the old ones shut down
            gracefully; `return 200 "ok"`. Pid file, logs and temporary paths in the run's
            directory.

Each listens on an HTTP/1.1 port (wrk, the keep-alive probe, oneshot) and an h2c port (h2c:
HAProxy `proto h2`, nginx `listen ... http2`). Each master logs every reload and the exit code
of every old worker, read back as the run's generations. Measurements only: a reference never
fails the storm.
"""

import os
import re
import signal
import subprocess

import harness as h

KINDS = ["haproxy", "nginx"]


def children(pid):
    """The PIDs of the children of process `pid` (/proc/PID/task/TID/children)."""
    pids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        pass
    return pids


class Reference:
    """One reference server (`kind`: haproxy or nginx) on two fresh ports, reloaded by reload()."""

    def __init__(self, kind, workdir):
        self.kind, self.name, self.workdir = kind, kind, workdir
        self.http_port, self.h2c_port = h.free_port(), h.free_port()
        self.cfg = os.path.join(workdir, f"{kind}.cfg")
        self.log = os.path.join(workdir, f"{kind}.log")
        self.proc = None
        self.reloads = 0
        self.reload_errors = []
        if kind == "haproxy":
            self.stats_sock = os.path.join(workdir, "stats.sock")
            self.master_sock = os.path.join(workdir, "master.sock")
            text = "\n".join([
                "global",
                "    maxconn 8000",
                f"    stats socket {self.stats_sock} mode 600 level admin expose-fd listeners",
                "    hard-stop-after 10s",
                "defaults",
                "    mode http",
                "    timeout connect 2s",
                "    timeout client 30s",
                "    timeout server 30s",
                "    timeout http-keep-alive 10s",
                "frontend fe",
                f"    bind 127.0.0.1:{self.http_port}",
                f"    bind 127.0.0.1:{self.h2c_port} proto h2",
                "    http-request return status 200 content-type text/plain string ok",
            ])
            self.command = ["haproxy", "-W", "-S", self.master_sock, "-f", self.cfg, "-x", self.stats_sock]
        else:
            d = workdir
            text = "\n".join([
                "daemon off;",
                "master_process on;",
                "worker_processes 1;",
                f"pid {d}/nginx.pid;",
                f"error_log {self.log} notice;",
                "worker_rlimit_nofile 16384;",
                "events { worker_connections 8192; }",
                "http {",
                "    access_log off;",
                *(f"    {p}_temp_path {d}/{p};" for p in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
                "    keepalive_requests 1000000;",
                "    server {",
                f"        listen 127.0.0.1:{self.http_port};",
                f"        listen 127.0.0.1:{self.h2c_port} http2;",
                '        location / { default_type text/plain; return 200 "ok"; }',
                "    }",
                "}",
            ])
            self.command = ["nginx", "-p", workdir, "-c", self.cfg, "-e", self.log]
        with open(self.cfg, "w") as f:
            f.write(text + "\n")

    def start(self):
        out = os.path.join(self.workdir, f"{self.kind}.stdout")
        with open(out, "wb") as o:
            self.proc = h.spawn(self.command, o, subprocess.STDOUT)
        if self.kind == "haproxy":
            self.log = out
        if not h.wait_until(lambda: h.http_get(self.http_port, "/", timeout=1.0)[0] == 200, self.proc, 15):
            raise RuntimeError(f"{self.kind} did not answer 200 on 127.0.0.1:{self.http_port}:\n{h.tail(self.log)}")

    def restart(self, bound):
        """One reload; `bound` bounds `nginx -s reload`."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.kind}'s master exited {self.proc.returncode}:\n{h.tail(self.log)}")
        if self.kind == "haproxy":
            os.kill(self.proc.pid, signal.SIGUSR2)
        else:
            done = subprocess.run([*self.command, "-s", "reload"], capture_output=True, text=True, timeout=bound)
            if done.returncode != 0:
                self.reload_errors.append(done.stderr.strip()[-300:])
        self.reloads += 1

    def reap(self, wait=False):
        pass  # the master reaps its workers; their exits are read from its log

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # Both masters stop gracefully on SIGQUIT (nginx) / SIGUSR1 (HAProxy).
            os.kill(self.proc.pid, signal.SIGUSR1 if self.kind == "haproxy" else signal.SIGQUIT)
            h.reap(self.proc, 15)

    def kill(self):
        """Kills the master and then its workers (an nginx worker outlives a killed master),
        each by its PID."""
        if not self.proc:
            return
        workers = children(self.proc.pid) if self.proc.poll() is None else []
        h.kill(self.proc)
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def generations(self):
        """What the master's log says: reloads done and the old workers' exit codes."""
        text = h.tail(self.log, 1000000)
        if self.kind == "haproxy":
            reloaded = len(re.findall(r"Reloading HAProxy", text))
            codes = re.findall(r"Former worker \(\d+\) exited with code (\d+)", text)
        else:
            reloaded = len(re.findall(r"signal 1 \(SIGHUP\) received", text))
            codes = re.findall(r"worker process \d+ exited with code (\d+)", text)
        exits = {}
        for code in codes:
            exits[code] = exits.get(code, 0) + 1
        return {"reloads_sent": self.reloads, "reloads_logged": reloaded, "exits": exits,
                "reload_errors": self.reload_errors[:3]}
