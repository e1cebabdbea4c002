"""What an example server logged of its termination: the `termination summary` line's fields
and the arrival warnings (`late connections`, `request before ready`), read from its stderr."""

import re

SUMMARY = re.compile(r"\[graceful-termination\] termination summary: (.*)$")
LATE_WARNING = "[graceful-termination] late connections:"
BEFORE_READY_WARNING = "[graceful-termination] request before ready"


def termination_summary(stderr_path):
    """The last summary line's fields ({name: text}) in `stderr_path`, or None without one."""
    fields = None
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            m = SUMMARY.search(line.rstrip("\n"))
            if m:
                fields = dict(tok.split("=", 1) for tok in m.group(1).split() if "=" in tok)
    return fields


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
