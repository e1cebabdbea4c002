"""Long-lived connections behind a layer-4 balancer: a Kubernetes-style rolling update of two
pods under a real HTTP/2 (or HTTP/1 keep-alive) client, through HAProxy in `mode tcp`.

A TCP balancer (kube-proxy, IPVS, a cloud network load balancer) never moves an open
connection: removing an endpoint only stops new connections from reaching it. Only the pod
itself, with an HTTP/2 GOAWAY or an HTTP/1 `Connection: close`, moves its clients. And once
every connection has landed somewhere, nothing spreads them again unless the pods close a
few of them now and then (`--goaway-chance`, kube-apiserver's answer).

Per run, for one example server, one protocol, one shutdown mode and one goaway chance:

  1. pods p1 and p2 start on 127.0.0.1; HAProxy (`mode tcp`, `balance roundrobin`, no health
     checks, `retries 0`, no redispatch: as kube-proxy behaves) has them as endpoints, and the
     slots of the pods to come (p3, p4) declared `disabled`;
  2. tests/proofs/l4/h2client (Go: golang.org/x/net/http2 prior-knowledge h2c, or net/http
     HTTP/1 keep-alive) runs several independent transports with several workers each, on `/`
     and `/sleep?duration=20ms`, retrying after a Retry-After as client-go does (a 429 or 5xx
     answer with Retry-After: client-go's checkWait), nothing else;
  3. for each old pod: the new pod starts, its /readyz answers 200, its endpoint is enabled
     (runtime API, `enable server`); the client connections HAProxy has on the old pod are
     noted (`show sess all`: the pod's pinned connections, by client port); the old pod gets
     SIGTERM, its endpoint is disabled 1 s later (`disable server`), and it must exit 0 within
     its shutdown delay plus a bound;
  4. from the end of the rollout, 10 s of load: each pod's share of the traffic is the bytes
     HAProxy forwarded from it to clients over the window, read at both ends of the window
     (see `Balancer.bytes_out`). Bytes, not `stot`: `stot` counts connections, and with a few
     long-lived connections a connection says nothing about how much traffic it carries. All
     responses here are small and alike, so bytes track requests;
  5. the client stops and reports requests, failures, retries and dials (connections), and
     what it saw of each connection (its GOAWAYs, and whether the server closed it).

TLS pass-through (protocols `h2-tls` and `http1-tls`): the same rollout with the pods serving
TLS (`--tls-cert-file`, `--tls-private-key-file`: a throwaway CA and a certificate for IP
127.0.0.1 made with the openssl CLI in the run's directory) and HAProxy still in `mode tcp`,
so the TLS sessions pass through it to the pods, as behind a network load balancer. The
client verifies the pods' certificate against that CA (name 127.0.0.1) and offers one ALPN
protocol, h2 or http/1.1; a connection that negotiated anything else is a failure.

Asserted: 0 failed requests, the replaced pods exit 0, over HTTP/2 (h2c, h2-tls) every
connection pinned to an old pod received a GOAWAY (and every old pod had pinned connections),
and no connection was closed by the server without a GOAWAY first, and in close-listener mode
(A) no request was retried (a stream that races the GOAWAY is served, never answered 503).
Each replaced pod logged its termination summary with no late connection (late_connections=0)
and no late-connections warning: its endpoint was removed 1 s into the 3 s shutdown delay, so
the balancer sent it nothing new in the last part of the delay. Over HTTP/2 that holds
although requests kept coming: the pod's last new request (last_new_request) must come after
its endpoint's removal, as the clients keep sending on the connections pinned to it until its
GOAWAY. Those requests are not the balancer's decision: they may count as late requests, and
call for no warning. (Asserted with goaway chance 0 only: a goaway chance moves every pinned
connection within moments, so its last request races the endpoint's removal.) With a goaway
chance > 0 every pod's share is within 25% of an even share, with at least 10 new connections
in the window per client connection (an even share from connections that never moved would be
the rollout's luck). With chance 0 the skew is printed, not asserted. The control
(`bare_axum --graceful-shutdown`: axum's own graceful shutdown, no lame-duck window) goes
through the same rollout and must lose requests: it shows the test can fail.

Stdlib only. Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every run passed; 1 otherwise; 2 on a setup problem.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import harness as h

PROTOCOLS = ["h2c", "http1", "h2-tls", "http1-tls"]
# The protocols whose pods serve TLS, and those over HTTP/2 (the GOAWAY checks).
TLS_PROTOCOLS = ("h2-tls", "http1-tls")
H2_PROTOCOLS = ("h2c", "h2-tls")
# The control (bare_axum) has no TLS flags.
CONTROL_PROTOCOLS = ["h2c", "http1"]
MODES = ["A", "B"]
CONTROL = "bare_axum"
# The lame-duck window: the endpoint is removed 1 s after SIGTERM, as kube-proxy would
# (endpoint update after the pod turns Terminating); 3 s leaves a margin for a loaded machine.
ENDPOINT_REMOVAL_S = 1.0
SHUTDOWN_DELAY = "3s"
# A share within 25% of even passes (two pods: between 37.5% and 62.5%).
SHARE_TOLERANCE = 0.25
# With a goaway chance, each of the client's connections must have been replaced this many times
# on average during the window (a chance of 0.02 replaces one every ~50 requests: hundreds).
REPLACED_PER_CONN = 10


class Balancer:
    """HAProxy in `mode tcp` with fixed server slots, changed through its runtime API."""

    def __init__(self, workdir, port, slots):
        self.port = port
        self.sock_path = os.path.join(workdir, "haproxy.sock")
        self.cfg_path = os.path.join(workdir, "haproxy.cfg")
        self.log_path = os.path.join(workdir, "haproxy.log")
        lines = [
            "global",
            "    maxconn 512",
            f"    stats socket {self.sock_path} mode 600 level admin",
            "",
            "defaults",
            "    mode tcp",
            "    retries 0",
            "    timeout connect 2s",
            "    timeout client 60s",
            "    timeout server 60s",
            "",
            "frontend fe",
            f"    bind 127.0.0.1:{port}",
            "    default_backend be",
            "",
            "backend be",
            "    balance roundrobin",
        ]
        for name, pod_port, enabled in slots:
            lines.append(f"    server {name} 127.0.0.1:{pod_port}" + ("" if enabled else " disabled"))
        with open(self.cfg_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = None

    def start(self):
        subprocess.run(["haproxy", "-c", "-q", "-f", self.cfg_path], check=True, timeout=30)
        with open(self.log_path, "wb") as out:
            self.proc = h.spawn(["haproxy", "-db", "-f", self.cfg_path], out, subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.stats():
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("haproxy did not answer on its stats socket:\n" + tail(self.log_path))

    def command(self, cmd):
        answer = h.haproxy_command(self.sock_path, cmd).strip()
        if answer:
            raise RuntimeError(f"haproxy `{cmd}`: {answer}")

    def stats(self):
        return h.show_stat(self.sock_path)

    def pinned_ports(self, server):
        """The client ports of the sessions HAProxy has on `server` right now."""
        ports = set()
        for block in re.split(r"\n(?=0x[0-9a-f]+: \[)", h.haproxy_command(self.sock_path, "show sess all")):
            source = re.search(r"^0x[0-9a-f]+: \[.*\bsource=127\.0\.0\.1:(\d+)", block)
            if source and re.search(rf"^  server={re.escape(server)} ", block, re.M):
                ports.add(int(source.group(1)))
        return ports

    def bytes_out(self):
        """Bytes forwarded from each server to clients so far: `show stat`'s `bout` (a session's
        bytes, added when it ends: in `mode tcp` HAProxy forwards without waking the session,
        so `bout` stands still while a long-lived connection lives) plus each live session's
        response-channel total (`show sess all`, counted as data arrives)."""
        live = {}
        for block in re.split(r"\n(?=0x[0-9a-f]+: \[)", h.haproxy_command(self.sock_path, "show sess all")):
            server = re.search(r"^  server=(\S+) ", block, re.M)
            total = re.search(r"^  res=\S+ \(.*\btotal=(\d+)\)", block, re.M)
            if server and total:
                live[server.group(1)] = live.get(server.group(1), 0) + int(total.group(1))
        return {n: int(f["bout"]) + live.get(n, 0) for n, f in self.stats().items()}, self.stats()

    def stop(self):
        if self.proc:
            h.kill(self.proc)


def tail(path, n=20):
    try:
        with open(path, "r", errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def wait_ready(port, path, tls=None, timeout=15.0):
    """Waits until GET `path` on the pod (over TLS with `tls`, a harness.Tls) answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if h.http_get(port, path, timeout=1.0, tls=tls)[0] == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"127.0.0.1:{port}{path} not 200 within {timeout}s")


