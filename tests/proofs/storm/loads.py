"""The restart storm's loads, all running at once against the services, and their results in
one shape: {"load", "ok", "failed": {kind: n}, "retried", "examples": {kind: text}, "info"}.

  wrk       wrk keep-alive (`-t1 -c16` by default), socket errors and non-2xx by kind;
  probe     the harness's KeepAliveProbe beside wrk: Python keep-alive clients saying how
            each lost request was lost (wrk only counts "read errors");
  h2c       tests/proofs/l4/h2client `-proto h2c` (golang.org/x/net/http2, prior knowledge);
  oneshot   tests/proofs/l4/h2client `-proto oneshot`: new connections at a steady rate, one
            request each, failures classified (refused, reset, eof, timeout, status NNN);
  watch     /watch streams (the harness's WatchStream), a fixed number open at all times, each
            renewed as it ends; an end without HTTP/1.1's final chunk is a failure;
  h2-tls    tests/proofs/l4/h2client `-proto h2-tls` against the TLS service, verified with its
            CA;
  grpc      tests/proofs/rolling/grpcio_load.py: unary calls with Python's grpcio (C-core).

Every process is started through the harness (killed by PID on every exit path); every wait
is bounded.
"""

import json
import math
import os
import signal
import socket
import sys
import threading

import harness as h

STOP_BOUND_S = 30.0
# What a failure kind means, for the kinds whose client gives no example of its own.
MEANING = {
    ("wrk", "connect"): "wrk could not connect (wrk gives no detail)",
    ("wrk", "read"): "a read failed: a keep-alive connection closed or reset with a request outstanding "
                     "(wrk gives no detail; the probe beside it shows how)",
    ("wrk", "write"): "a write failed on a keep-alive connection (wrk gives no detail)",
    ("wrk", "timeout"): "no reply within 5 s (wrk gives no detail)",
    ("wrk", "non-2xx"): "a reply outside 2xx/3xx (wrk gives no detail; the probe beside it shows one)",
    ("probe", "eof"): "the server closed a keep-alive connection after a request was sent, before any reply byte",
    ("probe", "reset"): "ECONNRESET/EPIPE while sending a request or reading its reply",
    ("probe", "timeout"): "no reply within 5 s",
    ("probe", "refused"): "a new connection was refused",
}


def result(load, ok, failed=None, retried=0, examples=None, **info):
    failed = {k: v for k, v in (failed or {}).items() if v}
    examples = dict(examples or {})
    for kind in failed:
        if kind not in examples and (load, kind) in MEANING:
            examples[kind] = MEANING[(load, kind)]
    return {"load": load, "ok": ok, "failed": failed, "retried": retried, "examples": examples, "info": info}


def last_json(path):
    """The last JSON object line of the file at `path` (None when there is none)."""
    try:
        with open(path, "r", errors="replace") as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


class Wrk:
    """wrk on `path`, ending on its own after `seconds`."""

    def __init__(self, port, seconds, workdir, threads, connections, path):
        self.name = "wrk"
        seconds = int(math.ceil(seconds))
        self.proc, self.out = h.wrk(port, seconds, workdir, "wrk", threads=threads, connections=connections, path=path)
        self.seconds = seconds

    def signal(self):
        pass  # wrk ends at its -d

    def stop(self):
        try:
            w = h.wrk_result(self.proc, self.out, STOP_BOUND_S + self.seconds)
        except RuntimeError as e:
            return result("wrk", 0, {"wrk failed": 1}, examples={"wrk failed": str(e)[-500:]})
        kinds = {k: w[k] for k in ("connect", "read", "write", "timeout")}
        kinds["non-2xx"] = w["non2xx"]
        return result("wrk", w["requests"] - w["non2xx"], kinds)


class Probe:
    """harness.KeepAliveProbe: `connections` Python keep-alive clients sending GET /."""

    def __init__(self, port, connections):
        self.name = "probe"
        self.probe = h.KeepAliveProbe(port, connections=connections)

    def signal(self):
        pass

    def stop(self):
        self.probe.stop()
        p = self.probe
        bad = p.bad()
        lost_replies = sum(v for k, v in bad.items() if k.startswith("status"))
        return result("probe", p.requests - lost_replies, bad, examples=dict(p.examples),
                      clean_closes=p.outcomes.get("clean", 0))


