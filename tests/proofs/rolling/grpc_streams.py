"""Server-streaming gRPC calls at shutdown: the gRPC example server ends every open `Ticks`
stream itself, with status OK, paced over the long-running drain, and exits 0.

For each mode (A: the default close-listener mode; B: `--shutdown-send-retry-after`) the proof
starts one `grpc_server` on 127.0.0.1 with `--shutdown-delay 1s
--shutdown-watch-termination-grace-period 10s` (--delay, --grace) and opens --streams calls of
the server-streaming method `lameduck.example.Demo/Ticks` (200 by default) over --channels
grpcio channels (4 by default, each its own HTTP/2 connection), each call read in its own
thread. `Ticks` sends a tick at once and then one every 500 ms until the server tells the call
to end. Once every stream has received its first tick, the proof sends the server SIGTERM and
records, for each stream, the time of each tick, when the call ended, its final status and
details and its trailing metadata, all measured from the SIGTERM.

What the server is expected to do: keep serving the streams during the shutdown delay (ticks
keep coming), then, when it stops accepting new requests (one shutdown delay after SIGTERM),
tell every long-running call to end and hold each call's final status (its trailers) until a
slot of the paced drain: one end per pacing interval, the interval being
`min(grace / streams, 1 / min-watch-drain-qps)` (kube-apiserver's rate: at least
--min-watch-drain-qps ends a second, the server's default being 200, and fast enough to end
them all within the grace period). With 200 streams, a 10 s grace period and the default
floor of 200 a second, that is min(50 ms, 5 ms) = 5 ms: the ends spread over 199 x 5 ms, about
1 s, from about 1 s after SIGTERM. (A floor below 100 a second, e.g.
`--min-watch-drain-qps 10`, gives 50 ms slots and spreads the same ends over about 10 s.)

Asserted, per mode:
  * every stream received its first tick before SIGTERM, and (with a shutdown delay of at
    least one tick interval) at least one more tick after it: the streams are served during
    the shutdown delay;
  * every stream ended with status OK (a non-OK status, UNAVAILABLE, CANCELLED or any other,
    is listed with its count, details and first example), with its ticks numbered 0, 1, 2, ...
    without a gap;
  * no stream ended before the shutdown delay was over, and every one ended within shutdown
    delay + grace + 2 s after SIGTERM;
  * the ends were paced: the spread between the first and the last end is at least 80% of
    (streams - 1) x the pacing interval, the interval the server logged when the drain began,
    which must be the one the formula above gives for the streams it counted as long-running
    (all of them);
  * the server exited 0 within shutdown delay + grace + 2 s after SIGTERM, and its termination
    summary says cause=signal streams_ended=<streams> streams_remaining=0 code=0.

Each mode's figures are printed as a table (with the spread of the ends over time) and, with
--json FILE, written with every stream's record. A failed mode keeps its directory (the
server's logs) and says where.

`--tls`: the server serves TLS with a throwaway CA's certificate (openssl CLI), the channels
verify it (name 127.0.0.1).

Needs grpcio (pip install grpcio) and the release build of grpc_server (built unless
--no-build). Loopback only. Every process started here is killed by its PID when the script
ends, however it ends; every wait is bounded.

Exit status: 0 when every assertion held in every mode; 1 otherwise (each failure listed); 2 on
a setup problem (no grpcio, no server binary, a server that does not start or a channel that
does not connect).
"""

import json
import os
import threading
import time

import harness as h
from rolling.grpcio_load import decode_fields, open_channel

BINARY = "grpc_server"
TICKS = "/lameduck.example.Demo/Ticks"
# The server's interval between two ticks (TICK_INTERVAL in
# crates/lameduck-examples-grpc/src/grpc.rs).
TICK_INTERVAL_S = 0.5
# Bounds of the setup: a channel's connection, every stream's first tick.
CONNECT_TIMEOUT_S = 10
FIRST_TICK_TIMEOUT_S = 30


# --- protobuf, by hand -----------------------------------------------------------------------

def decode_tick(buf):
    """Tick { uint64 n = 1; }: n (0, the default, is sent as an empty message)."""
    n = 0
    for field, value in decode_fields(buf):
        if field == 1 and isinstance(value, int):
            n = value
    return n


# TicksRequest is empty: its encoding is no bytes at all.
TICKS_REQUEST = b""


