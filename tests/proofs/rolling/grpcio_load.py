#!/usr/bin/env python3
"""gRPC load with Python's grpcio (the C-core client): unary `Sleep` calls to the example
server's `lameduck.example.Demo` service, counted by outcome.

    python3 tests/proofs/rolling/grpcio_load.py --target 127.0.0.1:PORT --channels 4 --workers 16 \\
        --duration SECONDS [--sleep 20ms] [--timeout 5] [--tls-ca FILE --tls-domain NAME] [--retries N]

A script of its own, not a proof: rolling_restart_grpc (`--client grpcio`) and the storm run it
as a separate process by its path, so it imports nothing from the proofs' package.

`--channels` independent `grpc.Channel`s (each with its own subchannel pool, so each has its
own HTTP/2 connection), `--workers` threads spread over them round-robin, each calling
`Sleep(--sleep)` with a `--timeout` deadline in a loop until `--duration` seconds have passed
or SIGTERM/SIGINT arrives; then each worker finishes its call in flight and stops.

grpcio is left as it is: no service config, no retry policy, so only its transparent retries
happen (of streams the server refused with REFUSED_STREAM or left out of a GOAWAY's last
stream id, and of streams that never left the client). `--retries N` (default 0) adds
application retries, at most N per call, of calls that ended UNAVAILABLE: after the server's
`grpc-retry-pushback-ms` when the trailers carry one (at most 10 s), else after 50 ms x the
attempt. They are counted apart from the calls (`retried`, and by status in `retries`); a call
counts once, with its final outcome.

No generated code (no protoc): the messages are encoded by hand. SleepRequest is
`string duration = 1`; SleepReply is `string message = 1`, which must be
"Welcome gRPC Server" (any other reply is a failed call, `BAD_REPLY`).

At the end, exactly one JSON line on stdout:

    {"ok": N, "failed": N, "retried": N, "errors": {"CODE: details": count, ...},
     "examples": [up to 5 strings], "elapsed_s": X, "retries": {"CODE: details": count},
     "with_pushback": N, "start_unix": T}

`errors` holds the failed calls by final status; `examples` the first call of each kind of
failure, with when (seconds since the start), its worker and channel, the server's
`grpc-retry-pushback-ms` if it sent one, and grpcio's debug string when it says more;
`with_pushback` counts the failed calls whose trailers carried a `grpc-retry-pushback-ms` (a
client with a retry policy would have retried them after it); `start_unix` is the Unix time
the examples' times count from. Exit status 0 whatever the calls' outcomes (the caller decides); 2 on bad arguments
or when grpcio cannot be imported.
"""

import argparse
import json
import re
import signal
import sys
import threading
import time

EXPECTED_REPLY = "Welcome gRPC Server"
SLEEP_METHOD = "/lameduck.example.Demo/Sleep"
MAX_EXAMPLES = 5
MAX_PUSHBACK_S = 10.0
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


# --- protobuf, by hand ---------------------------------------------------------------------

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_sleep_request(duration):
    """SleepRequest { string duration = 1; }: tag (1 << 3 | 2), length, UTF-8 bytes."""
    data = duration.encode()
    return b"\x0a" + _varint(len(data)) + data


def read_varint(buf, i):
    """The protobuf varint at `buf[i:]`: (its value, the index after it)."""
    shift = n = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def decode_fields(buf):
    """The fields of the protobuf message `buf`, in order: (field number, value), the value
    an int (varint) or bytes (length-delimited); fixed-size fields are skipped, as protobuf
    parsers skip fields they do not know. ValueError on a malformed message."""
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(buf, i)
            yield field, value
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = read_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated length-delimited field")
            yield field, buf[i:i + n]
            i += n
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(buf):
        raise ValueError("truncated field")


def decode_sleep_reply(buf):
    """SleepReply { string message = 1; }: the message ("" when absent)."""
    message = ""
    for field, value in decode_fields(buf):
        if field == 1 and isinstance(value, bytes):
            message = value.decode()
    return message


# --- the load ------------------------------------------------------------------------------

class Counts:
    def __init__(self, t0):
        self.t0 = t0
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = 0
        self.retried = 0
        self.errors = {}
        self.retries = {}
        self.examples = []
        self.with_pushback = 0

    def success(self):
        with self.lock:
            self.ok += 1

    def failure(self, key, where, debug, pushback=None):
        with self.lock:
            self.failed += 1
            self.with_pushback += pushback is not None
            first = key not in self.errors
            self.errors[key] = self.errors.get(key, 0) + 1
            if first and len(self.examples) < MAX_EXAMPLES:
                text = f"{key} (+{time.monotonic() - self.t0:.3f}s, {where}"
                text += ")" if pushback is None else f", grpc-retry-pushback-ms {pushback})"
                if debug:
                    text += f"; {debug[:400]}"
                self.examples.append(text)

    def retry(self, key):
        with self.lock:
            self.retried += 1
            self.retries[key] = self.retries.get(key, 0) + 1


