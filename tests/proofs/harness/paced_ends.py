"""The ends of long-running streams at shutdown: the pacing the server should follow and the
checks of when the ends came.

An example server given `--shutdown-delay D --shutdown-watch-termination-grace-period G` stops
accepting one shutdown delay after SIGTERM, then ends the long-running requests still open
(watches, Server-Sent Events streams, server-streaming gRPC calls) one at a time, one every
`pacing_interval(streams, G)` seconds, min(G / streams, 1 / min-watch-drain-qps) (the floor
of the drain rate being 200 ends a second unless `--min-watch-drain-qps` says otherwise), and
logs `[graceful-termination] draining in-flight requests normal=N long_running=N
pacing_interval=Some(5ms)` as the drain begins.

A proof that opens such streams and sends SIGTERM takes each stream's end in seconds after the
signal and checks here that none came before the shutdown delay was over, all within
D + G + END_SLACK_S, spread over the server's slots (`check_ends`) and, where it asks, in no
burst (`check_bursts`); then that the server exited 0 within the same bound
(`check_server_exit`) and that its termination summary counts every stream ended and none
remaining (`check_streams_summary`).

The proofs share their command line too (`add_drain_arguments`, `drain_modes`: the modes, the
streams, the grace period and the shutdown delay), a run's record (`DrainRun`, a harness Run
with the mode's flags) and what their logs say of the drain (`drain_figures`).
"""

import re

from harness.cli import add_run_options
from harness.processes import fmt_ms, log
from harness.runs import Run
from harness.summary import termination_summary

# The lameduck modes: the server's flags for each, and its name. A, the default: the listener
# closes when the server stops accepting; B: new requests get 429 with Retry-After until the
# drain ends.
MODE_FLAGS = {"A": [], "B": ["--shutdown-send-retry-after"]}
MODE_NAMES = {"A": "close-listener", "B": "retry-after"}
# The library's default floor of the drain rate (ends a second, --min-watch-drain-qps), as
# kube-apiserver's.
DEFAULT_MIN_WATCH_DRAIN_QPS = 200
# The bound on the streams' ends and the server's exit: shutdown delay + grace + END_SLACK_S.
END_SLACK_S = 2.0
# An end this much before the shutdown delay is over counts as early (the client's clock and
# the server's differ by a few milliseconds).
EARLY_TOLERANCE_S = 0.05
# The ends' spread must be at least SPREAD_FRACTION x (streams - 1) x the pacing interval. The
# server's slots run from the first end to the last, (streams - 1) intervals (0.995 s for 200
# streams at 5 ms). A client sees each end a little late, more so on a busy machine, and the
# spread it measures shrinks by as much as the first end was seen later than the last: 80% of
# the slots' span leaves that room, and still fails a drain paced notably faster than the
# formula says or one that ends the streams in a few bursts. The same bound serves every
# client (one selector thread reading every connection, or a thread for each gRPC call): what
# it allows for is the client's lateness, which does not depend on the protocol.
SPREAD_FRACTION = 0.8
# No window of this length may hold more than half of the ends (250 of 500). With few streams
# a window holds many slots' worth of them (20 at 5 ms apart): there the bound is twice the
# window's slots, so that only ends coming in a burst fail.
BURST_WINDOW_S = 0.1

DRAIN_LINE = re.compile(
    r"\[graceful-termination\] draining in-flight requests normal=(\d+) long_running=(\d+) "
    r"pacing_interval=(\S+)"
)
DURATION_DEBUG = re.compile(r"^([0-9.]+)(ns|µs|us|ms|s)$")
UNIT_S = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


# --- the pacing ----------------------------------------------------------------------------------

def pacing_interval(count, grace_s, min_qps=DEFAULT_MIN_WATCH_DRAIN_QPS):
    """The library's interval between two ends, in seconds: 1 / max(count / grace, min_qps),
    in whole nanoseconds as it computes it (never 0, never more than the grace period)."""
    grace_ns = int(round(grace_s * 1e9))
    by_count = grace_ns // count if count > 0 else 2**64 - 1
    by_floor = 10**9 // min_qps if min_qps > 0 else 2**64 - 1
    return min(max(min(by_count, by_floor), 1), max(grace_ns, 1)) / 1e9


def ends_bound(delay_s, grace_s):
    """When, after SIGTERM, every stream has ended and the server has exited at the latest."""
    return delay_s + grace_s + END_SLACK_S


def shutdown_flags(delay_s, grace_s, mode):
    """The server's flags for a shutdown delay and a grace period given in seconds, in `mode`
    (see MODE_FLAGS)."""
    return [
        "--shutdown-delay", fmt_ms(int(round(delay_s * 1000))),
        "--shutdown-watch-termination-grace-period", fmt_ms(int(round(grace_s * 1000))),
        *MODE_FLAGS[mode],
    ]