def read_conn_log(path):
    with open(path, "r", errors="replace") as f:
        return [json.loads(line) for line in f if line.strip()]


def pinned_goaways(snapshots, conns):
    """Matches each pod's pinned client ports (noted at `at_ms`, just before its SIGTERM) with
    the client's connections (the one on that port open at that moment). Returns
    {pod: (pinned, with a GOAWAY, ended by the server, unmatched ports)}."""
    by_port = {}
    for c in conns:
        by_port.setdefault(c["port"], []).append(c)
    out = {}
    for pod, at_ms, ports in snapshots:
        pinned = goaway = peer = unmatched = 0
        for port in sorted(ports):
            # The client notes its dial once connected, HAProxy its session at accept: allow 1 s.
            cands = [
                c for c in by_port.get(port, [])
                if c["dial_ms"] <= at_ms + 1000 and (c["end_ms"] == 0 or c["end_ms"] >= at_ms - 1000)
            ]
            if not cands:
                unmatched += 1
                continue
            c = min(cands, key=lambda c: abs(c["dial_ms"] - at_ms))
            pinned += 1
            goaway += c["goaways"] > 0
            peer += c["ended_by"] == "peer"
        out[pod] = (pinned, goaway, peer, unmatched)
    return out


def pod_arrivals(stderr_path, removed_s):
    """What an old pod logged of its termination's arrivals (its termination summary and
    late-connection warnings), with `removed_s`, when its endpoint was removed after SIGTERM."""
    try:
        summary = h.termination_summary(stderr_path)
        late_warnings, _ = h.warning_counts(stderr_path)
    except OSError:
        summary, late_warnings = None, 0
    summary = summary or {}
    count = lambda k: int(summary[k]) if k in summary else None  # noqa: E731
    return {
        "summary": bool(summary),
        "removed_s": removed_s,
        "last_new_connection": h.seconds(summary.get("last_new_connection")),
        "last_new_request": h.seconds(summary.get("last_new_request")),
        "late_connections": count("late_connections"),
        "late_requests": count("late_requests"),
        "late_warnings": late_warnings,
    }


