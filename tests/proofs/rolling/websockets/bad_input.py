"""The websockets proof's bad-input scenario: raw sockets that each misbehave once (ten kinds
of bad input, twice each) beside clients of the websockets library; each misbehaving socket
must get the protocol's error Close or the end of its connection, the server must stay up
and then drain its clients with Close 1001 (see the proof's description)."""

import asyncio
import time

import harness as h
from harness.ws_frames import OP_CLOSE, OP_PING, OP_TEXT, close_payload, encode_frame, parse_close
from rolling.websockets.library import CONNECT_TIMEOUT_S, NormalClient, close_to_end_s, normal_checks
from rolling.websockets.raw import ClientError, open_raw, raw_echo
from rolling.websockets.server_run import FIRST_ECHO_TIMEOUT_S, WsRun

# The statuses of a Close that fails a connection for bad input: protocol error, data
# inconsistent with its type (not UTF-8), policy violation.
ERROR_CLOSES = (1002, 1007, 1008)
# The misbehaviours whose Close has one status only: text that is not UTF-8 gets 1007
# (invalid payload data; RFC 6455, section 8.1).
EXACT_CLOSES = {"bad UTF-8": (1007,)}
# What a misbehaving socket must get within this long, and the raw sockets per misbehaviour.
BAD_ANSWER_S = 5.0
BAD_REPEAT = 2


def bad_kinds():
    """(name, what it is, the bytes sent, whether they hold the client's Close)."""
    return [
        ("reserved bits", "a text frame with RSV1, RSV2 and RSV3 set",
         lambda: encode_frame(OP_TEXT, b"reserved bits", rsv=7), False),
        ("opcode 0x3", "a frame with the reserved opcode 0x3", lambda: encode_frame(0x3, b"opcode 3"), False),
        ("garbage", "bytes that are no frame", lambda: b"this is not a WebSocket frame\r\n" * 4, False),
        ("unmasked", "an unmasked text frame", lambda: encode_frame(OP_TEXT, b"unmasked", mask=False), False),
        ("close 1005", "a Close with status 1005", lambda: encode_frame(OP_CLOSE, close_payload(1005)), True),
        ("close 999", "a Close with status 999", lambda: encode_frame(OP_CLOSE, close_payload(999)), True),
        ("data after close", "a Close 1000, then a text frame",
         lambda: encode_frame(OP_CLOSE, close_payload(1000, b"bye")) + encode_frame(OP_TEXT, b"after close"), True),
        ("bad UTF-8", "a text frame that is not UTF-8",
         lambda: encode_frame(OP_TEXT, b"\xff\xfe\xfd not utf-8"), False),
        ("ping of 126 bytes", "a Ping longer than 125 bytes", lambda: encode_frame(OP_PING, b"p" * 126), False),
        ("fragmented ping", "a Ping without FIN", lambda: encode_frame(OP_PING, b"ping", fin=False), False),
    ]


class BadClient:
    """One raw socket that misbehaves once, and what it got."""

    def __init__(self, index, kind, data, sends_close):
        self.index, self.kind, self.data, self.sends_close = index, kind, data, sends_close
        self.p = None
        self.task = None
        self.error = None
        self.bad_at = None
        self.after = 0
        self.close = None  # the server's Close frame
        self.answered = False
        self.ended_at = None  # the connection's end, when it came within the watch
        self.end_how = None
        self.done = False
        self.gave_up = False


async def bad_client(c, port, sem, go):
    """Opens and echoes, waits for `go`, misbehaves, then watches what comes for BAD_ANSWER_S
    (answering an error Close as a client would)."""
    try:
        async with sem:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            c.p = await open_raw(port, deadline)
            await raw_echo(c.p, f"bad {c.index}", deadline)
    except ClientError as e:
        c.error = str(e)
        c.done = True
        return
    await go.wait()
    p = c.p
    c.after = len(p.frames)
    c.bad_at = time.monotonic()
    p.send(c.data)
    until = c.bad_at + BAD_ANSWER_S
    await p.wait(lambda: p.ended_at is not None or p.close_frame(c.after) is not None, until)
    c.close = p.close_frame(c.after)
    if c.close is not None and p.ended_at is None and not c.sends_close:
        code, _ = parse_close(c.close.payload)
        p.send(encode_frame(OP_CLOSE, close_payload(code) if code in ERROR_CLOSES else close_payload(1000)))
        c.answered = True
    await p.wait(lambda: p.ended_at is not None, until)
    c.ended_at, c.end_how = p.ended_at, p.end_how
    # A client gives up on a connection the server keeps open.
    p.abort()
    c.done = True


