"""One run of the dead_peers proof: one server (an example server, or the Go reference), one
row (a mode, a transport, with or without WebSockets, or the unread responses), its silent
peers opened, SIGTERM, the exit awaited, and what it showed."""

import threading
import time

import harness as h
from dead_peers import peers as p

# How far past its bound the server may exit; how much later than Go a lameduck server may
# exit in a row.
EXIT_SLACK_S = 1.5
GO_MARGIN_S = 0.25
# How long after the exit the watch keeps looking (the server's sockets close with it).
WATCH_AFTER_EXIT_S = 0.3
INFLIGHT_JOIN_S = 10.0
# The kind of each silent connection in the silent-peers warning.
CUT_KIND = {
    "silent_h2": "http2_goaway",
    "silent_tls": "tls_handshake",
    "silent_ws": "websocket_close",
    "unread_http1": "unread_response",
    "unread_h2": "unread_response",
}


class Row:
    """A row of the table: the mode (A, B), the transport (h2c, tls), WebSockets or not, or
    the unread responses."""

    def __init__(self, mode, transport, ws=False, unread=False):
        self.mode, self.transport, self.ws, self.unread = mode, transport, ws, unread

    @property
    def label(self):
        if self.unread:
            return f"unread {self.mode} {self.transport}"
        return f"{self.mode} {self.transport}" + (" +ws" if self.ws else "")

    @property
    def slug(self):
        return self.label.replace(" +", "-").replace(" ", "-")

    def bound(self, args):
        """When, after SIGTERM, the server must have exited."""
        if self.unread:
            return args.delay + args.request_timeout + EXIT_SLACK_S
        return args.delay + (args.grace if self.ws else 0) + EXIT_SLACK_S


class Target:
    """A server under test: its name, binary, and what it serves (`grpc`: gRPC and HTTP/2 only;
    `go`: the Go reference, without WebSockets, in kube-apiserver's default mode alone)."""

    def __init__(self, name, binary, grpc=False, go=False):
        self.name, self.binary, self.grpc, self.go = name, binary, grpc, go

    def runs(self, row):
        """Whether this server runs `row` (gRPC and Go have no WebSockets, Go has mode A only)."""
        return not (row.ws and (self.grpc or self.go)) and not (self.go and row.mode != "A")


def plan(target, row, args):
    """{peer kind: how many} for one run."""
    if row.unread:
        return {"unread_http1": 1, "unread_h2": 1}
    counts = {"idle_http1": 0 if target.grpc else args.http1, "silent_h2": args.h2}
    counts["silent_ws"] = args.streams if row.ws else 0
    counts["silent_tls"] = args.tls_peers if row.transport == "tls" else 0
    return counts


