"""What the rolling_restart_l4 proof concludes of a run (`verdict`: why it failed, or None)
and the table of every run."""

import harness as h
from rolling.l4_rollout import H2_PROTOCOLS

# A share within 25% of even passes (two pods: between 37.5% and 62.5%).
SHARE_TOLERANCE = 0.25
# With a goaway chance, each of the client's connections must have been replaced this many times
# on average during the window (a chance of 0.02 replaces one every ~50 requests: hundreds).
REPLACED_PER_CONN = 10


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
                f"{pod}: last_new_request={h.fmt_s(a['last_new_request'])}, not after the endpoint's removal "
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
                    f"{pod}:{h.fmt_s(a['last_new_connection'])}/{h.fmt_s(a['last_new_request'])}"
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
