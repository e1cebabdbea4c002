#!/usr/bin/env python3
"""Peer benchmarks (BENCHMARKS.md), group 2: HTTP overhead of lameduck, bare server vs the same
server with lameduck. Goal: at most 1.05x the bare server's instructions per request.

For each pair (hyper on tokio, axum, actix-web, hyper on smol) the "bare" server is a
binary of crates/lameduck-bench (same routes, no lameduck) and the "lameduck" server is the
repository's example server. Both are release builds.

Two measurements, each alternating the two servers of a pair (A B B A A B ...), so drift
in the machine's load falls on both:

1. Instructions per request (the gate). With a hardware counter (`perf stat -e
   instructions` works) it is read natively during the wrk runs of step 2. Where there is
   none (this machine is a Firecracker guest: "PMU not available due to virtualization"),
   each server runs under `valgrind --tool=callgrind`; after a warm-up its counters are
   zeroed (`callgrind_control -z`), `bench_load` sends exactly --requests GETs of `/` over
   --connections keep-alive connections, and the counters are dumped (`callgrind_control
   -d`): user-space instructions (Ir) of the whole server process / requests.
2. Requests per second and latency (reported, not the gate): `wrk -t1 -cC -dD --latency`
   against the natively running servers, with the server's CPU time (utime + stime from
   /proc/PID/stat) per request.

Over TLS (pairs hyper-tls-h1, hyper-tls-h2, hyper-tls-conn; not in the default --pairs):
`bare_hyper_tls` (bare_hyper behind tokio-rustls, with the rustls configuration of
lameduck_tls::ServerTls, the one the example servers serve with) against
`examples/tokio_server --tls-cert-file --tls-private-key-file`, both with a throwaway
certificate that `bench_tls_load --write-cert` writes to a temporary directory. The load is
`bench_tls_load`: keep-alive GET / over HTTP/1.1 (ALPN http/1.1, `-h1`), over HTTP/2 (ALPN h2,
`-h2`; one stream at a time per connection), or a new connection per request (`-conn`: a full
handshake, one GET with `Connection: close`, the server's close; --tls-conn-requests per run).
The keep-alive pairs' connections are opened (handshakes done) before the counters are zeroed
(`bench_tls_load --ready`), so they measure requests alone. Attribution pairs hyper-tls-h1+alpn
and hyper-tls-h2+alpn: the bare TLS server against itself serving hyper's HTTP/1 or HTTP/2
connection as ALPN chose (`bare_hyper_tls --alpn`, as lameduck does) instead of hyper-util's
auto connection. wrk is not run for these pairs.

Attribution: the last callgrind dump of each server is kept under --out, and the functions
whose self cost per request differs most between bare and lameduck are printed
(`callgrind_annotate`), so a ratio over the goal comes with its measured reason.

The quick starts of README.md and docs/quickstarts.md (pairs quickstart-tokio, quickstart-axum, quickstart-actix,
quickstart-smol; not in the default --pairs), built as written, against the same bare servers:
what a user who copies one pays per request.

Usage: scripts/bench_http.py [--rounds 3] [--requests 5000] [--wrk-duration 5s]
         [--connections 16] [--pairs hyper,axum,actix,smol,quickstart-tokio,quickstart-axum,
                             quickstart-actix,quickstart-smol,hyper-tls-h1,hyper-tls-h2,hyper-tls-conn]
         [--tls-conn-requests 300] [--no-wrk] [--no-callgrind] [--no-attribution] [--no-build]
         [--out DIR]
Prints Markdown tables; exits 0 (the goal's verdict is printed, not enforced).
"""

import argparse
import atexit
import glob
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
if not os.path.isabs(TARGET):
    TARGET = os.path.join(ROOT, TARGET)
REL = os.path.join(TARGET, "release")
GOAL = 1.05

