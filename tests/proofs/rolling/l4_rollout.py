"""One run of the rolling_restart_l4 proof: a Kubernetes-style rolling update of two pods
behind HAProxy in `mode tcp` (harness.TcpBalancer) under tests/proofs/l4/h2client, for one
example server, protocol, shutdown mode and goaway chance (or the control), and what it
measured: the client's report, the connections pinned to each old pod and their GOAWAYs,
each old pod's exit and arrivals, and each new pod's share of the traffic."""

import http.client
import json
import os
import signal
import tempfile
import time

import harness as h

PROTOCOLS = ["h2c", "http1", "h2-tls", "http1-tls"]
# The protocols whose pods serve TLS, and those over HTTP/2 (the GOAWAY checks).
TLS_PROTOCOLS = ("h2-tls", "http1-tls")
H2_PROTOCOLS = ("h2c", "h2-tls")
# The lame-duck window: the endpoint is removed 1 s after SIGTERM, as kube-proxy would
# (endpoint update after the pod turns Terminating); 3 s leaves a margin for a loaded machine.
ENDPOINT_REMOVAL_S = 1.0
SHUTDOWN_DELAY = "3s"


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


def shares(before, after, names):
    """Each server's share of the bytes sent to clients between two `bytes_out` readings."""
    sent = {n: after[0][n] - before[0][n] for n in names}
    conns = {n: int(after[1][n]["stot"]) - int(before[1][n]["stot"]) for n in names}
    total = sum(sent.values())
    return {n: (sent[n] / total if total else 0.0) for n in names}, sent, conns



def run_one(binary, case, args, client_bin, load=None):
    """One rolling update under load. `case`: runtime, protocol, mode, chance, control; and
    optionally `flags` (more of the pods' flags) and `session_log` (HAProxy logs each session
    in its log: harness.TcpBalancer). `load`: another load than tests/proofs/l4/h2client
    (`client_bin`), an object with `command(lb_port)` (its command line; it must print one
    JSON line on stdout after SIGINT) and `read(text, result, note)` (its output, into the
    result). The result has, besides the figures, `ports` ({pod: its port}), `terms` ({old
    pod: [SIGTERM, exit] as Unix seconds}) and `client_stop` (the load's SIGINT, Unix
    seconds)."""
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
        flags += case.get("flags", [])
        ready_path = "/readyz"
    pods = [h.Instance(binary, f"p{i}", h.free_port(), flags, workdir, tls=tls) for i in (1, 2, 3, 4)]
    lb = h.TcpBalancer(
        workdir, h.free_port(), [(p.name, p.port, p.name in ("p1", "p2")) for p in pods],
        session_log=case.get("session_log", False),
    )
    client = None
    events, problems = [], []
    result = dict(
        case, ok=None, failed=None, retries=None, dials=None, exits={}, arrivals={}, shares={}, workdir=workdir
    )
    result["tls"] = tls is not None
    result["terms"], result["ports"] = {}, {p.name: p.port for p in pods}
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
                load.command(lb.port) if load else [
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
        shape = "" if load else f" ({args.transports} transports x {args.workers} workers, {proto})"
        note(f"p1, p2 ready; client started{shape}")
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
            term_at, term_unix = time.monotonic(), time.time()
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
            result["terms"][old.name] = [term_unix, term_unix + exit_at - term_at]
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
                        f"{old.name} termination summary: last_new_connection={h.fmt_s(a['last_new_connection'])} "
                        f"last_new_request={h.fmt_s(a['last_new_request'])} late_connections={a['late_connections']} "
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

        result["client_stop"] = time.time()
        os.kill(client.pid, signal.SIGINT)
        code = h.reap(client, 60)
        with open(client_out, "r", errors="replace") as f:
            out = f.read().strip()
        if code != 0 or not out:
            raise RuntimeError(f"client exited {code}: {out}\n{h.tail(os.path.join(workdir, 'client.err'))}")
        if load:
            load.read(out, result, note)
            return result
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
        h.stop_behind(lb, pods, [client])
        result["events"], result["problems"] = events, problems
        result["duration_s"] = round(time.monotonic() - t0, 1)
    return result