def inflight_protocols(target, args):
    """The protocols of the requests in flight at the signal: gRPC calls on grpc_server, else
    half HTTP/1.1 and half HTTP/2."""
    if target.grpc:
        return ["grpc"] * args.inflight
    return ["http1"] * (args.inflight - args.inflight // 2) + ["h2"] * (args.inflight // 2)


def server_flags(target, run, args):
    """The server's flags: the run's shutdown flags and the request timeout; Go takes the
    delay and the request timeout only."""
    delay = ["--shutdown-delay", h.fmt_ms(int(round(args.delay * 1000)))]
    timeout = ["--request-timeout", h.fmt_ms(int(round(args.request_timeout * 1000)))]
    run.flags[:] = (delay if target.go else run.flags) + timeout
    return run.flags


def open_peers(target, row, d, counts, args, note):
    """Opens the run's connections (unread responses, or the silent ones: the idle HTTP/1.1
    first, the unfinished TLS handshakes last); the Peers."""
    openers = [
        ("unread_http1", "unread HTTP/1.1 responses", lambda i: p.unread_http1(d, i)),
        ("unread_h2", "unread HTTP/2 responses", lambda i: p.unread_h2(d, i)),
        ("idle_http1", "idle HTTP/1.1 keep-alive connections", lambda i: p.idle_http1(d, i)),
        ("silent_h2", "silent HTTP/2 connections", lambda i: p.silent_h2(d, i, target.grpc)),
        ("silent_ws", "silent WebSockets", lambda i: p.silent_ws(d, i)),
    ]
    if counts.get("silent_tls"):
        hello = p.client_hello_part(d.tls)
        openers.append(("silent_tls", "unfinished TLS handshakes", lambda i: p.silent_tls(d, i, hello)))
    out = []
    for kind, what, open_one in openers:
        n = counts.get(kind, 0)
        if n:
            out += p.open_many(what, n, open_one)
            note(f"{n} {what} open")
    return out


def run_row(target, row, args, tls):
    """One run of `target` in `row`: the result record."""
    name = target.name
    run = h.DrainRun(f"dead-peers-{name}-{row.slug}", row.mode, args, runtime=name, row=row.label,
                     go=target.go)
    result, note = run.result, run.note
    flags = server_flags(target, run, args)
    counts = plan(target, row, args)
    result["peers"] = counts
    peers, inflight = [], []
    try:
        inst = run.start_server(target.binary, name, flags, tls=tls if row.transport == "tls" else None, port=0)
        d = p.Dialer(inst.port, inst.tls)
        peers = open_peers(target, row, d, counts, args, note)
        if row.unread:
            time.sleep(args.lead)
        else:
            go = threading.Event()
            duration = h.fmt_ms(int(round((args.delay + args.lead) * 1000)))
            inflight = [p.InFlight(d, proto, duration, go) for proto in inflight_protocols(target, args)]
            go.set()
            note(f"{len(inflight)} requests sent ({duration} each)")
            time.sleep(args.lead)
        run.check_running()
        watch = p.CloseWatch(peers)
        watch.sweep()
        before = sum(1 for x in peers if x.closed_at is not None)
        if before:
            note(f"{before} connections already ended by the server before SIGTERM")
        watch.start()
        run.terminate(max(row.bound(args), args.exit_timeout - 10))
        for f in inflight:
            f.join(max(0.5, run.t_term + INFLIGHT_JOIN_S - time.monotonic()))
        time.sleep(WATCH_AFTER_EXIT_S)
        watch.stop()
    except Exception as e:  # noqa: BLE001 (a setup problem, or a failed run with the logs kept)
        run.record(e)
    finally:
        for x in peers:
            x.close()
        for f in inflight:
            f.join(0.5)
        run.kill_server()
    if run.t_term is not None:
        analyse(target, row, result, peers, inflight, run.inst, run.t_term, run.exit_at, run.code, args)
    return run.end(args.keep)


def analyse(target, row, result, peers, inflight, inst, t_term, exit_at, code, args):
    """The figures of one run and its failed assertions (for Go: its problems, which make its
    row `-` rather than fail the proof)."""
    problems = [] if target.go else result["failures"]
    result["exit_code"] = code
    result["exit_s"] = round(exit_at - t_term, 3) if code is not None else None
    result["bound_s"] = row.bound(args)
    if target.go:
        result["go_problems"] = problems
        if code is None:
            problems.append("did not exit")
        elif code != 0:
            problems.append(f"exited {code}")
    else:
        h.check_server_exit(code, exit_at, t_term, row.bound(args), problems)
    bad = [f for f in inflight if not f.ok]
    result["inflight"] = {"sent": len(inflight), "ok": len(inflight) - len(bad)}
    if bad:
        problems.append(
            f"{len(bad)} of {len(inflight)} requests in flight at SIGTERM failed (first: {bad[0].proto}: {bad[0].error})"
        )
    result["closes"] = closes(peers, t_term)
    if row.unread:
        check_unread(peers, t_term, args, problems)
    if not target.go:
        check_summary(result, peers, inst, t_term, problems)
    if problems and not target.go:
        result["server_log"] = h.server_log_lines(inst.stderr_path)


def closes(peers, t_term):
    """Per kind: how many, how many the server ended before SIGTERM, and the first and last
    end after it (seconds after SIGTERM; None when none ended)."""
    out = {}
    for kind in dict.fromkeys(x.kind for x in peers):
        mine = [x for x in peers if x.kind == kind]
        after = sorted(x.closed_at - t_term for x in mine if x.closed_at is not None and x.closed_at >= t_term)
        out[kind] = {
            "n": len(mine),
            "before_sigterm": sum(1 for x in mine if x.closed_at is not None and x.closed_at < t_term),
            "open_at_exit": sum(1 for x in mine if x.closed_at is None),
            "first_s": round(after[0], 3) if after else None,
            "last_s": round(after[-1], 3) if after else None,
        }
    return out


def check_unread(peers, t_term, args, problems):
    """Each unread response's connection ended about a request timeout after the server
    stopped accepting: delay + request timeout after SIGTERM, within EXIT_SLACK_S."""
    want = args.delay + args.request_timeout
    for x in peers:
        if x.closed_at is None:
            problems.append(f"{x.kind}: the connection was never ended")
            continue
        at = x.closed_at - t_term
        if abs(at - want) > EXIT_SLACK_S:
            problems.append(f"{x.kind}: the connection ended +{at:.3f}s after SIGTERM, want {want:g}s +- {EXIT_SLACK_S:g}s")


def check_summary(result, peers, inst, t_term, problems):
    """The summary's `connections_cut` counts at least the silent connections still open at
    SIGTERM, and a WARN line names each of their kinds."""
    silent = [x for x in peers if x.kind in CUT_KIND and (x.closed_at is None or x.closed_at >= t_term)]
    want_kinds = sorted({CUT_KIND[x.kind] for x in silent})
    result["cut_want"] = len(silent)
    summary = h.termination_summary(inst.stderr_path)
    result["summary"] = summary
    cut, last_closed = h.connections_cut(summary)
    result["connections_cut"], result["last_connection_closed_s"] = cut, last_closed
    warning = h.silent_peers_warning(inst.stderr_path)
    result["silent_peers_warning"] = warning
    if summary is None:
        problems.append("the server logged no termination summary")
    elif cut is None:
        problems.append("the summary has no connections_cut field")
    elif cut < len(silent):
        problems.append(f"summary connections_cut={cut}, want at least {len(silent)} (the silent connections)")
    if not silent:
        return
    if warning is None:
        problems.append("no `the exit waited on silent peers` warning")
        return
    missing = [k for k in want_kinds if not warning.get(k)]
    if missing:
        problems.append(f"the silent-peers warning does not name {', '.join(missing)}: {warning}")
