"""What the dead_peers proof prints: each run's figures, the comparison with Go, and the table
of exit times (rows x servers)."""

import harness as h
from dead_peers.runs import GO_MARGIN_S

GO = "goserver"
KIND_NAMES = {
    "idle_http1": "idle HTTP/1.1",
    "silent_h2": "silent HTTP/2",
    "silent_ws": "silent WebSockets",
    "silent_tls": "unfinished TLS handshakes",
    "unread_http1": "unread HTTP/1.1 response",
    "unread_h2": "unread HTTP/2 response",
}


def log_figures(r):
    """Logs one run's figures (see harness.log_result): its exit, its requests in flight, when the server ended each
    kind of connection, and (lameduck) what its summary and warning counted."""
    if "closes" not in r:
        return
    inflight = r.get("inflight") or {}
    line = f"    exit {r.get('exit_code')} +{h.fmt_s(r.get('exit_s'))} after SIGTERM"
    line += " (Go: no bound)" if r.get("go") else f" (bound {r['bound_s']:g}s)"
    if inflight.get("sent"):
        line += f"; requests in flight: {inflight['ok']}/{inflight['sent']} ok"
    h.log(line)
    for kind, c in r["closes"].items():
        extra = f", {c['before_sigterm']} before SIGTERM" if c["before_sigterm"] else ""
        extra += f", {c['open_at_exit']} never" if c["open_at_exit"] else ""
        h.log(
            f"    {c['n']} {KIND_NAMES.get(kind, kind)}: ended +{h.fmt_s(c['first_s'])} .. "
            f"+{h.fmt_s(c['last_s'])} after SIGTERM{extra}"
        )
    if not r.get("go"):
        h.log(
            f"    summary: connections_cut={r.get('connections_cut')} (want >= {r.get('cut_want')}) "
            f"last_connection_closed={h.fmt_s(r.get('last_connection_closed_s'))}; "
            f"warning: {r.get('silent_peers_warning')}"
        )
    for problem in r.get("go_problems") or []:
        h.log(f"    Go: {problem} (its row shows -)")


def go_value(go_results, row):
    """Go's exit time in `row`, or None when Go did not run it (WebSockets, mode B) or its run
    failed (a request lost, no exit)."""
    for r in go_results:
        if r["row"] == row.label:
            if r.get("go_problems") or r.get("setup_error") or r.get("exit_s") is None:
                return None
            return r["exit_s"]
    return None


def compare_with_go(results, go_results, rows):
    """Adds to each lameduck run its failure to exit within GO_MARGIN_S of Go in the same row."""
    by_label = {row.label: row for row in rows}
    for r in results:
        row = by_label[r["row"]]
        go = go_value(go_results, row)
        r["go_exit_s"] = go
        if go is not None and r.get("exit_s") is not None and r["exit_s"] > go + GO_MARGIN_S:
            r["failures"].append(
                f"exited +{r['exit_s']:.3f}s after SIGTERM, later than Go's net/http (+{go:.3f}s) + {GO_MARGIN_S:g}s"
            )


def table(results, go_results, rows, servers, markdown=False):
    """Seconds from SIGTERM to exit, a row per row, a column per server and Go's; `!` marks a
    run that failed, `-` a run not made (or Go's, when it could not do the row)."""
    cells = {(r["row"], r["runtime"]): r for r in results}
    head = ["row", "bound", *[s.replace("_server", "") for s in servers], "go"]
    out = []
    for row in rows:
        line = [row.label, f"{row.bound_s:g}"]
        for s in servers:
            r = cells.get((row.label, s))
            if r is None:
                line.append("-")
            elif r.get("exit_s") is None:
                line.append("none!" if r["failures"] else "setup!")
            else:
                line.append(f"{r['exit_s']:.2f}" + ("!" if r["failures"] else ""))
        go = go_value(go_results, row)
        line.append("-" if go is None else f"{go:.2f}")
        out.append(line)
    return h.table(head, out, markdown=markdown)
