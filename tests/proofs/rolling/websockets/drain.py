"""The websockets proof's drain scenario: clients of the websockets library echoing through
the shutdown delay and silent raw clients, all open at SIGTERM; each must get Close 1001 at
its paced turn, the library's clients completing the closing handshake, the silent ones cut
just before the grace period ends (see the proof's description)."""

import collections
import time

import harness as h
from harness.ws_frames import GOING_AWAY, GOING_AWAY_REASON, OP_CLOSE, parse_close
from rolling.websockets.library import CONNECT_TIMEOUT_S, NormalClient, close_to_end_s, normal_checks
from rolling.websockets.raw import ClientError, open_raw, raw_echo
from rolling.websockets.server_run import FIRST_ECHO_TIMEOUT_S, WsRun

# A client's last echo comes at most its echo interval and this much before its Close.
ECHO_GAP_SLACK_S = 0.5
# A silent client's connection ends no later than delay + grace + this, and no sooner than
# delay + grace - SILENT_HELD_S (the server waits for the answer until 100 ms before the end
# of the grace period).
SILENT_CUT_SLACK_S = 0.5
SILENT_HELD_S = 1.0
# The least spread of the Closes asserted on its own, when the slots span at least
# MIN_SPREAD_SPAN_S.
MIN_SPREAD_S = 2.0
MIN_SPREAD_SPAN_S = 2.5


class SilentClient:
    """One raw client that never answers the server's Close."""

    def __init__(self, index):
        self.index = index
        self.p = None
        self.task = None
        self.error = None
        self.ready_at = None
        self.after = 0  # frames before the silence
        self.gave_up = False  # still open when the proof gave up on it

    @property
    def finished(self):
        return self.error is not None or (self.p is not None and self.p.ended_at is not None)


async def silent_client(c, port, sem):
    try:
        async with sem:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            c.p = await open_raw(port, deadline)
            await raw_echo(c.p, f"silent {c.index}", deadline)
        c.after = len(c.p.frames)
        c.ready_at = time.monotonic()
    except ClientError as e:
        c.error = str(e)


def run_drain(binary, runtime, mode, args):
    run = WsRun(binary, runtime, mode, args, "drain")
    normals = [NormalClient(i) for i in range(args.streams)]
    silents = [SilentClient(i) for i in range(args.silent)]
    run.result.update(sockets=args.streams, silent=args.silent)
    run.drive(normals, silents, silent_client, lambda: drive_drain(run, normals, silents))
    if run.t_term is not None:
        analyse_drain(run, normals, silents)
    return run.finish()


async def drive_drain(run, normals, silents):
    """Once every socket has echoed, SIGTERM; then every client's end, bounded."""
    args = run.args
    ready = lambda: (  # noqa: E731
        sum(1 for c in normals if c.echoes) + sum(1 for c in silents if c.ready_at is not None)
    )
    settled = lambda: (  # noqa: E731
        all(c.echoes or c.done for c in normals) and all(c.ready_at is not None or c.error for c in silents)
    )
    await run.wait_clients(settled, time.monotonic() + FIRST_ECHO_TIMEOUT_S)
    n = len(normals) + len(silents)
    got = ready()
    run.note(f"{got} of {n} sockets open and echoed ({len(normals)} of the library, {len(silents)} silent)")
    if got == 0:
        raise h.SetupError("no socket opened: " + next((c.error for c in normals + silents if c.error), "?"))
    if got < n:
        run.failures.append(
            f"only {got} of {n} sockets opened and echoed within {FIRST_ECHO_TIMEOUT_S}s; SIGTERM sent anyway"
        )
    run.check_running()
    run.sigterm()
    finished = lambda: all(c.done for c in normals) and all(c.finished for c in silents)  # noqa: E731
    bound_s = h.ends_bound(args.delay, args.grace)
    await run.wait_clients(finished, run.t_term + bound_s + 5)
    run.note(
        f"{sum(1 for c in normals if c.done)} of {len(normals)} clients of the library and "
        f"{sum(1 for c in silents if c.finished)} of {len(silents)} silent clients ended"
    )