def fmt_s(s):
    return "-" if s is None else f"{s:.3f}s"


def shares(before, after, names):
    """Each server's share of the bytes sent to clients between two `bytes_out` readings."""
    sent = {n: after[0][n] - before[0][n] for n in names}
    conns = {n: int(after[1][n]["stot"]) - int(before[1][n]["stot"]) for n in names}
    total = sum(sent.values())
    return {n: (sent[n] / total if total else 0.0) for n in names}, sent, conns


def run_one(binary, case, args, client_bin):
    """One rolling update under load. `case`: runtime, protocol, mode, chance, control."""
    runtime, proto, mode, chance = case["runtime"], case["protocol"], case["mode"], case["chance"]
    workdir = tempfile.mkdtemp(prefix=f"rolling-l4-{runtime}-{proto}-{mode}-")
    tls = h.Tls(workdir) if proto in TLS_PROTOCOLS else None
    if case["control"]:
        flags, ready_path = ["--graceful-shutdown"], "/"
    else:
        flags = ["--shutdown-delay", SHUTDOWN_DELAY, "--shutdown-watch-termination-grace-period", "1s"]
        if mode == "B":
            flags.append("--shutdown-send-retry-after")
        if chance > 0:
            flags += ["--goaway-chance", f"{chance:g}"]
        ready_path = "/readyz"
    pods = [h.Instance(binary, f"p{i}", h.free_port(), flags, workdir, tls=tls) for i in (1, 2, 3, 4)]
    lb = Balancer(workdir, h.free_port(), [(p.name, p.port, p.name in ("p1", "p2")) for p in pods])
    client = None
    events, problems = [], []
    result = dict(
        case, ok=None, failed=None, retries=None, dials=None, exits={}, arrivals={}, shares={}, workdir=workdir
    )
    result["tls"] = tls is not None
    snapshots = []  # (old pod, Unix ms, client ports HAProxy had on it) just before each SIGTERM
    t0 = time.monotonic()

    def note(msg):
        events.append(f"{time.monotonic() - t0:6.2f}s {msg}")

    try:
        for pod in pods[:2]:
            pod.start()
            wait_ready(pod.port, ready_path, tls)
        lb.start()
        client_out = os.path.join(workdir, "client.out")
        conn_log = os.path.join(workdir, "client.conns.jsonl")
        tls_args = ["-cacert", tls.ca, "-server-name", "127.0.0.1"] if tls else []
        with open(client_out, "wb") as out, open(os.path.join(workdir, "client.err"), "wb") as err:
            client = h.spawn(
                [
                    client_bin,
                    "-addr", f"127.0.0.1:{lb.port}",
                    "-proto", proto,
                    "-transports", str(args.transports),
                    "-workers", str(args.workers),
                    "-http1-conns", str(args.http1_conns),
                    "-duration", "300s",
                    "-conn-log", conn_log,
                    *tls_args,
                ],
                out,
                err,
            )
        note(f"p1, p2 ready; client started ({args.transports} transports x {args.workers} workers, {proto})")
        time.sleep(args.warmup)

        for old, new in ((pods[0], pods[2]), (pods[1], pods[3])):
            if client.poll() is not None:
                raise RuntimeError(f"client exited early with {client.returncode}")
            new.start()
            wait_ready(new.port, ready_path, tls)
            lb.command(f"enable server be/{new.name}")
            note(f"{new.name} ready, endpoint added")
            ports = lb.pinned_ports(old.name)
            snapshots.append((old.name, int(time.time() * 1000), ports))
            note(f"{len(ports)} client connections pinned to {old.name}")
            term_at = time.monotonic()
            os.kill(old.proc.pid, signal.SIGTERM)
            exit_at = None
            while time.monotonic() < term_at + ENDPOINT_REMOVAL_S:
                if exit_at is None and old.proc.poll() is not None:
                    exit_at = time.monotonic()
                time.sleep(0.01)
            lb.command(f"disable server be/{old.name}")
            removed_s = time.monotonic() - term_at
            note(f"SIGTERM {old.name}; endpoint removed +{removed_s:.2f}s")
            code = h.reap(old.proc, args.exit_timeout)
            exit_at = exit_at or time.monotonic()
            result["exits"][old.name] = code
            note(f"{old.name} exited {code} +{exit_at - term_at:.2f}s after SIGTERM")
            if code is None:
                problems.append(f"{old.name} still running {args.exit_timeout}s after SIGTERM (killed)")
            elif code != 0 and not case["control"]:
                problems.append(f"{old.name} exited {code}:\n{old.stderr_tail()}")
            if not case["control"]:
                # Each pod starts once here: its stderr file is the one of this termination.
                result["arrivals"][old.name] = a = pod_arrivals(old.stderr_path, removed_s)
                if a["summary"]:
                    note(
                        f"{old.name} termination summary: last_new_connection={fmt_s(a['last_new_connection'])} "
                        f"last_new_request={fmt_s(a['last_new_request'])} late_connections={a['late_connections']} "
                        f"late_requests={a['late_requests']}; {a['late_warnings']} late-connection warnings"
                    )
                else:
                    note(f"{old.name}: no termination summary in {old.stderr_path}")

        live = [pods[2].name, pods[3].name]
        before = lb.bytes_out()
        time.sleep(args.window)
        share, sent, conns = shares(before, lb.bytes_out(), live)
        result["shares"] = share
        result["window_conns"] = sum(conns.values())
        result["client_conns"] = args.transports * (1 if proto in H2_PROTOCOLS else args.http1_conns)
        even = 1 / len(live)
        skew = max(abs(s - even) / even for s in share.values())
        result["skew"] = skew
        note(
            f"{args.window:g}s window after the rollout: "
            + ", ".join(f"{n} {share[n]:.1%} ({sent[n]} B, {conns[n]} new conns)" for n in live)
            + f"; largest deviation from even {skew:.1%}"
        )

        os.kill(client.pid, signal.SIGINT)
        code = h.reap(client, 60)
        with open(client_out, "r", errors="replace") as f:
            out = f.read().strip()
        if code != 0 or not out:
            raise RuntimeError(f"client exited {code}: {out}\n{tail(os.path.join(workdir, 'client.err'))}")
        report = json.loads(out.splitlines()[-1])
        for k in ("ok", "failed", "retries", "dials", "alpn", "goaway_conns", "peer_closed"):
            result[k] = report.get(k)
        result["peer_no_goaway"] = report.get("peer_closed_without_goaway")
        result["errors"] = report["errors"]
        pinned = pinned_goaways(snapshots, read_conn_log(conn_log))
        result["pinned"] = {pod: list(v) for pod, v in pinned.items()}
        for pod, (n, goaway, peer, unmatched) in pinned.items():
            note(
                f"{n} connections pinned to {pod}: {goaway} got a GOAWAY, {peer} closed by the server"
                + (f" ({unmatched} ports not found among the client's connections)" if unmatched else "")
            )
        note(
            f"client: {report['ok']} ok, {report['failed']} failed, retries by status {report['retries']}, "
            f"{report['dials']} dials (per transport {[t['dials'] for t in report['per_transport']]})"
            + (f", ALPN {report['alpn']}" if tls else "")
            + f"; {report['goaway_conns']} connections got a GOAWAY, {report['peer_closed']} closed by "
            f"the server ({report['peer_closed_without_goaway']} without a GOAWAY), {report['open_at_end']} open at the end"
        )
        for e in report["errors"]:
            note(f"  client error: {e}")
        result["dial_errors"] = report.get("dial_errors")
        if report.get("dial_errors"):
            # Not failures by themselves: a dial whose request another connection served is
            # cancelled (net/http); a request that lost its dial is counted as failed.
            note(f"{report['dial_errors']} dials did not complete, e.g. {report['dial_error_texts'][:3]}")
    except Exception as e:  # reported as a failed run, with the logs kept
        problems.append(f"{type(e).__name__}: {e}")
    finally:
        if client:
            h.kill(client)
        lb.stop()
        for pod in pods:
            if pod.proc:
                h.kill(pod.proc)
    result["events"], result["problems"] = events, problems
    result["duration_s"] = round(time.monotonic() - t0, 1)
    return result