# --- what the server logged ----------------------------------------------------------------------

def parse_debug_duration(text):
    """Rust's Debug of an `Option<Duration>` (`Some(5ms)`, `Some(1.5s)`, `None`) in seconds,
    or None."""
    m = re.match(r"^Some\((.*)\)$", text)
    if not m:
        return None
    d = DURATION_DEBUG.match(m.group(1))
    return float(d.group(1)) * UNIT_S[d.group(2)] if d else None


def drain_line(stderr_path):
    """The `draining in-flight requests` line's figures, {"normal", "long_running",
    "pacing_interval" (as logged), "pacing_interval_s" (None when it does not parse)}, or None
    without one."""
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            m = DRAIN_LINE.search(line)
            if m:
                return {
                    "normal": int(m.group(1)),
                    "long_running": int(m.group(2)),
                    "pacing_interval": m.group(3),
                    "pacing_interval_s": parse_debug_duration(m.group(3)),
                }
    return None


def server_log_lines(stderr_path, n=40):
    """The server's `[graceful-termination]` lines and errors (the last `n`)."""
    out = []
    with open(stderr_path, "r", errors="replace") as f:
        for line in f:
            if "graceful-termination" in line or "ERROR" in line or "WARN" in line:
                out.append(line.rstrip("\n"))
    return out[-n:]


# --- the checks ----------------------------------------------------------------------------------