def analyse_drain(run, normals, silents):
    """The figures of one drain run and its failed assertions."""
    r, failures, args, t_term = run.result, run.failures, run.args, run.t_term
    delay_s, grace_s = args.delay, args.grace
    n = len(normals) + len(silents)
    rel = lambda t: None if t is None else round(t - t_term, 4)  # noqa: E731

    problems = h.Problems()
    records, gaps = [], []
    for c in normals:
        add = problems.adder("socket", c.index)
        rec, ok = normal_checks(c, t_term, add, close_to_end_s(run.runtime))
        if c.opened_at is not None and c.done:
            if rec["echoes_after"] < 1:
                add("no echo after SIGTERM", f"{rec['echoes_before']} echoes before it")
                ok = False
            if c.close_frame_at is not None and c.echoes:
                gap = c.close_frame_at - c.echoes[-1]
                gaps.append(gap)
                if gap > args.echo_interval + ECHO_GAP_SLACK_S:
                    add(f"the echoes stopped more than {args.echo_interval + ECHO_GAP_SLACK_S:g}s before the Close",
                        f"last echo +{rec['last_echo_s']}s, Close +{rec['close_s']}s after SIGTERM")
                    ok = False
        rec["ok"] = ok
        records.append(rec)
    r["ok"] = sum(1 for x in records if x["ok"])
    r["problems"] = problems.report(len(normals), "clients of the library", failures)
    after = [x["echoes_after"] for x in records if x["error"] is None]
    r["echoes_after_min"] = min(after) if after else None
    r["echoes_after_avg"] = round(sum(after) / len(after), 2) if after else None
    r["echo_gap_max_s"] = round(max(gaps), 4) if gaps else None
    ends_after_close = [
        x["end_s"] - x["close_s"] for x in records if x["end_s"] is not None and x["close_s"] is not None
    ]
    r["close_to_end_max_s"] = round(max(ends_after_close), 4) if ends_after_close else None

    # The silent clients: Close 1001, then the connection held until just before the grace
    # period's end, and cut.
    sp = h.Problems()
    cut_latest = delay_s + grace_s + SILENT_CUT_SLACK_S
    cut_earliest = delay_s + grace_s - SILENT_HELD_S
    silent_records = []
    for c in silents:
        add = sp.adder("silent client", c.index)
        ok = True

        def fail(kind, example):
            nonlocal ok
            ok = False
            add(kind, example)

        close = c.p.close_frame(c.after) if c.p is not None and c.ready_at is not None else None
        code, reason = parse_close(close.payload) if close else (None, None)
        end_at = c.p.ended_at if c.p is not None and not c.gave_up else None
        others = [f.describe() for f in c.p.frames[c.after:] if f.opcode != OP_CLOSE] if c.p is not None else []
        if c.error:
            fail(f"error: {c.error.split(':')[0]}", c.error)
        elif close is None:
            fail("no Close frame", f"connection {c.p.end_how or 'still open'} +{rel(end_at)}s after SIGTERM")
        elif (code, reason) != (GOING_AWAY, GOING_AWAY_REASON):
            fail(f"Close {code} {reason!r}", f"+{rel(close.at)}s after SIGTERM")
        if c.ready_at is not None:
            if end_at is None:
                fail("connection still open when the proof gave up", f"Close +{rel(close.at) if close else None}s")
            elif close is not None and end_at < close.at:
                fail("connection ended before the Close", f"end +{rel(end_at)}s, Close +{rel(close.at)}s")
            elif end_at - t_term > cut_latest:
                fail(f"connection ended later than delay + grace + {SILENT_CUT_SLACK_S:g}s = {cut_latest:g}s",
                     f"+{rel(end_at)}s after SIGTERM ({c.p.end_how})")
            elif end_at - t_term < cut_earliest:
                fail(f"connection cut before delay + grace - {SILENT_HELD_S:g}s = {cut_earliest:g}s "
                     "(the server did not wait for the answer)", f"+{rel(end_at)}s after SIGTERM ({c.p.end_how})")
        silent_records.append({
            "index": c.index, "ok": ok, "error": c.error, "close_s": rel(close.at) if close else None,
            "close": [code, reason] if close else None, "end_s": rel(end_at),
            "end_how": c.p.end_how if end_at is not None else None, "other_frames": others[:5],
        })
    r["silent_ok"] = sum(1 for x in silent_records if x["ok"])
    r["silent_problems"] = sp.report(len(silents), "silent clients", failures)
    cuts = sorted(x["end_s"] for x in silent_records if x["end_s"] is not None and x["close_s"] is not None)
    r["silent_cut_s"] = {"first": cuts[0], "last": cuts[-1]} if cuts else None
    r["silent_cut_want_s"] = [round(cut_earliest, 3), round(cut_latest, 3)]
    r["silent_end_how"] = dict(collections.Counter(x["end_how"] for x in silent_records if x["end_how"]))

    # Every Close: after the delay, within delay + grace, paced, in no burst.
    closes = sorted(
        [x["close_s"] for x in records if x["close_s"] is not None]
        + [x["close_s"] for x in silent_records if x["close_s"] is not None]
    )
    interval = h.pacing_interval(n, grace_s)
    r.update(h.check_ends(closes, n, delay_s, grace_s, interval, failures))
    r["max_ends_per_window"], r["max_ends_per_window_want"] = h.check_bursts(closes, n, interval, failures)
    late = [t for t in closes if t > delay_s + grace_s]
    if late:
        failures.append(
            f"{len(late)} Closes came later than delay + grace = {delay_s + grace_s:g}s after SIGTERM "
            f"(last +{closes[-1]:.3f}s)"
        )
    span = (n - 1) * interval
    r["min_spread_s"] = MIN_SPREAD_S if span >= MIN_SPREAD_SPAN_S else None
    if closes and span >= MIN_SPREAD_SPAN_S and r["spread_s"] < MIN_SPREAD_S:
        failures.append(f"the Closes spread over {r['spread_s']:.3f}s, want at least {MIN_SPREAD_S:g}s")

    run.check_server(
        n, websocket_closes=str(n), websocket_unanswered=str(len(silents)), code="0"
    )
    # The silent clients are cut before the grace period ends, so the server's own account of
    # its exit is within it.
    took = h.seconds((r.get("summary") or {}).get("signal_to_exit"))
    bound = delay_s + grace_s
    r["signal_to_exit_s"] = took
    if took is not None and took > bound:
        failures.append(f"the summary's signal_to_exit={took:.3f}s, later than delay + grace = {bound:g}s")
    r["socket_records"] = records
    r["silent_records"] = silent_records