# --- the streams -------------------------------------------------------------------------------

class Stream:
    """One `Ticks` call: its ticks (monotonic time, n), its end and its final status."""

    def __init__(self, index, channel):
        self.index, self.channel = index, channel
        self.ticks = []
        self.bad_ticks = []
        self.end = None
        self.code = None
        self.details = None
        self.trailers = ()
        self.debug = ""
        self.error = None


class FirstTicks:
    """Counts the streams that have received their first tick, or ended without one."""

    def __init__(self):
        self.cond = threading.Condition()
        self.ticked = 0
        self.ended_early = 0

    def tick(self):
        with self.cond:
            self.ticked += 1
            self.cond.notify_all()

    def ended(self):
        with self.cond:
            self.ended_early += 1
            self.cond.notify_all()

    def wait(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.ticked + self.ended_early < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 0.5))
            return self.ticked, self.ended_early


def consume(grpc, method, stream, deadline_s, first):
    """Reads one `Ticks` call to its end (in its own thread)."""
    call = None
    try:
        call = method(TICKS_REQUEST, timeout=deadline_s)
        for raw in call:
            now = time.monotonic()
            try:
                n = decode_tick(raw)
            except ValueError as e:
                stream.bad_ticks.append(f"{e}: {raw[:40]!r}")
                n = None
            stream.ticks.append((now, n))
            if len(stream.ticks) == 1:
                first.tick()
        stream.end = time.monotonic()
    except grpc.RpcError:
        stream.end = time.monotonic()
    except Exception as e:  # noqa: BLE001 (recorded as the stream's failure)
        stream.end = time.monotonic()
        stream.error = f"{type(e).__name__}: {e}"
    if not stream.ticks:
        first.ended()
    if call is None:
        return
    try:
        stream.code = call.code()
        stream.details = call.details() or ""
        stream.trailers = tuple((k, v if isinstance(v, str) else repr(v)) for k, v in (call.trailing_metadata() or ()))
        if stream.code != grpc.StatusCode.OK and hasattr(call, "debug_error_string"):
            stream.debug = call.debug_error_string() or ""
    except Exception as e:  # noqa: BLE001
        stream.error = stream.error or f"reading the call's status: {type(e).__name__}: {e}"


# --- one mode ------------------------------------------------------------------------------------

def run_mode(grpc, binary, mode, args):
    bound_s = h.ends_bound(args.delay, args.grace)
    run = h.DrainRun(
        f"grpc-streams-{mode}", mode, args, streams=args.streams, channels=args.channels, tls=bool(args.tls)
    )
    result, failures, flags, note = run.result, run.failures, run.flags, run.note
    if args.min_watch_drain_qps is not None:
        flags += ["--min-watch-drain-qps", str(args.min_watch_drain_qps)]

    channels, streams, threads = [], [], []
    try:
        tls = h.Tls(run.workdir) if args.tls else None
        inst = run.start_server(binary, BINARY, flags, tls=tls)
        ca = None
        if tls:
            with open(tls.ca, "rb") as f:
                ca = f.read()
        channels = [open_channel(grpc, f"127.0.0.1:{inst.port}", i, ca, "127.0.0.1") for i in range(args.channels)]
        for i, ch in enumerate(channels):
            try:
                grpc.channel_ready_future(ch).result(timeout=CONNECT_TIMEOUT_S)
            except grpc.FutureTimeoutError as e:
                raise h.SetupError(f"channel {i} not connected within {CONNECT_TIMEOUT_S}s") from e
        methods = [
            ch.unary_stream(TICKS, request_serializer=lambda b: b, response_deserializer=lambda b: b)
            for ch in channels
        ]
        # Each call's deadline: past every bound of this run, so that a call the server never
        # ends is bounded too (and then fails DEADLINE_EXCEEDED).
        deadline_s = FIRST_TICK_TIMEOUT_S + bound_s + 30
        first = FirstTicks()
        for i in range(args.streams):
            s = Stream(i, i % args.channels)
            streams.append(s)
            t = threading.Thread(
                target=consume, args=(grpc, methods[s.channel], s, deadline_s, first), daemon=True
            )
            t.start()
            threads.append(t)
        ticked, ended = first.wait(args.streams, FIRST_TICK_TIMEOUT_S)
        note(f"{ticked} of {args.streams} streams have their first tick ({ended} ended without one)")
        if ticked < args.streams:
            failures.append(
                f"only {ticked} of {args.streams} streams received a first tick within "
                f"{FIRST_TICK_TIMEOUT_S}s ({ended} ended without one); SIGTERM sent anyway"
            )
        run.terminate(bound_s)
        # Calls still open after the server's exit end at once (their connection is gone);
        # their deadline bounds them in any case.
        join_by = time.monotonic() + 15
        for t in threads:
            t.join(timeout=max(0.0, join_by - time.monotonic()))
        stuck = sum(t.is_alive() for t in threads)
        if stuck:
            failures.append(f"{stuck} streams still open 15s after the server's exit")
    except Exception as e:  # noqa: BLE001 (a setup problem, or a failed mode with the logs kept)
        run.record(e)
    finally:
        for ch in channels:
            try:
                ch.close()
            except Exception:  # noqa: BLE001
                pass
        run.kill_server()
    if run.t_term is not None:
        analyse(grpc, result, streams, run.inst, run.t_term, run.exit_at, run.code, args)
    return run.end(args.keep)