def verdict(r):
    """Why run `r` failed, or None."""
    if r["problems"] or r["failed"] is None:
        return "run problems"
    if r["control"]:
        return None if r["failed"] > 0 else "the control lost no request (the test should be able to fail)"
    if r["failed"] != 0:
        return f"{r['failed']} failed requests (want 0)"
    if r["tls"]:
        want = "h2" if r["protocol"] == "h2-tls" else "http/1.1"
        if set(r["alpn"]) != {want}:
            return f"ALPN negotiated {r['alpn']} (want only {want})"
    for pod in r["exits"]:
        a = r["arrivals"].get(pod)
        if not a or not a["summary"]:
            return f"{pod} logged no termination summary"
        if a["late_connections"] != 0:
            return f"{pod}: late_connections={a['late_connections']} (want 0: the endpoint was removed in time)"
        if a["late_warnings"]:
            return f"{pod} logged {a['late_warnings']} late-connection warnings (want none)"
        if r["protocol"] in H2_PROTOCOLS and r["chance"] == 0 and (
            a["last_new_request"] is None or a["last_new_request"] <= a["removed_s"]
        ):
            # Pinned HTTP/2 connections keep their requests coming until GOAWAY: without that,
            # the absent warning would prove nothing about them. Not with a goaway chance: its
            # GOAWAYs (one every ~50 requests, tens of milliseconds here) move every pinned
            # connection within moments of the removal, and the last request races the removal.
            return (
                f"{pod}: last_new_request={fmt_s(a['last_new_request'])}, not after the endpoint's removal "
                f"at {a['removed_s']:.2f}s (want requests on pinned connections until GOAWAY)"
            )
    if r["protocol"] in H2_PROTOCOLS and r["mode"] == "A" and sum((r["retries"] or {}).values()):
        # Every stream the server read before its final GOAWAY is served: none gets a 503.
        return f"retries {r['retries']} in mode A over HTTP/2 (want none)"
    if r["protocol"] in H2_PROTOCOLS:
        for pod, (n, goaway, _peer, _unmatched) in r["pinned"].items():
            if n == 0:
                return f"no client connection was pinned to {pod} at its SIGTERM (nothing to check)"
            if goaway != n:
                return f"{n - goaway} of the {n} connections pinned to {pod} got no GOAWAY"
        if r["peer_no_goaway"]:
            return f"{r['peer_no_goaway']} connections closed by the server without a GOAWAY"
    if r["chance"] > 0 and r["skew"] > SHARE_TOLERANCE:
        return f"a pod's share is {r['skew']:.1%} off even (want within {SHARE_TOLERANCE:.0%})"
    if r["chance"] > 0 and r["window_conns"] < REPLACED_PER_CONN * r["client_conns"]:
        # An even share with connections that never moved is the rollout's luck, not rebalancing.
        return (
            f"{r['window_conns']} new connections in the window, fewer than {REPLACED_PER_CONN} x the "
            f"client's {r['client_conns']}: the goaway chance did not rebalance, whatever the shares"
        )
    return None