# pair -> (bare command, lameduck command); both listen on 127.0.0.1:0.
LISTEN = ["--listen", "127.0.0.1:0"]
PAIRS = {
    "hyper": ([f"{REL}/bare_hyper"] + LISTEN, [f"{REL}/examples/tokio_server"] + LISTEN),
    "axum": ([f"{REL}/bare_axum"] + LISTEN, [f"{REL}/examples/axum_server"] + LISTEN),
    "actix": ([f"{REL}/bare_actix"] + LISTEN, [f"{REL}/examples/actix_server"] + LISTEN),
    "smol": ([f"{REL}/bare_smol"] + LISTEN, [f"{REL}/examples/smol_server"] + LISTEN),
}
# The quick starts (README.md, docs/quickstarts.md), built as written, against the same bare servers: each takes the
# address to listen on as its one argument (ADDR: a free loopback port, chosen at start).
ADDR = "{addr}"
QUICK_STARTS = {
    # The minimal hyper server a user would write without lameduck (bare_hyper --hello).
    "quickstart-tokio": ([f"{REL}/bare_hyper", "--hello"] + LISTEN, [f"{REL}/examples/quickstart_tokio", ADDR]),
    "quickstart-axum": ([f"{REL}/bare_axum"] + LISTEN, [f"{REL}/examples/quickstart_axum", ADDR]),
    "quickstart-actix": ([f"{REL}/bare_actix"] + LISTEN, [f"{REL}/examples/quickstart_actix", ADDR]),
    "quickstart-smol": ([f"{REL}/bare_smol"] + LISTEN, [f"{REL}/examples/quickstart_smol", ADDR]),
}
PAIRS.update(QUICK_STARTS)


def free_loopback_addr():
    """127.0.0.1:PORT for a port nothing listens on now."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"
# Over TLS: pair -> bench_tls_load --mode. Their commands (with the certificate's files) are
# added to PAIRS once the certificate is written (tls_pairs).
TLS_MODES = {"hyper-tls-h1": "h1", "hyper-tls-h2": "h2", "hyper-tls-conn": "conn",
             "quickstart-tls-h1": "h1", "quickstart-tls-h2": "h2"}
# The certificate the TLS pairs' load trusts (set by tls_pairs).
TLS_CA = None


def tls_pairs(directory):
    """Writes a throwaway certificate to `directory`; adds the TLS pairs' commands to PAIRS."""
    global TLS_CA
    out = subprocess.run([f"{REL}/bench_tls_load", "--write-cert", directory], check=True,
                         capture_output=True, text=True, timeout=60)
    cert, key = out.stdout.split()
    TLS_CA = cert
    flags = ["--tls-cert-file", cert, "--tls-private-key-file", key]
    for name in TLS_MODES:
        if name.startswith("quickstart-tls"):
            # The TLS quick start, as written, against the minimal TLS server a user would
            # write (bare_hyper_tls --hello: hello, tokio-rustls, the same rustls configuration).
            PAIRS[name] = ([f"{REL}/bare_hyper_tls", "--hello"] + LISTEN + flags,
                           [f"{REL}/examples/quickstart_tls", ADDR, cert, key])
            continue
        PAIRS[name] = ([f"{REL}/bare_hyper_tls"] + LISTEN + flags,
                       [f"{REL}/examples/tokio_server"] + LISTEN + flags)
        if name != "hyper-tls-conn":
            ATTRIBUTION_ALPN[name] = [f"{REL}/bare_hyper_tls", "--alpn"] + LISTEN + flags


def attribution(name):
    """Whether variant `name` is an attribution pair (bare against bare with one change)."""
    return "+timer" in name or "+alpn" in name


# Attribution only: the bare server given a hyper timer as lameduck's driver does.
ATTRIBUTION = {
    "hyper": [f"{REL}/bare_hyper", "--hyper-timer"] + LISTEN,
    "smol": [f"{REL}/bare_smol", "--hyper-timer"] + LISTEN,
}
# Attribution only, over TLS: the bare TLS server serving hyper's connection for the ALPN
# protocol, as lameduck does (filled by tls_pairs).
ATTRIBUTION_ALPN = {}


class Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)

    def flush(self):
        for s in self.streams:
            s.flush()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Server:
    """A server process; `wrapper` is a command prefix (valgrind)."""

    def __init__(self, cmd, wrapper=(), stderr_path=None, timeout=60):
        self.cmd = list(wrapper) + [free_loopback_addr() if c == ADDR else c for c in cmd]
        err = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
        # NO_COLOR: the quick starts log their listening line through tracing's formatter.
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=err,
                                     stdin=subprocess.DEVNULL, env=dict(os.environ, NO_COLOR="1"))
        deadline = time.monotonic() + timeout
        self.addr = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            m = re.search(r"listening on https?://(\S+)", line)
            if m:
                self.addr = m.group(1)
                break
        if not self.addr:
            self.stop()
            raise RuntimeError(f"no listening line from {' '.join(self.cmd)}")
        self.pid = self.proc.pid

    def cpu_ticks(self):
        with open(f"/proc/{self.pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def load(addr, requests, connections, close_every=0, tls_mode=None):
    """Exactly `requests` GET / to `addr`: bench_load, or bench_tls_load --mode `tls_mode`."""
    if tls_mode:
        cmd = [f"{REL}/bench_tls_load", "--addr", addr, "--ca", TLS_CA, "--mode", tls_mode,
               "--requests", str(requests), "--connections", str(connections)]
    else:
        cmd = [f"{REL}/bench_load", "--addr", addr, "--requests", str(requests),
               "--connections", str(connections), "--close-every", str(close_every)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed: {out.stdout} {out.stderr}")
    return out.stdout.strip()


def callgrind_totals(path):
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def tls_load_ready(addr, requests, connections, tls_mode, zero):
    """bench_tls_load --ready: its connections are opened first, then `zero()` runs, then
    the requests are sent; so a keep-alive measurement holds no handshake."""
    cmd = [f"{REL}/bench_tls_load", "--ready", "--addr", addr, "--ca", TLS_CA, "--mode", tls_mode,
           "--requests", str(requests), "--connections", str(connections)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"bench_tls_load: expected 'ready', got {line!r}")
        zero()
        out, err = proc.communicate("go\n", timeout=1800)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"bench_tls_load failed: {line}{out} {err}")
    return out.strip()


def callgrind_measure(server, out_prefix, requests, connections, close_every=0, tls_mode=None):
    """Zero, load, dump; returns Ir per request and the dump file."""
    before = set(glob.glob(out_prefix + "*"))

    def zero():
        subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True,
                       capture_output=True, timeout=60)
    if tls_mode in ("h1", "h2"):
        tls_load_ready(server.addr, requests, connections, tls_mode, zero)
    else:
        zero()
        load(server.addr, requests, connections, close_every, tls_mode)
    subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True,
                   capture_output=True, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = sorted(set(glob.glob(out_prefix + "*")) - before, key=os.path.getmtime)
        if new:
            time.sleep(0.2)  # let the dump finish writing
            return callgrind_totals(new[-1]) / requests, new[-1]
        time.sleep(0.05)
    raise RuntimeError("no callgrind dump appeared")


def perf_works():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "not supported" not in r.stderr and "<not" not in r.stderr


def parse_wrk(text):
    def dur(v):
        m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
        n, u = float(m.group(1)), m.group(2)
        return n * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[u]
    reqs = int(re.search(r"(\d+) requests in", text).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p50 = dur(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1))
    p99 = dur(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: (.*)", text)
    return {"requests": reqs, "rps": rps, "p50": p50, "p99": p99,
            "errors": (int(errors.group(1)) if errors else 0), "socket": sock.group(1) if sock else ""}


def wrk_run(server, duration, connections, use_perf):
    perf = None
    if use_perf:
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "instructions", "-p", str(server.pid)],
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.1)
    t0 = server.cpu_ticks()
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}", "--latency",
                          f"http://{server.addr}/"], capture_output=True, text=True, timeout=300)
    t1 = server.cpu_ticks()
    r = parse_wrk(out.stdout)
    r["cpu_us"] = (t1 - t0) / os.sysconf("SC_CLK_TCK") * 1e6 / r["requests"]
    if perf:
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate(timeout=30)
        count = err.strip().splitlines()[-1].split(",")[0]
        r["instructions"] = int(count) / r["requests"] if count.isdigit() else None
    return r


def order(rounds):
    """A B B A A B B A ...: each server goes first equally often."""
    seq = []
    for i in range(rounds):
        seq += [0, 1] if i % 2 == 0 else [1, 0]
    return seq