def analyse(grpc, result, streams, inst, t_term, exit_at, code, args):
    """The figures of one mode and its failed assertions."""
    failures = result["failures"]
    delay_s, grace_s, n = args.delay, args.grace, args.streams
    rel = lambda t: None if t is None else round(t - t_term, 4)  # noqa: E731

    # Statuses.
    kinds, examples = {}, {}
    for s in streams:
        name = s.code.name if s.code is not None else "NO_STATUS"
        key = f"{name}: {s.details}" if s.details else name
        if s.error:
            key += f" ({s.error})"
        kinds[key] = kinds.get(key, 0) + 1
        if s.code != grpc.StatusCode.OK and key not in examples:
            examples[key] = (
                f"stream {s.index} on channel {s.channel}: ended +{rel(s.end)}s after SIGTERM, "
                f"{len(s.ticks)} ticks, trailers {list(s.trailers)}"
                + (f"; {s.debug[:400]}" if s.debug else "")
            )
    ok = sum(1 for s in streams if s.code == grpc.StatusCode.OK and not s.error)
    result["statuses"] = kinds
    result["ok"] = ok
    result["not_ok_examples"] = examples
    if ok != n:
        failures.append(
            f"{n - ok} of {n} streams did not end with status OK: "
            + "; ".join(f"{c} x {k}" for k, c in sorted(kinds.items(), key=lambda kv: -kv[1]) if not k.startswith("OK"))
        )
        for k, ex in examples.items():
            failures.append(f"  first {k}: {ex}")
    trailer_sets = {}
    for s in streams:
        key = json.dumps(list(s.trailers))
        trailer_sets[key] = trailer_sets.get(key, 0) + 1
    result["trailing_metadata"] = trailer_sets

    # Ticks: before and after SIGTERM, numbered without a gap.
    before = [sum(1 for t, _ in s.ticks if t < t_term) for s in streams]
    after = [sum(1 for t, _ in s.ticks if t >= t_term) for s in streams]
    last_tick = [rel(s.ticks[-1][0]) for s in streams if s.ticks]
    result["ticks_before_sigterm_min"] = min(before) if before else None
    result["ticks_after_sigterm_min"] = min(after) if after else None
    result["ticks_after_sigterm_max"] = max(after) if after else None
    result["last_tick_max_s"] = max(last_tick) if last_tick else None
    no_first = [s.index for s, b in zip(streams, before) if b == 0]
    if no_first:
        failures.append(f"{len(no_first)} streams had no tick before SIGTERM (first: {no_first[:10]})")
    # A window of the shutdown delay's length holds at least floor(delay / tick interval)
    # ticks of every stream.
    want_after = int(delay_s / TICK_INTERVAL_S + 1e-9)
    no_after = [s.index for s, a in zip(streams, after) if a < min(want_after, 1)]
    if no_after:
        failures.append(
            f"{len(no_after)} streams received no tick after SIGTERM, during the "
            f"{delay_s:g}s shutdown delay (first: {no_after[:10]})"
        )
    gaps = [s.index for s in streams if [k for _, k in s.ticks] != list(range(len(s.ticks)))]
    bad = [s.index for s in streams if s.bad_ticks]
    if gaps or bad:
        failures.append(
            f"ticks not numbered 0, 1, 2, ... on {len(gaps)} streams (first: {gaps[:10]}), "
            f"undecodable on {len(bad)}"
        )

    # The server's drain line: the streams it counted as long-running, and its pacing.
    qps = args.min_watch_drain_qps if args.min_watch_drain_qps is not None else h.DEFAULT_MIN_WATCH_DRAIN_QPS
    stderr_path = inst.stderr_path if inst else None
    drain = h.drain_line(stderr_path) if stderr_path else None
    result["drain"] = drain
    want_interval = h.pacing_interval(n, grace_s, qps)
    if drain is None:
        failures.append("the server logged no `draining in-flight requests` line")
    else:
        long_running, interval = drain["long_running"], drain["pacing_interval_s"]
        if long_running != n:
            failures.append(f"the server counted {long_running} long-running requests at the drain, want {n}")
        if interval is None:
            failures.append("the server's drain line has no pacing interval")
        else:
            want_interval = h.pacing_interval(long_running, grace_s, qps)
            if abs(interval - want_interval) > 1e-6:
                failures.append(
                    f"pacing interval {interval * 1000:g}ms, want min(grace / {long_running}, "
                    f"1 / {qps}) = {want_interval * 1000:g}ms"
                )

    # Ends: after the delay, within the bound, paced.
    ends = sorted(rel(s.end) for s in streams if s.end is not None)
    if len(ends) != n:
        failures.append(f"{n - len(ends)} streams never ended")
    result.update(h.check_ends(ends, n, delay_s, grace_s, want_interval, failures))

    # The server's exit and summary.
    result["exit_code"] = code
    result["exit_s"] = h.check_server_exit(code, exit_at, t_term, h.ends_bound(delay_s, grace_s), failures)
    result["summary"] = h.check_streams_summary(stderr_path, n, failures, cause="signal", code="0")
    if failures and stderr_path:
        result["server_log"] = h.server_log_lines(stderr_path)

    result["stream_records"] = [
        {
            "index": s.index, "channel": s.channel,
            "code": s.code.name if s.code is not None else None, "details": s.details,
            "trailers": list(s.trailers), "end_s": rel(s.end), "error": s.error,
            "ticks": [[rel(t), k] for t, k in s.ticks],
        }
        for s in streams
    ]


