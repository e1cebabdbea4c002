"""What an example server logged of its termination: the `termination summary` line's fields,
the arrival warnings (`late connections`, `request before ready`) and the silent-peers warning
(`the exit waited on silent peers`), read from its stderr."""

import re

SUMMARY = re.compile(r"\[graceful-termination\] termination summary: (.*)$")
LATE_WARNING = "[graceful-termination] late connections:"
BEFORE_READY_WARNING = "[graceful-termination] request before ready"
SILENT_PEERS_WARNING = re.compile(r"\[graceful-termination\] the exit waited on silent peers (.*)$")
# The kinds of connection the silent-peers warning counts, each as ` KIND=COUNT` when nonzero.
SILENT_PEER_KINDS = (
    "tls_handshake", "request_head", "http2_goaway", "unread_response", "websocket_close",
    "max_connection_age",
)


def termination_summary(stderr_path):
    """The last summary line's fields ({name: text}) in `stderr_path`, or None without one."""
    fields = None
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            m = SUMMARY.search(line.rstrip("\n"))
            if m:
                fields = dict(tok.split("=", 1) for tok in m.group(1).split() if "=" in tok)
    return fields


def connections_cut(summary):
    """(`connections_cut` as an int, `last_connection_closed` in seconds) of a summary's fields;
    each None when the line has no such field (a server from before them) or says `-`."""
    summary = summary or {}
    cut = summary.get("connections_cut")
    return (int(cut) if cut not in (None, "-") else None), seconds(summary.get("last_connection_closed"))


def silent_peers_warning(stderr_path):
    """The last silent-peers warning's counts ({"connections_cut": N, KIND: COUNT, ...}, as
    ints) in `stderr_path`, or None without one."""
    counts = None
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            m = SILENT_PEERS_WARNING.search(line.rstrip("\n"))
            if m:
                tokens = (tok.split("=", 1) for tok in m.group(1).split() if "=" in tok)
                counts = {k: int(v) for k, v in tokens if v.isdigit()}
    return counts


def seconds(text):
    """A summary duration (`1.900s`) in seconds; None for `-`."""
    if text is None or text == "-":
        return None
    return float(text.rstrip("s"))


def warning_counts(stderr_path):
    """(late-connection warnings, request-before-ready warnings) in `stderr_path`."""
    late = before = 0
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            late += LATE_WARNING in line
            before += BEFORE_READY_WARNING in line
    return late, before