def run_bad(binary, runtime, mode, args):
    run = WsRun(binary, runtime, mode, args, "bad-input")
    kinds = bad_kinds()
    bads = []
    for name, _, make, sends_close in kinds:
        for _ in range(BAD_REPEAT):
            bads.append(BadClient(len(bads), name, make(), sends_close))
    normals = [NormalClient(i) for i in range(args.bad_normal)]
    run.result.update(sockets=len(normals), misbehaving=len(bads))
    go = asyncio.Event()
    run.drive(normals, bads, lambda c, port, sem: bad_client(c, port, sem, go),
              lambda: drive_bad(run, normals, bads, go))
    if run.t_term is not None or any(c.bad_at for c in bads):
        analyse_bad(run, normals, bads)
    return run.finish()


async def drive_bad(run, normals, bads, go):
    """Once every socket has echoed, the misbehaviours (`go`) and what the server answered;
    then, the server still up, SIGTERM and the clients of the library's ends, bounded."""
    args = run.args
    settled = lambda: (  # noqa: E731
        all(c.echoes or c.done for c in normals) and all(c.p is not None and c.p.frames or c.done for c in bads)
    )
    await run.wait_clients(settled, time.monotonic() + FIRST_ECHO_TIMEOUT_S)
    opened = sum(1 for c in bads if c.p is not None and c.p.frames)
    echoing = sum(1 for c in normals if c.echoes)
    run.note(f"{echoing} of {len(normals)} clients of the library and {opened} of {len(bads)} raw sockets echoed")
    if opened < len(bads) or echoing < len(normals):
        raise h.SetupError(
            "not every socket opened and echoed: "
            + next((c.error for c in normals + bads if c.error), "no echo in time")
        )
    go.set()
    t_bad = time.monotonic()
    run.result["t_bad"] = t_bad
    await run.wait_clients(lambda: all(c.done for c in bads), t_bad + BAD_ANSWER_S + 1)
    ended = sum(1 for c in bads if c.ended_at)
    run.note(f"misbehaved on {len(bads)} raw sockets; the server ended {ended} of them")
    # The server is still up, and every client of the library still echoes.
    await asyncio.sleep(max(0.5, 3 * args.echo_interval))
    run.watch_exit()
    run.result["alive_after_bad_input"] = run.alive()
    if not run.alive():
        run.failures.append(
            f"the server exited {run.inst.proc.returncode} after the bad input:\n{run.inst.stderr_tail()}"
        )
        return
    t_check = time.monotonic()
    run.result["t_check"] = t_check
    run.sigterm()
    finished = lambda: all(c.done for c in normals)  # noqa: E731
    await run.wait_clients(finished, run.t_term + h.ends_bound(args.delay, args.grace) + 5)
    run.note(f"{sum(1 for c in normals if c.done)} of {len(normals)} clients of the library ended")