def pushback_ms(err):
    """The server's `grpc-retry-pushback-ms` (a whole number of milliseconds), or None."""
    try:
        trailers = err.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 (not every RpcError carries trailers)
        return None
    for key, value in trailers:
        if key == "grpc-retry-pushback-ms":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def worker(grpc, call, request, args, counts, stop, end, where):
    while not stop.is_set() and time.monotonic() < end:
        attempt = 0
        while True:
            try:
                reply = call(request, timeout=args.timeout)
            except grpc.RpcError as err:
                code = err.code()
                name = code.name if code is not None else "UNKNOWN"
                key = f"{name}: {err.details()}"
                pushback = pushback_ms(err)
                if code == grpc.StatusCode.UNAVAILABLE and attempt < args.retries:
                    attempt += 1
                    counts.retry(key)
                    stop.wait(0.05 * attempt if pushback is None else min(pushback / 1000, MAX_PUSHBACK_S))
                    continue
                debug = err.debug_error_string() if hasattr(err, "debug_error_string") else ""
                if debug == f"{name}:{err.details()}":
                    debug = ""  # nothing more than the status
                counts.failure(key, where, debug, pushback)
                break
            try:
                message = decode_sleep_reply(reply)
            except (ValueError, UnicodeDecodeError) as e:
                counts.failure(f"BAD_REPLY: {e}", where, repr(reply[:100]))
                break
            if message != EXPECTED_REPLY:
                counts.failure(f"BAD_REPLY: message {message!r}", where, "")
            else:
                counts.success()
            break


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--target", required=True, help="HOST:PORT of the server or the balancer")
    p.add_argument("--channels", type=int, default=4, help="independent channels (connections)")
    p.add_argument("--workers", type=int, default=16, help="threads calling Sleep, spread over the channels")
    p.add_argument("--duration", type=float, required=True, help="seconds of load")
    p.add_argument("--sleep", default="20ms", help="Sleep's duration, Go-style (20ms, 1s)")
    p.add_argument("--timeout", type=float, default=5.0, help="each call's deadline, in seconds")
    p.add_argument("--tls-ca", help="TLS: verify the server against the CA certificates in this PEM file")
    p.add_argument("--tls-domain", help="TLS: the name to verify the certificate against (default: the target's host)")
    p.add_argument("--retries", type=int, default=0, help="application retries of UNAVAILABLE per call")
    args = p.parse_args(argv)
    if re.match(r"^(https?|dns|ipv4|ipv6|unix):", args.target) or ":" not in args.target:
        p.error("--target: HOST:PORT")
    if args.channels < 1 or args.workers < 1:
        p.error("--channels and --workers must be at least 1")
    if args.duration <= 0 or args.timeout <= 0:
        p.error("--duration and --timeout must be positive")
    if args.retries < 0:
        p.error("--retries must be 0 or more")
    if not GO_DURATION.match(args.sleep):
        p.error(f"--sleep: not a Go-style duration: {args.sleep!r}")
    if args.tls_domain and not args.tls_ca:
        p.error("--tls-domain goes with --tls-ca")
    return args


def open_channel(grpc, target, index, ca=None, domain=None):
    """Channel `index` to `target`: its own HTTP/2 connection, over TLS verified against the
    PEM certificates `ca` (bytes) when given, for the name `domain` when given."""
    options = [
        # A subchannel pool of its own: no connection shared with the other channels.
        ("grpc.use_local_subchannel_pool", 1),
        # And a distinct channel argument, so no two channels' subchannels are the same key.
        ("lameduck.channel", index),
    ]
    if ca is None:
        return grpc.insecure_channel(target, options=options)
    if domain:
        options.append(("grpc.ssl_target_name_override", domain))
    creds = grpc.ssl_channel_credentials(root_certificates=ca)
    return grpc.secure_channel(target, creds, options=options)


def main(argv):
    args = parse_args(argv)
    try:
        import grpc
    except ImportError as e:
        print(f"error: cannot import grpc ({e}): pip install grpcio", file=sys.stderr)
        return 2
    ca = None
    if args.tls_ca:
        try:
            with open(args.tls_ca, "rb") as f:
                ca = f.read()
        except OSError as e:
            print(f"error: --tls-ca: {e}", file=sys.stderr)
            return 2

    stop = threading.Event()

    def on_signal(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0, t0_unix = time.monotonic(), time.time()
    counts = Counts(t0)
    end = t0 + args.duration
    request = encode_sleep_request(args.sleep)
    channels = [open_channel(grpc, args.target, i, ca, args.tls_domain) for i in range(args.channels)]
    calls = [
        ch.unary_unary(SLEEP_METHOD, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for ch in channels
    ]
    threads = []
    for w in range(args.workers):
        c = w % args.channels
        t = threading.Thread(
            target=worker,
            args=(grpc, calls[c], request, args, counts, stop, end, f"worker {w}, channel {c}"),
            daemon=True,
        )
        t.start()
        threads.append(t)
    # The main thread sleeps in short steps, so that a signal's handler runs at once.
    while not stop.is_set() and time.monotonic() < end:
        stop.wait(min(0.2, max(0.0, end - time.monotonic())))
    stop.set()
    # A call in flight ends within its deadline; a retry's wait ends with `stop`.
    join_by = time.monotonic() + args.timeout + 5
    stuck = 0
    for t in threads:
        t.join(timeout=max(0.0, join_by - time.monotonic()))
        stuck += t.is_alive()
    elapsed = time.monotonic() - t0
    with counts.lock:
        report = {
            "ok": counts.ok,
            "failed": counts.failed,
            "retried": counts.retried,
            "errors": dict(sorted(counts.errors.items())),
            "examples": list(counts.examples),
            "elapsed_s": round(elapsed, 3),
            "retries": dict(sorted(counts.retries.items())),
            "with_pushback": counts.with_pushback,
            "start_unix": round(t0_unix, 3),
        }
    if stuck:
        report["stuck_workers"] = stuck
    print(json.dumps(report), flush=True)
    for ch in channels:
        ch.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