# --- report ----------------------------------------------------------------------------------------

DRAIN_HEAD = [
    "runtime", "mode", "clients OK", "silent OK", "echoes after SIGTERM min/avg", "first Close", "last Close",
    "spread (want >=)", "max Closes/100ms (want <=)", "silent cut first/last", "exit", "exit after SIGTERM",
    "websocket_closes", "websocket_unanswered", "streams_ended", "streams_remaining",
]


def drain_row(r):
    name = [r["runtime"], f"{r['mode']} ({r['mode_name']})"]
    if "ok" not in r:
        return name + ["error"] + ["-"] * (len(DRAIN_HEAD) - 3)
    e = r["ends_s"]
    s = r.get("summary") or {}
    cut = r.get("silent_cut_s")
    want = r["spread_want_s"] if r.get("min_spread_s") is None else max(r["spread_want_s"], r["min_spread_s"])
    return name + [
        f"{r['ok']}/{r['sockets']}", f"{r['silent_ok']}/{r['silent']}",
        f"{r['echoes_after_min']}/{r['echoes_after_avg']}",
        h.fmt_s(e["first"]), h.fmt_s(e["last"]),
        f"{h.fmt_s(r['spread_s'])} ({want:.3f}s)",
        f"{r['max_ends_per_window']} ({r['max_ends_per_window_want']:g})",
        f"{h.fmt_s(cut['first'])}/{h.fmt_s(cut['last'])}" if cut else "-",
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
        s.get("websocket_closes", "-"), s.get("websocket_unanswered", "-"),
        s.get("streams_ended", "-"), s.get("streams_remaining", "-"),
    ]


def log_drain_figures(r):
    h.log(
        f"    echoes after SIGTERM per client: min {r['echoes_after_min']}, avg {r['echoes_after_avg']}; "
        f"last echo at most {h.fmt_s(r['echo_gap_max_s'])} before the Close; connection ended at most "
        f"{h.fmt_s(r['close_to_end_max_s'])} after the Close"
    )
    cut = r.get("silent_cut_s")
    if cut:
        h.log(
            f"    silent clients cut +{cut['first']:.3f}s to +{cut['last']:.3f}s after SIGTERM (want within "
            f"{r['silent_cut_want_s'][0]:g}s..{r['silent_cut_want_s'][1]:g}s): {r['silent_end_how']}"
        )
    h.log(f"    client's event loop at most {r['client_loop_lag_max_s'] * 1000:.0f}ms late after SIGTERM")