class JsonClient:
    """A load client process that prints one JSON line when SIGTERM ends it: `cmd`'s stdout
    and stderr in `workdir`; `summarize(report)` turns the line into a result."""

    def __init__(self, name, cmd, workdir):
        self.name = name
        self.out = os.path.join(workdir, f"{name}.json")
        self.err = os.path.join(workdir, f"{name}.stderr")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = h.spawn(cmd, out, err)

    def signal(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def stop(self):
        self.signal()
        code = h.reap(self.proc, STOP_BOUND_S)
        r = last_json(self.out)
        if r is None:
            with open(self.err, "r", errors="replace") as f:
                tail = f.read()[-500:]
            return result(self.name, 0, {"client failed": 1}, examples={"client failed": f"exit {code}: {tail}"})
        return self.summarize(r)


class GoClient(JsonClient):
    """tests/proofs/l4/h2client with `flags`, ended by SIGTERM."""

    def __init__(self, name, binary, flags, workdir, seconds):
        super().__init__(name, [binary, *flags, "-duration", f"{int(seconds) + 60}s"], workdir)

    def summarize(self, r):
        kinds = r.get("failure_kinds") or ({"failed": r["failed"]} if r["failed"] else {})
        examples = r.get("failure_examples") or {}
        if r["failed"] and not examples and r.get("errors"):
            examples = {"failed": r["errors"][0]}
        info = {k: r.get(k) for k in ("dials", "dial_errors", "goaway_conns", "peer_closed_without_goaway",
                                      "rate", "attempted", "achieved_rate", "max_in_flight", "elapsed_s")
                if r.get(k) is not None}
        info["retries_by_status"] = r.get("retries") or {}
        return result(self.name, r["ok"], kinds, sum((r.get("retries") or {}).values()), examples, **info)


def _error_kind(e):
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return "reset"
    if isinstance(e, socket.timeout):
        return "timeout"
    return type(e).__name__


class WatchPool:
    """`streams` GET /watch streams on 127.0.0.1:`port`, each renewed as soon as it ends.
    A stream ended cleanly (final chunk) is ok; an unclean end, a non-200 answer or a failed
    open is a failure; the streams still open at stop() were ended by the client (not
    counted)."""

    def __init__(self, port, streams):
        self.name = "watch"
        self.port = port
        self.ok = 0
        self.failed, self.examples = {}, {}
        self.lines = 0
        self.open_at_end = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(streams)]
        for t in self._threads:
            t.start()

    def _fail(self, kind, example):
        with self._lock:
            self.failed[kind] = self.failed.get(kind, 0) + 1
            self.examples.setdefault(kind, example)

    def _run(self):
        while not self._stop.is_set():
            try:
                w = h.WatchStream(self.port, timeout=30)
            except (OSError, ValueError) as e:
                self._fail("open " + _error_kind(e), f"{type(e).__name__}: {e}")
                self._stop.wait(0.05)
                continue
            if w.status != 200:
                w.close()
                self._fail(f"open status {w.status}", f"GET /watch answered {w.status}")
                self._stop.wait(0.05)
                continue
            while not w.wait(0.2) and not self._stop.is_set():
                pass
            if w.ended_at is None:  # stopping: the client ends it
                w.close()
                with self._lock:
                    self.open_at_end += 1
                return
            with self._lock:
                self.lines += w.lines
                if w.clean:
                    self.ok += 1
            if not w.clean:
                self._fail("unclean end", f"after {w.lines} lines: {w.error}")

    def signal(self):
        self._stop.set()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(STOP_BOUND_S)
        return result("watch", self.ok, self.failed, examples=self.examples, lines=self.lines,
                      open_at_end=self.open_at_end)


class Grpc(JsonClient):
    """tests/proofs/rolling/grpcio_load.py against 127.0.0.1:`port`, ended by SIGTERM."""

    def __init__(self, port, workdir, seconds, channels, workers):
        cmd = [sys.executable, h.GRPCIO_LOAD, "--target", f"127.0.0.1:{port}", "--channels", str(channels),
               "--workers", str(workers), "--duration", str(int(seconds) + 60)]
        super().__init__("grpc", cmd, workdir)

    def summarize(self, r):
        kinds = r.get("errors") or ({"failed": r["failed"]} if r["failed"] else {})
        examples = {}
        for i, text in enumerate(r.get("examples") or []):
            kind = next((k for k in kinds if text.startswith(k)), f"example {i + 1}")
            examples.setdefault(kind, text)
        return result("grpc", r["ok"], kinds, r.get("retried", 0), examples, retries_by_kind=r.get("retries") or {})


def start(plan, a, workdir, seconds, client):
    """Starts the loads `plan` names ({load: port}) with the settings of `a` (the parsed
    arguments); `client` is the h2client binary. Returns the started loads; on an error,
    kills those already started and raises."""
    loads = []
    try:
        for name, port in plan.items():
            addr = ["-addr", f"127.0.0.1:{port}"]
            if name == "wrk":
                loads.append(Wrk(port, seconds, workdir, a.wrk_threads, a.wrk_connections, a.wrk_path))
            elif name == "probe":
                loads.append(Probe(port, a.probe_connections))
            elif name == "h2c":
                loads.append(GoClient(name, client, ["-proto", "h2c", *addr, "-transports", str(a.h2_transports),
                                                     "-workers", str(a.h2_workers)], workdir, seconds))
            elif name == "oneshot":
                loads.append(GoClient(name, client, ["-proto", "oneshot", *addr, "-rate", str(a.rate), "-paths", "/"],
                                      workdir, seconds))
            elif name == "watch":
                loads.append(WatchPool(port, a.watch_streams))
            elif name == "h2-tls":
                loads.append(GoClient(name, client, ["-proto", "h2-tls", *addr, "-cacert", a.tls.ca,
                                                     "-transports", str(a.h2_transports),
                                                     "-workers", str(a.h2_workers)], workdir, seconds))
            elif name == "grpc":
                loads.append(Grpc(port, workdir, seconds, a.grpc_channels, a.grpc_workers))
    except BaseException:
        stop(loads)
        raise
    return loads


def stop(loads):
    """Ends every load (the signals first, so that they end together) and returns their results."""
    for load in loads:
        load.signal()
    return [load.stop() for load in loads]
