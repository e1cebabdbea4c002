#!/usr/bin/env python3
"""The cost of lameduck-client's RetryLayer on a call that needs no retry (BENCHMARKS.md,
"Client: the retry layer's cost"). Goal: at most 1.05x the instructions per call of the same
client without the layer, and no heap allocation added per call.

The client is `client_bench` (crates/lameduck-client/examples): hyper-util's legacy `Client`
on a current-thread tokio runtime, keep-alive `GET /` one call after the other on one
connection, with the layer (`--layer`, `RetryLayer::default()`) or without it. The server is
`bare_hyper --hello` (crates/lameduck-bench): hyper-util's auto builder answering `hello`,
running natively in a process of its own.

Each round runs the client twice (without, then with the layer; the next round the other way
round, so drift falls on both) under `valgrind --tool=callgrind`: after --warmup calls its
counters are zeroed (`callgrind_control -z`), it sends exactly --requests calls, and the
counters are dumped (`callgrind_control -d`): the client process's user-space instructions
(Ir) / calls. The client counts its own heap allocations during those calls (a counting
global allocator) and prints them. The ratio is the median of the rounds' with / without.

Usage: scripts/bench-client.py [--rounds 3] [--requests 5000] [--warmup 500] [--no-build]
         [--out DIR]
Prints a Markdown table and the verdict; exits 1 when the ratio is over 1.05 or the layer
adds an allocation per call, 2 on a setup problem.
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATE = 1.05


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")


def build():
    cmd = ["cargo", "build", "--release", "-p", "lameduck-client", "--example", "client_bench",
           "-p", "lameduck-bench", "--bin", "bare_hyper"]
    print("==> " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, cwd=ROOT).returncode == 0


def start_server(out_dir):
    log = open(os.path.join(out_dir, "server.log"), "w")
    proc = subprocess.Popen([os.path.join(target_dir(), "release", "bare_hyper"), "--hello"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on http://"):
        proc.kill()
        raise RuntimeError(f"bare_hyper: expected 'listening on', got {line!r}")
    return proc, line[len("listening on "):]


def totals(path):
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def measure(url, layer, requests, warmup, out_dir, tag):
    """(instructions per call, allocations per call) of one client run under callgrind."""
    prefix = os.path.join(out_dir, f"callgrind.{tag}")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}.%p",
           os.path.join(target_dir(), "release", "examples", "client_bench"),
           "--target", url + "/", "--requests", str(requests), "--warmup", str(warmup)]
    if layer:
        cmd.append("--layer")
    log = open(prefix + ".valgrind.log", "w")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"client_bench: expected 'ready', got {line!r}")
        subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True, timeout=60)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "done":
            raise RuntimeError(f"client_bench: expected 'done N', got {line!r}")
        allocations = int(line[1])
        before = set(glob.glob(prefix + ".*"))
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        dump = None
        while dump is None and time.monotonic() < deadline:
            new = [p for p in glob.glob(prefix + ".*") if p not in before and not p.endswith(".log")]
            dump = new[0] if new else None
            time.sleep(0.1)
        if dump is None:
            raise RuntimeError("no callgrind dump appeared")
        time.sleep(0.5)  # the dump is written whole
        ir = totals(dump)
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return ir / requests, allocations / requests


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--build-only", action="store_true",
                    help="build the client and the server, then exit (CI builds ahead, in the background)")
    ap.add_argument("--out", help="keep the callgrind dumps here (default: a temporary directory)")
    a = ap.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            print(f"error: {tool} not found (apt-get install -y valgrind)", file=sys.stderr)
            return 2
    if not a.no_build and not build():
        return 2
    if a.build_only:
        return 0
    out_dir = a.out or tempfile.mkdtemp(prefix="bench-client-")
    os.makedirs(out_dir, exist_ok=True)
    server, url = start_server(out_dir)
    rows, ratios, added = [], [], []
    try:
        for k in range(a.rounds):
            order = [False, True] if k % 2 == 0 else [True, False]
            got = {}
            for layer in order:
                got[layer] = measure(url, layer, a.requests, a.warmup, out_dir, f"r{k}.{'layer' if layer else 'bare'}")
            ratio = got[True][0] / got[False][0]
            ratios.append(ratio)
            added.append(got[True][1] - got[False][1])
            rows.append((k + 1, got[False][0], got[True][0], ratio, got[False][1], got[True][1]))
    finally:
        server.kill()
        server.wait()
        if not a.out:
            shutil.rmtree(out_dir, ignore_errors=True)
    print("| round | Ir/call without | Ir/call with the layer | ratio | allocations/call without | with |")
    print("|---|---|---|---|---|---|")
    for k, bare, layered, ratio, alloc_bare, alloc_layer in rows:
        print(f"| {k} | {bare:,.0f} | {layered:,.0f} | {ratio:.4f} | {alloc_bare:.2f} | {alloc_layer:.2f} |")
    ratio = statistics.median(ratios)
    extra = statistics.median(added)
    ok = ratio <= GATE and extra < 0.5
    print(f"\nmedian ratio {ratio:.4f} (gate {GATE}x); allocations added per call {extra:+.2f} (gate 0): "
          + ("OK" if ok else "OVER THE GATE"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