def annotate(path):
    """Self Ir per function (symbol without file) from callgrind_annotate."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", path],
                         capture_output=True, text=True, timeout=300).stdout
    costs = {}
    total = re.search(r"([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?PROGRAM TOTALS", out)
    total = int(total.group(1).replace(",", "")) if total else None
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(.*?)(?:\s+\[.*\])?$", line)
        if not m or ":" not in m.group(2):
            continue
        cost = int(m.group(1).replace(",", ""))
        # Functions on the stack when the counters were zeroed and dumped (thread entry,
        # the worker loop) show the whole total: not a self cost, skip them.
        if total and cost >= 0.9 * total:
            continue
        name = m.group(2).split(":", 1)[1].strip()
        costs[name] = costs.get(name, 0) + cost
    return costs


def short(name, width=110):
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    return name if len(name) <= width else name[: width - 1] + "…"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each server per pair (A/B alternating)")
    ap.add_argument("--requests", type=int, default=5000, help="requests per callgrind measurement")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--wrk-duration", default="5s")
    ap.add_argument("--pairs", default="hyper,axum,actix,smol",
                    help="comma-separated; known: hyper, axum, actix, smol, the quick "
                         "starts (" + ", ".join(QUICK_STARTS) + ") and over TLS "
                         + ", ".join(TLS_MODES))
    ap.add_argument("--tls-conn-requests", type=int, default=300, metavar="N",
                    help="requests (each on a new connection) per callgrind measurement of hyper-tls-conn")
    ap.add_argument("--no-wrk", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-attribution", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--build-only", action="store_true",
                    help="build what the pairs run, then exit (CI builds ahead, in the background)")
    ap.add_argument("--goaway-chance", default=None, metavar="P",
                    help="also measure each pair's lameduck server with --goaway-chance P "
                         "(variant PAIR+goaway; its bare side is the same bare server)")
    ap.add_argument("--gate", type=float, default=None, metavar="RATIO",
                    help="exit 1 when a pair's median instruction ratio (lameduck / bare) exceeds RATIO")
    ap.add_argument("--out", default=os.path.join(TARGET, "bench-http"),
                    help="where callgrind dumps and valgrind logs go")
    ap.add_argument("--save", default=os.path.join(ROOT, "crates", "lameduck-bench", "results", "http.md"),
                    help="also write the printed tables here ('' for no)")
    a = ap.parse_args()
    pairs = [p.strip() for p in a.pairs.split(",") if p.strip()]
    for p in pairs:
        if p not in PAIRS and p not in TLS_MODES:
            sys.exit(f"unknown pair {p!r}; known: {', '.join(list(PAIRS) + list(TLS_MODES))}")
    os.makedirs(a.out, exist_ok=True)
    if a.save and not a.build_only:
        os.makedirs(os.path.dirname(a.save), exist_ok=True)
        sys.stdout = Tee(sys.stdout, open(a.save, "w"))

    if not a.no_build:
        # One invocation, so both sides link the same build of hyper & co. (features unified
        # once: separate builds may compile hyper with other features, and inline differently).
        # The example servers and quick starts are in one package per runtime.
        examples = [arg for runtime in ("tokio", "axum", "smol", "actix")
                    for arg in ("-p", f"lameduck-examples-{runtime}")]
        for cmd in (["cargo", "build", "--release", "-p", "lameduck-bench", "--bins",
                     *examples, "--examples"],):
            log("==>", " ".join(cmd))
            subprocess.run(cmd, cwd=ROOT, check=True)
    if a.build_only:
        return

    if any(p in TLS_MODES for p in pairs):
        cert_dir = tempfile.mkdtemp(prefix="bench-http-tls.")
        atexit.register(shutil.rmtree, cert_dir, True)
        tls_pairs(cert_dir)

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    # The results file itself (opened for writing above) does not count.
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "crates", "examples",
                            ":(exclude)crates/lameduck-bench/results"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.split()[:2]
    print(f"machine: {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; commit {head}"
          f"{' + uncommitted changes under crates/ or examples/' if dirty else ''}; "
          f"nproc {os.cpu_count()}, {model}, kernel {os.uname().release}, {' '.join(rustc)}; "
          f"1-min load average at start {os.getloadavg()[0]:.2f}")
    use_perf = perf_works()
    started = time.monotonic()

    cg = {}  # pair -> ([bare Ir/req], [lameduck Ir/req])
    cg_requests = {}  # pair -> requests per run
    dumps = {}
    if not a.no_callgrind:
        if not shutil.which("valgrind"):
            sys.exit("valgrind is not installed (apt-get install valgrind)")
        variants = [(p, PAIRS[p]) for p in pairs]
        variants += [(p + "+timer", (PAIRS[p][0], ATTRIBUTION[p])) for p in pairs
                     if p in ATTRIBUTION and not a.no_attribution]
        variants += [(p + "+alpn", (PAIRS[p][0], ATTRIBUTION_ALPN[p])) for p in pairs
                     if p in ATTRIBUTION_ALPN and not a.no_attribution]
        # Client-side closes, per side: (bare, lameduck); 0 = keep-alive throughout.
        closes = {name: (0, 0) for name, _ in variants}
        if a.goaway_chance is not None:
            # The option's cost apart from the new connections it causes: the same servers
            # with the client closing every 1/P-th request of a connection ("+churn"), against
            # the lameduck server drawing at P with a keep-alive client ("+goaway"; its bare
            # side closes like "+churn").
            every = max(1, round(1 / float(a.goaway_chance))) if float(a.goaway_chance) > 0 else 0
            for p in pairs:
                if p in TLS_MODES:
                    continue
                variants.append((p + "+churn", PAIRS[p]))
                closes[p + "+churn"] = (every, every)
                variants.append((p + "+goaway", (PAIRS[p][0], PAIRS[p][1] + ["--goaway-chance", a.goaway_chance])))
                closes[p + "+goaway"] = (every, 0)
        for name, cmds in variants:
            tls_mode = TLS_MODES.get(name.split("+")[0])
            # A new connection per request costs a full handshake: fewer requests per run.
            requests = a.tls_conn_requests if tls_mode == "conn" else a.requests
            servers = []
            try:
                for side, cmd in zip(("bare", "lameduck"), cmds):
                    prefix = os.path.join(a.out, f"callgrind.{name}.{side}")
                    for old in glob.glob(prefix + "*"):
                        os.remove(old)
                    wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}.%p"]
                    s = Server(cmd, wrapper, stderr_path=os.path.join(a.out, f"valgrind.{name}.{side}.log"))
                    s.prefix = prefix
                    load(s.addr, 200 if tls_mode == "conn" else 1000, a.connections,
                         tls_mode=tls_mode)  # warm-up
                    servers.append(s)
                samples = ([], [])
                for side in order(a.rounds):
                    s = servers[side]
                    ir, path = callgrind_measure(s, s.prefix, requests, a.connections, closes[name][side],
                                                 tls_mode)
                    samples[side].append(ir)
                    dumps[(name, side)] = path
                    log(f"callgrind {name:<12} {('bare', 'lameduck')[side]:<8} {ir:>10.0f} Ir/request")
                cg[name] = samples
                cg_requests[name] = requests
            finally:
                for s in servers:
                    s.stop()

    wr = {}
    if not a.no_wrk:
        for p in pairs:
            if p in TLS_MODES:
                continue  # wrk speaks HTTP/1 only, and its TLS is another client's
            servers = []
            try:
                for cmd in PAIRS[p]:
                    s = Server(cmd)
                    subprocess.run(["wrk", "-t1", f"-c{a.connections}", "-d1s", f"http://{s.addr}/"],
                                   capture_output=True, timeout=60)  # warm-up
                    servers.append(s)
                samples = ([], [])
                for side in order(a.rounds):
                    r = wrk_run(servers[side], a.wrk_duration, a.connections, use_perf)
                    samples[side].append(r)
                    log(f"wrk {p:<6} {('bare', 'lameduck')[side]:<8} {r['rps']:>9.0f} req/s  p50 {r['p50']:.3f} ms  "
                        f"p99 {r['p99']:.3f} ms  cpu {r['cpu_us']:.2f} us/req"
                        + (f"  {r['instructions']:.0f} instr/req" if r.get("instructions") else "")
                        + (f"  non-2xx {r['errors']}" if r["errors"] else "")
                        + (f"  socket errors: {r['socket']}" if r["socket"] else ""))
                wr[p] = samples
            finally:
                for s in servers:
                    s.stop()

    med = statistics.median
    if cg:
        print(f"\n### Instructions per request (callgrind, user space, {a.requests} requests per run, "
              f"{a.connections} connections, {a.rounds} runs per server, A/B alternating)\n")
        print("| pair | bare Ir/req (median) | lameduck Ir/req (median) | lameduck − bare | ratio | per-run ratios | runs bare / lameduck (min–max) | goal ≤ 1.05x |")
        print("|---|---:|---:|---:|---:|---|---|---|")
        for name, (bare, ld) in cg.items():
            ratio = med(ld) / med(bare)
            per_run = ", ".join(f"{l / b:.3f}" for b, l in zip(bare, ld))
            spread = f"{min(bare):.0f}–{max(bare):.0f} / {min(ld):.0f}–{max(ld):.0f}"
            attr = attribution(name)
            verdict = "(attribution)" if attr else ("met" if ratio <= GOAL else "NOT MET")
            change = "hyper timer" if "+timer" in name else "ALPN-chosen hyper connection"
            label = f"{name.split('+')[0]}: bare vs bare + {change}" if attr else name
            print(f"| {label} | {med(bare):.0f} | {med(ld):.0f} | {med(ld) - med(bare):+.0f} | {ratio:.3f}x | "
                  f"{per_run} | {spread} | {verdict} |")
        if any(n.split("+")[0] in TLS_MODES for n in cg):
            print(f"\nTLS pairs: `bench_tls_load`, each request of hyper-tls-conn on a new connection (a full "
                  f"handshake, ALPN http/1.1, `Connection: close`; {a.tls_conn_requests} requests per run), "
                  f"hyper-tls-h1/-h2 keep-alive (ALPN http/1.1 / h2); the certificate: ECDSA P-256, self-signed.")
        for name, (_, ld) in cg.items():
            base = name.split("+")[0]
            if name.endswith("+goaway") and base in cg and base + "+churn" in cg:
                off, churn = med(cg[base][1]), med(cg[base + "+churn"][1])
                print(f"\n{base} with --goaway-chance {a.goaway_chance}: {med(ld):.0f} Ir/req; option off "
                      f"{off:.0f} ({med(ld) / off:.3f}x, the new connections included); option off with the "
                      f"client closing as often {churn:.0f} ({med(ld) / churn:.3f}x: the option's own cost)")
    if wr:
        print(f"\n### wrk (native, `wrk -t1 -c{a.connections} -d{a.wrk_duration} --latency`, {a.rounds} runs per "
              "server, A/B alternating; medians over runs; not the gate)\n")
        cols = "| pair | server | req/s median | req/s min–max | p50 latency ms | p99 latency ms | CPU us/req | CPU ratio |"
        if use_perf:
            cols += " instr/req (perf) | ratio |"
        print(cols)
        print("|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if use_perf else ""))
        for p, (bare, ld) in wr.items():
            for side, runs in (("bare", bare), ("lameduck", ld)):
                rps = [r["rps"] for r in runs]
                cpu = med([r["cpu_us"] for r in runs])
                cpu_bare = med([r["cpu_us"] for r in bare])
                line = (f"| {p} | {side} | {med(rps):.0f} | {min(rps):.0f}–{max(rps):.0f} | "
                        f"{med([r['p50'] for r in runs]):.3f} | {med([r['p99'] for r in runs]):.3f} | "
                        f"{cpu:.2f} | {cpu / cpu_bare:.3f}x |")
                if use_perf:
                    ins = med([r["instructions"] for r in runs])
                    ins_bare = med([r["instructions"] for r in bare])
                    line += f" {ins:.0f} | {ins / ins_bare:.3f}x |"
                print(line)
    if cg and not a.no_attribution:
        for name in cg:
            if (name, 0) not in dumps or (name, 1) not in dumps:
                continue
            bare, ld = annotate(dumps[(name, 0)]), annotate(dumps[(name, 1)])
            diffs = sorted(((ld.get(f, 0) - bare.get(f, 0)) / cg_requests[name], f) for f in set(bare) | set(ld))
            print(f"\n#### {name}: functions whose self cost per request differs most (lameduck − bare, Ir/request; "
                  f"last run's dumps: {os.path.relpath(dumps[(name, 0)], ROOT)}, {os.path.relpath(dumps[(name, 1)], ROOT)})\n")
            print("| Ir/req | function |")
            print("|---:|---|")
            top = [d for d in reversed(diffs) if d[0] > 0][:20] + [d for d in diffs if d[0] < 0][:6]
            for d, f in top:
                print(f"| {d:+.1f} | `{short(f)}` |")
    print(f"\n(run took {time.monotonic() - started:.0f} s; load average at end {os.getloadavg()[0]:.2f}; "
          f"hardware instruction counter: {'yes' if use_perf else 'no (perf stat -e instructions: not supported)'})")
    if a.gate is not None and cg:
        over = [(name, med(ld) / med(bare)) for name, (bare, ld) in cg.items()
                if not attribution(name) and med(ld) / med(bare) > a.gate]
        for name, ratio in over:
            print(f"GATE FAILED: {name}: {ratio:.3f}x the bare server's instructions per request (gate {a.gate}x)")
        if over:
            sys.exit(1)
        print(f"gate passed: every pair within {a.gate}x")


if __name__ == "__main__":
    main()