def analyse_bad(run, normals, bads):
    r, failures = run.result, run.failures
    t_bad = r.get("t_bad")
    bad_records = []
    for c in bads:
        rec = {"index": c.index, "kind": c.kind, "error": c.error, "close": None, "close_ms": None,
               "end": None, "end_ms": None, "answered": c.answered, "ok": False}
        if c.bad_at is not None:
            p = c.p
            if c.close is not None:
                code, reason = parse_close(c.close.payload)
                rec["close"] = [code, reason]
                rec["close_ms"] = round((c.close.at - c.bad_at) * 1000, 1)
            if c.ended_at is not None:
                rec["end"] = c.end_how
                rec["end_ms"] = round((c.ended_at - c.bad_at) * 1000, 1)
            wanted = EXACT_CLOSES.get(c.kind, ERROR_CLOSES)
            rec["wanted"] = list(wanted)
            error_close = (
                c.close is not None and rec["close"][0] in wanted and c.close.at - c.bad_at <= BAD_ANSWER_S
            )
            if c.kind in EXACT_CLOSES:
                # The connection's end alone does not do: the status is asserted.
                rec["ok"] = error_close
                rec["other_frames"] = [f.describe() for f in p.frames[c.after:] if f.opcode != OP_CLOSE][:5]
                bad_records.append(rec)
                continue
            ended = c.ended_at is not None and c.ended_at - c.bad_at <= BAD_ANSWER_S
            rec["ok"] = error_close or ended
            rec["other_frames"] = [f.describe() for f in p.frames[c.after:] if f.opcode != OP_CLOSE][:5]
        bad_records.append(rec)
    wrong = [x for x in bad_records if not x["ok"]]
    for x in wrong:
        failures.append(
            f"misbehaviour {x['kind']!r} (raw socket {x['index']}): no Close "
            f"{'/'.join(map(str, x.get('wanted', ERROR_CLOSES)))}"
            f"{'' if x['kind'] in EXACT_CLOSES else ' and no end of the connection'} within {BAD_ANSWER_S:g}s "
            f"(got {describe_bad(x)})"
        )
    r["bad_ok"] = len(bad_records) - len(wrong)
    r["bad_records"] = bad_records

    if run.t_term is None:
        return
    problems = h.Problems()
    records = []
    # The last misbehaving socket's end (or the end of its watch): echoes after it show the
    # server still serving.
    last_bad = max((c.ended_at or c.bad_at + BAD_ANSWER_S for c in bads if c.bad_at is not None), default=t_bad)
    for c in normals:
        add = problems.adder("socket", c.index)
        rec, ok = normal_checks(c, run.t_term, add, close_to_end_s(run.runtime))
        rec["echoes_after_bad_input"] = sum(1 for t in c.echoes if last_bad <= t < run.t_term)
        if c.error is None and rec["echoes_after_bad_input"] == 0:
            add("no echo between the bad input and SIGTERM", f"{len(c.echoes)} echoes in all")
            ok = False
        rec["ok"] = ok
        records.append(rec)
    r["ok"] = sum(1 for x in records if x["ok"])
    r["problems"] = problems.report(len(normals), "clients of the library", failures)
    r["socket_records"] = records
    # The summary's streams_ended counts the drain's ends, which the misbehaving sockets
    # (ended before SIGTERM) may or may not be part of: it is not asserted here.
    run.check_server(websocket_closes=str(len(normals)), websocket_unanswered="0", code="0")
    d = r.get("drain")
    if d is None:
        failures.append("the server logged no `draining in-flight requests` line")
    elif d["long_running"] != len(normals):
        failures.append(
            f"the drain counted long_running={d['long_running']}, want {len(normals)} (the clients of the library "
            f"alone: the {len(bads)} misbehaving sockets ended before SIGTERM)"
        )


def describe_bad(x, times=True):
    """What a misbehaving socket got: the server's Close, the connection's end, other frames."""
    if x.get("error"):
        return f"setup error: {x['error']}"
    at = lambda ms: f" +{ms:g}ms" if times and ms is not None else ""  # noqa: E731
    got = []
    if x.get("close"):
        got.append(f"Close {x['close'][0]} {x['close'][1]!r}{at(x['close_ms'])}")
    if x.get("other_frames"):
        got.append(", ".join(x["other_frames"]))
    got.append(f"connection {x['end']}{at(x['end_ms'])}" if x.get("end") else "connection still open")
    return ", then ".join(got)



# --- report ----------------------------------------------------------------------------------------

BAD_HEAD = [
    "runtime", "mode", "misbehaving OK", "up after", "clients OK", "exit", "exit after SIGTERM", "long_running",
    "websocket_closes", "websocket_unanswered", "streams_ended", "streams_remaining",
]


def bad_row(r):
    name = [r["runtime"], f"{r['mode']} ({r['mode_name']})"]
    if "bad_ok" not in r:
        return name + ["error"] + ["-"] * (len(BAD_HEAD) - 3)
    s = r.get("summary") or {}
    d = r.get("drain") or {}
    return name + [
        f"{r['bad_ok']}/{r['misbehaving']}", str(r.get("alive_after_bad_input", "-")),
        f"{r['ok']}/{r['sockets']}" if "ok" in r else "-",
        str(r.get("exit_code")), h.fmt_s(r.get("exit_s")), d.get("long_running", "-"),
        s.get("websocket_closes", "-"), s.get("websocket_unanswered", "-"),
        s.get("streams_ended", "-"), s.get("streams_remaining", "-"),
    ]


def bad_table(r):
    """What each misbehaviour got (its sockets' answers, told apart when they differ)."""
    what = {name: text for name, text, _, _ in bad_kinds()}
    kinds = {}
    for x in r.get("bad_records", []):
        kinds.setdefault(x["kind"], []).append(x)
    rows = []
    for kind, xs in kinds.items():
        got = " | ".join(sorted({describe_bad(x, times=False) for x in xs}))
        latest = lambda key: max((x[key] for x in xs if x[key] is not None), default=None)  # noqa: E731
        close_ms, end_ms = latest("close_ms"), latest("end_ms")
        ok = sum(1 for x in xs if x["ok"])
        rows.append([
            kind, what.get(kind, ""), got, "-" if close_ms is None else f"{close_ms:g}ms",
            "-" if end_ms is None else f"{end_ms:g}ms", f"{ok}/{len(xs)}",
        ])
    return h.table(["misbehaviour", "sent", "got", "Close within", "end within", "OK"], rows)
