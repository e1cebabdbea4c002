"""The restart storm's server chains: one service (an example server on its own port) replaced
by a new generation once per interval, by listener hand-over or under systemd's socket
activation, and what the kernel and /proc say about each generation.

Builds on the restart proofs: `restart.common.Generation` starts each process (its logs in
the run's directory, tracked by the harness and killed by PID on every exit path) and
`restart.handover` says when a successor has bound its hand-over socket.
"""

import os
import re
import signal
import time

import harness as h
from restart import common as c
from restart import handover as ho

METHODS = ["handover", "socket-activation"]
GRACE = "3s"


def go_seconds(text):
    """Seconds of a Go-style duration made of one or more NUMBER UNIT parts (1s, 500ms, 1m30s)."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def proc_sample(pid):
    """(open descriptors, VmRSS in kB) of process `pid`, or (None, None) when it is gone."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return fds, int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None, None


def listen_counters():
    """The kernel's TcpExt ListenOverflows and ListenDrops (absolute, this network namespace),
    read from /proc/net/netstat: nstat would update its history file."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines, lines[1:]):
        if names.startswith("TcpExt:") and values.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return {k: int(table.get(k, 0)) for k in ("ListenOverflows", "ListenDrops")}
    return {"ListenOverflows": 0, "ListenDrops": 0}


class Chain:
    """One service's generations: `name` (http, https, grpc) served by `binary` with `extra`
    flags, on 127.0.0.1:`port`, restarted by `method`. `scheme` is the one of its
    `listening on` line. Every generation's record: name, pid, fds/RSS at its start and at its
    signal, exit code."""

    def __init__(self, name, binary, method, workdir, port, scheme, extra, shutdown_delay, backlog, exit_bound):
        self.name, self.binary, self.method, self.workdir = name, binary, method, workdir
        self.port, self.scheme, self.extra = port, scheme, extra
        self.exit_bound = exit_bound
        self.sock_path = os.path.join(workdir, f"{name}.h.sock")
        self.flags = ["--shutdown-delay", shutdown_delay, "--shutdown-watch-termination-grace-period", GRACE]
        if method == "handover":
            self.flags += ["--handover-socket", self.sock_path]
        self.sock = None
        if method == "socket-activation":
            self.sock = h.listening_socket(backlog=backlog, port=port)
        self.gens = []  # every generation started, in order
        self.records = []  # one dict per generation, same order
        self.retiring = []  # (generation, record, deadline): signalled, not yet reaped
        self.current = None
        self.restarts = 0
        self.restart_s = []  # seconds from the start of each restart to the successor's line

    def _start(self, listen):
        n = len(self.gens) + 1
        gen = c.Generation(self.binary, f"{self.name}.{n}", self.workdir)
        if self.method == "socket-activation":
            gen.start(["--listen", "systemd", *self.flags, *self.extra], fds=[self.sock.fileno()],
                      listen_pid="self", env={"LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"})
        else:
            gen.start(["--listen", listen, *self.flags, *self.extra])
        rec = {"name": gen.name, "pid": gen.pid, "start_fds": None, "start_rss_kb": None,
               "signal_fds": None, "signal_rss_kb": None, "signal": None, "exit": "running"}
        self.gens.append(gen)
        self.records.append(rec)
        return gen, rec

    def _listening(self, gen, rec, timeout):
        addrs = gen.wait_listening(1, timeout=timeout)
        want = [f"127.0.0.1:{self.port}"]
        if addrs != want:
            raise RuntimeError(f"{gen.name}: listening on {addrs}, want {want}")
        line = next((l for l in gen.stdout_lines() if l.startswith("listening on ")), "")
        if not line.startswith(f"listening on {self.scheme}://"):
            raise RuntimeError(f"{gen.name}: {line!r}, want a {self.scheme} address")
        rec["start_fds"], rec["start_rss_kb"] = proc_sample(gen.pid)

    def start_first(self):
        gen, rec = self._start(f"127.0.0.1:{self.port}")
        self._listening(gen, rec, 30)
        self.current = (gen, rec)

    def restart(self, bound):
        """Replaces the running generation by a new one; raises when the new one does not take
        over within `bound` seconds."""
        old, old_rec = self.current
        began = time.monotonic()
        if self.method == "handover":
            before = ho.socket_identity(self.sock_path)
            gen, rec = self._start("handover")
            ho.wait_new_socket(self.sock_path, before, gen.proc, bound)
            self._signal(old, old_rec, signal.SIGUSR2)
        else:
            self._signal(old, old_rec, signal.SIGTERM)
            gen, rec = self._start("systemd")
        try:
            self._listening(gen, rec, bound)
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n{old.name}'s stderr:\n{old.stderr_tail()}") from None
        self.restart_s.append(time.monotonic() - began)
        self.current = (gen, rec)
        self.restarts += 1

    def _signal(self, gen, rec, signum):
        rec["signal_fds"], rec["signal_rss_kb"] = proc_sample(gen.pid)
        rec["signal"] = signal.Signals(signum).name
        gen.signal(signum)
        self.retiring.append((gen, rec, time.monotonic() + self.exit_bound))

    def reap(self, wait=False):
        """Notes the exit of each signalled generation that has ended (all of them, waiting
        until each one's bound, when `wait`); one past its bound is killed (exit None)."""
        keep = []
        for gen, rec, deadline in self.retiring:
            timeout = max(0.0, deadline - time.monotonic()) if wait else 0.0
            if gen.proc.poll() is None and not wait and time.monotonic() < deadline:
                keep.append((gen, rec, deadline))
                continue
            rec["exit"] = gen.wait_exit(timeout)
            if rec["signal"] == "SIGUSR2" and rec["exit"] == 0:
                rec["handed_over"] = "listeners handed over" in gen.stderr_text()
        self.retiring = keep

    def stop(self):
        """SIGTERM to the running generation; waits for it and every other signalled one."""
        if self.current:
            gen, rec = self.current
            if gen.proc.poll() is None:
                self._signal(gen, rec, signal.SIGTERM)
            self.current = None
        self.reap(wait=True)

    def kill(self):
        for gen in self.gens:
            gen.kill()
        if self.sock:
            self.sock.close()
            self.sock = None

    def problems(self):
        """Every generation exited 0; after a hand-over the old one said so."""
        out = []
        for gen, rec in zip(self.gens, self.records):
            if rec["exit"] != 0:
                what = "still running (killed)" if rec["exit"] is None else f"exited {rec['exit']}"
                out.append(f"{gen.name} (pid {rec['pid']}) {what}, want exit 0:\n{gen.stderr_tail(10)}")
            elif rec.get("handed_over") is False:
                out.append(f"{gen.name}'s stderr has no `listeners handed over`:\n{gen.stderr_tail(10)}")
        return out


def quarters(values):
    """Medians of the second and the last quarter of `values` (None when fewer than 8)."""
    values = [v for v in values if v is not None]
    n = len(values)
    if n < 8:
        return None, None

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    return median(values[n // 4:n // 2]), median(values[3 * n // 4:])


def growth(chain):
    """The chain's descriptors and RSS (MB) at start and at the signal, second quarter vs last
    quarter of the generations replaced during the storm (the last one, stopped after the
    load, left out): {key: (q2, q4)}."""
    recs = chain.records[:-1]
    out = {}
    for key in ("start_fds", "signal_fds", "start_rss_kb", "signal_rss_kb"):
        q2, q4 = quarters([r[key] for r in recs])
        if key.endswith("_kb") and q2 is not None:
            q2, q4 = q2 / 1024, q4 / 1024
        out[key.replace("_kb", "_mb")] = (q2, q4)
    return out


def growth_problems(chain, fd_slack, rss_slack_mb):
    g = growth(chain)
    out = []
    q2, q4 = g["signal_fds"]
    if q2 is not None and q4 - q2 > fd_slack:
        out.append(f"{chain.name}: descriptors at the signal grew {q2} -> {q4} (median, 2nd vs last quarter; slack {fd_slack})")
    q2, q4 = g["signal_rss_mb"]
    if q2 is not None and q4 - q2 > rss_slack_mb:
        out.append(f"{chain.name}: RSS at the signal grew {q2:.1f} -> {q4:.1f} MB (median, 2nd vs last quarter; slack {rss_slack_mb} MB)")
    return out


def log_exits(chain):
    """Exit codes of the chain's generations, as counts: {"0": n, ...}."""
    counts = {}
    for rec in chain.records:
        counts[str(rec["exit"])] = counts.get(str(rec["exit"]), 0) + 1
    return counts