def quantile(sorted_values, q):
    """The `q` quantile of `sorted_values` (the nearest rank), or None when there are none."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))]


def want_spread(n, interval_s):
    """The least spread of `n` ends accepted (see SPREAD_FRACTION)."""
    return SPREAD_FRACTION * max(n - 1, 0) * interval_s


def check_ends(ends, n, delay_s, grace_s, interval_s, failures):
    """The figures of `n` streams' ends, `ends` being the times of those that ended, in seconds
    after SIGTERM, sorted; appends to `failures` the ends that came before the shutdown delay
    was over, those that came after `ends_bound`, and a spread short of `want_spread` at the
    pacing interval `interval_s`."""
    bound_s = ends_bound(delay_s, grace_s)
    spread = round(ends[-1] - ends[0], 4) if ends else None
    want = want_spread(n, interval_s)
    figures = {
        "ends_s": {
            "first": ends[0] if ends else None,
            "p10": quantile(ends, 0.1),
            "p50": quantile(ends, 0.5),
            "p90": quantile(ends, 0.9),
            "last": ends[-1] if ends else None,
        },
        "spread_s": spread,
        "spread_want_s": round(want, 4),
        "pacing_interval_s": interval_s,
        # How far each end was from its slot, if the k-th end is the k-th slot from the first.
        "max_slot_deviation_s": (
            round(max(abs(e - (ends[0] + k * interval_s)) for k, e in enumerate(ends)), 4) if ends else None
        ),
        # Ends per 0.5 s after SIGTERM: the shape of the drain.
        "ends_per_half_second": ends_per_half_second(ends),
    }
    if not ends:
        return figures
    early = [e for e in ends if e < delay_s - EARLY_TOLERANCE_S]
    if early:
        failures.append(
            f"{len(early)} streams ended before the {delay_s:g}s shutdown delay was over "
            f"(first +{ends[0]:.3f}s after SIGTERM)"
        )
    late = [e for e in ends if e > bound_s]
    if late:
        failures.append(
            f"{len(late)} streams ended later than delay + grace + {END_SLACK_S:g}s = {bound_s:g}s "
            f"after SIGTERM (last +{ends[-1]:.3f}s)"
        )
    if spread < want:
        failures.append(
            f"the ends were not paced: spread {spread:.3f}s between the first and the last, want at "
            f"least {SPREAD_FRACTION:g} x ({n} - 1) x {interval_s * 1000:g}ms = {want:.3f}s"
        )
    return figures


def ends_per_half_second(ends):
    """{"0.0": count, "0.5": count, ...}: how many of `ends` came in each half second."""
    buckets = {}
    for e in ends:
        b = int(e // 0.5)
        buckets[b] = buckets.get(b, 0) + 1
    return {f"{b * 0.5:.1f}": c for b, c in sorted(buckets.items())}


def max_in_window(sorted_times, window):
    """The most of `sorted_times` in any half-open window [t, t + window)."""
    best, j = 0, 0
    for i, t in enumerate(sorted_times):
        while j < len(sorted_times) and sorted_times[j] < t + window:
            j += 1
        best = max(best, j - i)
    return best


def window_limit(n, interval_s):
    """The most of `n` ends accepted in one window (see BURST_WINDOW_S)."""
    return max(n / 2, 2 * BURST_WINDOW_S / interval_s)


def check_bursts(ends, n, interval_s, failures):
    """(the most `ends` in one BURST_WINDOW_S window, the most accepted); appends to `failures`
    a window that holds more."""
    most, limit = max_in_window(ends, BURST_WINDOW_S), window_limit(n, interval_s)
    if ends and most > limit:
        failures.append(
            f"{most} of {len(ends)} ends within {BURST_WINDOW_S * 1000:g}ms, want at most {limit:g}"
        )
    return most, limit


def check_server_exit(code, exit_at, t_term, bound_s, failures):
    """The server's exit in seconds after SIGTERM (None when it did not exit: the caller has
    said so); appends to `failures` a status other than 0 and an exit later than `bound_s`."""
    if code is None:
        return None
    if code != 0:
        failures.append(f"the server exited {code}, want 0")
    if exit_at - t_term > bound_s:
        failures.append(f"the server exited +{exit_at - t_term:.3f}s after SIGTERM, later than {bound_s:g}s")
    return round(exit_at - t_term, 4)


def check_streams_summary(stderr_path, n, failures, **more):
    """The server's termination summary ({name: text}, or None); appends to `failures` its
    absence, and each field that differs from streams_ended=`n` streams_remaining=0 and the
    fields of `more` (e.g. cause="signal")."""
    summary = termination_summary(stderr_path) if stderr_path else None
    if summary is None:
        failures.append("the server logged no termination summary")
        return None
    for field, value in {**more, "streams_ended": str(n), "streams_remaining": "0"}.items():
        if summary.get(field) != value:
            failures.append(f"summary {field}={summary.get(field)}, want {value}")
    return summary


# --- one run ------------------------------------------------------------------------------------

class DrainRun(Run):
    """One run of a proof in one mode: a harness Run whose record also holds the mode and the
    server's flags (`shutdown_flags` of the proof's delay and grace)."""

    def __init__(self, prefix, mode, args, **fields):
        flags = shutdown_flags(args.delay, args.grace, mode)
        super().__init__(prefix, **fields, mode=mode, mode_name=MODE_NAMES[mode], flags=flags)
        self.flags = flags


# --- report --------------------------------------------------------------------------------------

def drain_figures(figures):
    """What `harness.log_result` logs of a drain run that got as far as SIGTERM: the lines
    `figures(r)` logs, then the ends per half second, the server's drain line and its
    summary."""

    def log_figures(r):
        if "ends_s" in r:
            figures(r)
            _log_drain(r)

    return log_figures


def _log_drain(r):
    """Logs the ends per half second, the server's drain line (with the pacing interval the
    ends were measured against) and its termination summary."""
    log("    ends per 0.5 s after SIGTERM: " + ", ".join(f"+{b}s: {c}" for b, c in r["ends_per_half_second"].items()))
    d = r.get("drain")
    if d:
        logged = d["pacing_interval"]
        if d["pacing_interval_s"] is not None:
            logged = f"{d['pacing_interval_s'] * 1000:g}ms"
        log(
            f"    server's drain: normal={d['normal']} long_running={d['long_running']} "
            f"pacing_interval={logged} (expected {r['pacing_interval_s'] * 1000:g}ms)"
        )
    if r.get("summary"):
        log("    summary: " + " ".join(f"{k}={v}" for k, v in r["summary"].items()))


# --- the command line and the end ----------------------------------------------------------------

def add_drain_arguments(p, streams, what):
    """Adds to the parser `p` the options both proofs take: --modes, --streams (`streams` by
    default, each `what`), --grace, --delay, --no-build, --keep and --json."""
    p.add_argument("--modes", default="A,B", help="lameduck modes to run (A: close listener, B: retry-after)")
    p.add_argument("--streams", type=int, default=streams, help=f"{what} open at SIGTERM")
    p.add_argument("--grace", type=float, default=10.0,
                   help="--shutdown-watch-termination-grace-period, in seconds")
    p.add_argument("--delay", type=float, default=1.0, help="--shutdown-delay, in seconds")
    add_run_options(p)


def drain_modes(p, args):
    """The modes to run, from the options of `add_drain_arguments` (through `p.error` when one
    of them is out of range)."""
    if args.streams < 1:
        p.error("--streams must be at least 1")
    if args.grace <= 0:
        p.error("--grace must be positive (0 would not wait for the streams at all)")
    if args.delay < 0:
        p.error("--delay must be 0 or more")
    modes = [m for m in args.modes.split(",") if m]
    if not modes:
        p.error("--modes: at least one mode")
    for m in modes:
        if m not in MODE_FLAGS:
            p.error(f"unknown mode {m!r} (A or B)")
    return modes
