"""Every restart proof in one run, for CI: builds the examples once (release), then runs

  socket_activation      wrk through 3 restarts on a systemd-style inherited socket, per
                         runtime, and one run under Debian's systemd-socket-activate (tokio)
  handover               wrk through 3 SIGUSR2 hand-overs to a successor, per runtime
  bad_inputs             bad inherited state, socket names, failed hand-overs, per runtime

each as its own process (`python3 tests/proofs NAME --bin-dir DIR`), one after the other, and
prints each one's status and time.

Stdlib only. Loopback only. Each proof kills its own children; this one ends a proof that
outlives its bound, or that runs when this one gets SIGTERM or Ctrl-C, by its PID (SIGTERM,
so that the proof kills its children, then SIGKILL).

Exit status: 0 when every proof passed; 1 when one failed; 2 on a setup problem.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import harness as h
from restart import common as c

# (proof, estimated seconds per runtime, fixed seconds, bound in seconds per runtime)
SCRIPTS = [
    ("socket_activation", 16, 1, 90),
    ("handover", 16, 1, 90),
    ("bad_inputs", 5, 0, 120),
]


def stop(proc):
    """Ends a proof by its PID: SIGTERM first, so that it kills its own children, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    h.kill(proc)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="tests/proofs run_all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runtimes", default=",".join(h.RUNTIMES), help="comma-separated example names")
    p.add_argument("--only", help="comma-separated proofs to run (socket_activation, handover, bad_inputs)")
    c.add_build_flags(p)
    p.add_argument("--keep", action="store_true", help="keep every run's logs")
    p.add_argument("--tls", action="store_true", help="serve and load over TLS (socket activation and hand-over)")
    args = p.parse_args(argv)
    runtimes = h.parse_runtimes(p, args.runtimes)
    scripts = SCRIPTS
    if args.only:
        wanted = {s.strip().removesuffix(".py") for s in args.only.split(",") if s.strip()}
        unknown = wanted - {s for s, *_ in SCRIPTS}
        if unknown:
            p.error(f"unknown proof(s) {', '.join(sorted(unknown))}")
        scripts = [s for s in SCRIPTS if s[0] in wanted]

    if not h.check_tools("wrk", "bash"):
        return 2
    examples = c.build(args)
    if examples is None:
        return 2
    estimate = sum(per * len(runtimes) + fixed for _, per, fixed, _ in scripts)
    h.log(f"==> restart proofs on {', '.join(runtimes)}: estimated {estimate // 60} min {estimate % 60} s")

    rows, failed = [], []
    for script, per, fixed, bound in scripts:
        cmd = [sys.executable, h.PROOFS, script, "--runtimes", ",".join(runtimes), "--bin-dir", examples]
        if args.keep:
            cmd.append("--keep")
        if args.tls and script != "bad_inputs":
            cmd.append("--tls")
        h.log(f"\n==> {' '.join(cmd)}")
        started = time.monotonic()
        proc = h.spawn(cmd, None, None)
        try:
            code = proc.wait(timeout=bound * len(runtimes) + 60)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop(proc)
        took = time.monotonic() - started
        result = "ok" if code == 0 else ("TIMEOUT (killed)" if code is None else f"FAIL (exit {code})")
        if code != 0:
            failed.append(script)
        rows.append([script, f"{took:.0f}s", f"~{per * len(runtimes) + fixed}s", result])
    h.log("\n" + h.table(["proof", "time", "estimate", "result"], rows))
    if failed:
        h.log("\nFAILED: " + ", ".join(failed))
        return 1
    h.log("\nOK: every restart proof passed.")
    return 0