def table(results):
    head = [
        "server", "proto", "mode", "goaway", "ok", "failed", "retries", "dials", "exits",
        "pinned/GOAWAY", "last conn/req", "late conns/reqs", "shares p3/p4", "window conns", "time",
    ]
    rows = []
    for r in results:
        fmt = lambda v: "error" if v is None else str(v)  # noqa: E731
        rows.append(
            [
                r["runtime"] + (" (control)" if r["control"] else ""),
                r["protocol"],
                "-" if r["control"] else r["mode"],
                f"{r['chance']:g}",
                fmt(r["ok"]),
                fmt(r["failed"]),
                "error" if r["retries"] is None else (",".join(f"{k}x{v}" for k, v in sorted(r["retries"].items())) or "0"),
                fmt(r["dials"]),
                ",".join(f"{k}={v}" for k, v in r["exits"].items()),
                " ".join(
                    f"{pod}:{v[0]}/{v[1]}" if r["protocol"] in H2_PROTOCOLS else f"{pod}:{v[0]}/-"
                    for pod, v in r.get("pinned", {}).items()
                )
                or "-",
                " ".join(
                    f"{pod}:{fmt_s(a['last_new_connection'])}/{fmt_s(a['last_new_request'])}"
                    for pod, a in r["arrivals"].items()
                )
                or "-",
                " ".join(
                    f"{pod}:{fmt(a['late_connections'])}/{fmt(a['late_requests'])}"
                    for pod, a in r["arrivals"].items()
                )
                or "-",
                "/".join(f"{v:.1%}" for v in r["shares"].values()) or "-",
                str(r.get("window_conns", "-")),
                f"{r['duration_s']:g}s",
            ]
        )
    return h.table(head, rows)