# --- report ----------------------------------------------------------------------------------------

def tables(results):
    head = [
        "mode", "streams", "OK", "not OK", "ticks after SIGTERM", "first end", "median end",
        "last end", "spread", "want spread >=", "pacing interval",
    ]
    rows = []
    for r in results:
        if r.get("setup_error") or "ok" not in r:
            rows.append([f"{r['mode']} ({r['mode_name']})", str(r["streams"]), "error"] + ["-"] * 8)
            continue
        e = r["ends_s"]
        interval = (r.get("drain") or {}).get("pacing_interval_s")
        rows.append([
            f"{r['mode']} ({r['mode_name']})", str(r["streams"]), str(r["ok"]), str(r["streams"] - r["ok"]),
            f"{r['ticks_after_sigterm_min']}-{r['ticks_after_sigterm_max']}",
            h.fmt_s(e["first"]), h.fmt_s(e["p50"]), h.fmt_s(e["last"]), h.fmt_s(r["spread_s"]),
            h.fmt_s(r["spread_want_s"]),
            "-" if interval is None else f"{interval * 1000:g}ms",
        ])
    head2 = [
        "mode", "exit", "exit after SIGTERM", "signal_to_exit", "lame_duck", "long_running_drain",
        "streams_ended", "streams_remaining", "code",
    ]
    rows2 = []
    for r in results:
        s = r.get("summary") or {}
        rows2.append([
            f"{r['mode']} ({r['mode_name']})", str(r.get("exit_code")), h.fmt_s(r.get("exit_s")),
            s.get("signal_to_exit", "-"), s.get("lame_duck", "-"), s.get("long_running_drain", "-"),
            s.get("streams_ended", "-"), s.get("streams_remaining", "-"), s.get("code", "-"),
        ])
    return h.table(head, rows) + "\n\n" + h.table(head2, rows2)