def split(value, known, what, parser):
    items = [x for x in value.split(",") if x]
    for x in items:
        if x not in known:
            parser.error(f"unknown {what} {x!r} (known: {', '.join(known)})")
    return items


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="tests/proofs rolling_restart_l4",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runtimes", default=",".join(h.RUNTIMES), help="comma-separated example servers")
    p.add_argument(
        "--protocols", default="h2c,http1", help="h2c, http1, h2-tls, http1-tls (the last two: TLS pass-through)"
    )
    p.add_argument(
        "--pairs", default="", help="runtime:protocol pairs to run instead of --runtimes x --protocols"
    )
    p.add_argument("--modes", default="A,B", help="lameduck modes (A, B)")
    p.add_argument("--goaway-chances", default="0,0.02", help="comma-separated --goaway-chance values")
    p.add_argument("--control", default="h2c,http1", help="protocols of the control run: h2c, http1 ('' for none)")
    p.add_argument("--transports", type=int, default=4, help="independent client transports")
    p.add_argument("--workers", type=int, default=8, help="workers per transport")
    p.add_argument("--http1-conns", type=int, default=4, help="http1: connections per transport")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before the rollout")
    p.add_argument("--window", type=float, default=10.0, help="seconds of measured load after the rollout")
    p.add_argument("--exit-timeout", type=float, default=30.0, help="bound on a pod's exit after SIGTERM")
    p.add_argument("--no-build", action="store_true", help="use the existing release build")
    p.add_argument("--keep", action="store_true", help="keep every run's logs (failed runs always keep them)")
    p.add_argument("--json", help="also write all results as JSON to this file")
    args = p.parse_args(argv)

    runtimes = split(args.runtimes, h.RUNTIMES, "runtime", p)
    protocols = split(args.protocols, PROTOCOLS, "protocol", p)
    pairs = [(r, q) for r in runtimes for q in protocols]
    if args.pairs:
        pairs = [tuple(x.split(":", 1)) for x in args.pairs.split(",") if x]
        for r, q in pairs:
            split(r, h.RUNTIMES, "runtime", p)
            split(q, PROTOCOLS, "protocol", p)
    modes = split(args.modes, MODES, "mode", p)
    controls = split(args.control, CONTROL_PROTOCOLS, "control protocol", p)
    try:
        chances = [float(c) for c in args.goaway_chances.split(",") if c]
    except ValueError:
        p.error("--goaway-chances: comma-separated numbers")

    tools = ("haproxy", "go") + (("openssl",) if any(q in TLS_PROTOCOLS for _, q in pairs) else ())
    if not h.check_tools(*tools, hint="apt-get install -y haproxy golang-go golang-golang-x-net-dev openssl"):
        return 2
    if not args.no_build:
        for cmd in (["--examples"], ["-p", "lameduck-bench", "--bin", CONTROL]):
            if not h.cargo_build(*cmd):
                return 2
    release = os.path.join(h.target_dir(), "release")
    build_dir = tempfile.mkdtemp(prefix="h2client-")
    try:
        return run_all(args, release, build_dir, pairs, modes, chances, controls)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def run_all(args, release, build_dir, pairs, modes, chances, controls):
    client_bin = h.build_h2client(build_dir)
    if client_bin is None:
        return 2

    plan = []
    for runtime, proto in pairs:
        binary = os.path.join(release, "examples", runtime)
        if not os.path.isfile(binary):
            h.log(f"error: {binary} does not exist")
            return 2
        for mode in modes:
            for chance in chances:
                plan.append((binary, dict(runtime=runtime, protocol=proto, mode=mode, chance=chance, control=False)))
    for proto in controls:
        binary = os.path.join(release, CONTROL)
        plan.append((binary, dict(runtime=CONTROL, protocol=proto, mode="-", chance=0.0, control=True)))

    h.log(
        f"HAProxy mode tcp, balance roundrobin, no health checks, retries 0; endpoint removed "
        f"{ENDPOINT_REMOVAL_S:g}s after SIGTERM; --shutdown-delay {SHUTDOWN_DELAY}; client "
        f"{args.transports} transports x {args.workers} workers on / and /sleep?duration=20ms"
    )
    results = []
    for binary, case in plan:
        what = "control, axum's graceful shutdown" if case["control"] else f"mode {case['mode']}"
        h.log(f"\n==> {case['runtime']}, {case['protocol']}, {what}, goaway chance {case['chance']:g}")
        r = run_one(binary, case, args, client_bin)
        keep_logs = verdict(r) or args.keep
        h.log_run(r, keep_logs)
        if not keep_logs:
            shutil.rmtree(r["workdir"], ignore_errors=True)
        results.append(r)

    h.log("\n" + table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    bad = []
    for r in results:
        why = verdict(r)
        if why:
            bad.append(f"{r['runtime']} {r['protocol']} mode {r['mode']} chance {r['chance']:g}: {why}")
    if bad:
        h.log("\nFAILED:\n  " + "\n  ".join(bad))
        return 1
    control = "; the control lost requests" if any(r["control"] for r in results) else ""
    h.log(f"\nOK: 0 failed requests, exit 0 and no late connection through every rollout{control}.")
    return 0