def log_figures(r):
    """The mode's own lines in its log (see h.log_result): statuses, trailers, ticks, ends."""
    h.log("    statuses: " + "; ".join(f"{c} x {k}" for k, c in sorted(r["statuses"].items(), key=lambda kv: -kv[1])))
    h.log("    trailing metadata (besides grpc-status): " + "; ".join(
        f"{c} x {k}" for k, c in r["trailing_metadata"].items()))
    h.log(
        f"    ticks per stream: >= {r['ticks_before_sigterm_min']} before SIGTERM, "
        f"{r['ticks_after_sigterm_min']}-{r['ticks_after_sigterm_max']} after it; "
        f"last tick of any stream +{h.fmt_s(r['last_tick_max_s'])} after SIGTERM"
    )
    e, slots = r["ends_s"], (r["streams"] - 1) * r["pacing_interval_s"]
    h.log(
        f"    ends after SIGTERM: first {h.fmt_s(e['first'])}, p10 {h.fmt_s(e['p10'])}, "
        f"median {h.fmt_s(e['p50'])}, p90 {h.fmt_s(e['p90'])}, last {h.fmt_s(e['last'])}; "
        f"spread {h.fmt_s(r['spread_s'])} (slots: ({r['streams']} - 1) x "
        f"{r['pacing_interval_s'] * 1000:g}ms = {slots:.3f}s); "
        f"largest distance from its slot {h.fmt_s(r['max_slot_deviation_s'])}"
    )


# The short form, CI's run (see harness.cli): the defaults.
SHORT = [[]]


def main(argv=None):
    p = h.parser("grpc_streams", __doc__)
    h.add_drain_arguments(p, 200, "Ticks streams")
    p.add_argument("--channels", type=int, default=4, help="grpcio channels (HTTP/2 connections) the streams share")
    p.add_argument("--min-watch-drain-qps", type=int,
                   help="pass the server this --min-watch-drain-qps (default: the server's, 200)")
    p.add_argument("--tls", action="store_true", help="the server serves TLS, the channels verify it")
    p.add_argument("--bin-dir", help="take grpc_server from this directory (implies --no-build)")
    h.add_forms(p, SHORT)
    args = p.parse_args(argv)
    modes = h.drain_modes(p, args)
    if args.channels < 1:
        p.error("--channels must be at least 1")
    if args.min_watch_drain_qps is not None and args.min_watch_drain_qps < 0:
        p.error("--min-watch-drain-qps must be 0 or more")

    try:
        import grpc
    except ImportError as e:
        h.log(f"error: cannot import grpc ({e}): pip install grpcio")
        return 2
    if args.tls and not h.check_tools("openssl", hint="apt-get install -y openssl"):
        return 2
    examples = h.ready_examples([BINARY], args)
    if examples is None:
        return 2
    binary = os.path.join(examples, BINARY)

    qps = args.min_watch_drain_qps if args.min_watch_drain_qps is not None else h.DEFAULT_MIN_WATCH_DRAIN_QPS
    interval = h.pacing_interval(args.streams, args.grace, qps)
    h.log(
        f"{BINARY}: --shutdown-delay {args.delay:g}s, --shutdown-watch-termination-grace-period "
        f"{args.grace:g}s, min watch drain qps {qps}"
        + ("" if args.min_watch_drain_qps is not None else " (the server's default)")
        + (", TLS" if args.tls else "")
    )
    h.log(
        f"{args.streams} Ticks streams over {args.channels} grpcio channels (grpcio {grpc.__version__}); "
        f"expected pacing: min({args.grace:g}s / {args.streams}, 1 / {qps}) = {interval * 1000:g}ms, "
        f"ends over ({args.streams} - 1) x {interval * 1000:g}ms = {(args.streams - 1) * interval:.3f}s "
        f"from about {args.delay:g}s after SIGTERM; bound {h.ends_bound(args.delay, args.grace):g}s"
    )
    results = []
    for mode in modes:
        h.log(f"\n==> mode {mode} ({h.MODE_NAMES[mode]})")
        r = run_mode(grpc, binary, mode, args)
        h.log_result(r, h.drain_figures(log_figures))
        results.append(r)
    h.log("\n" + tables(results))
    status = h.exit_status(results, args, lambda r: f"mode {r['mode']}")
    if status:
        return status
    h.log(
        f"\nOK: in each of modes {', '.join(modes)}, all {args.streams} streams ended with status OK, "
        f"paced, within {h.ends_bound(args.delay, args.grace):g}s of SIGTERM; the server exited 0 "
        f"with streams_ended={args.streams} streams_remaining=0."
    )
    return 0
