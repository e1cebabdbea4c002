"""Every restart proof in one run: builds the examples once (release), then runs

  socket_activation      wrk through 3 restarts on a systemd-style inherited socket, per
                         runtime, and one run under Debian's systemd-socket-activate (tokio)
  handover               wrk through 3 SIGUSR2 hand-overs to a successor, per runtime
  bad_inputs             bad inherited state, socket names, failed hand-overs, per runtime

each as its own process (`python3 tests/proofs NAME --bin-dir DIR`), one after the other, and
prints each one's status and time. With --short (--full), each proof's short (full) form:
`NAME --short`, what `python3 tests/proofs all --short` runs of them (`NAME --full`).

Stdlib only. Loopback only. Each proof kills its own children; this one ends a proof that
outlives its bound, or that runs when this one gets SIGTERM or Ctrl-C, by its PID (SIGTERM,
so that the proof kills its children, then SIGKILL).

Exit status: 0 when every proof passed; 1 when one failed; 2 on a setup problem.
"""

import importlib
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


def main(argv=None):
    p = h.parser("run_all", __doc__)
    h.add_runtimes(p)
    p.add_argument("--only", help="comma-separated proofs to run (socket_activation, handover, bad_inputs)")
    c.add_build_flags(p)
    p.add_argument("--keep", action="store_true", help="keep every run's logs")
    p.add_argument("--tls", action="store_true", help="serve and load over TLS (socket activation and hand-over)")
    forms = p.add_mutually_exclusive_group()
    forms.add_argument("--short", action="store_true", help="each proof's short form (`NAME --short`)")
    forms.add_argument("--full", action="store_true", help="each proof's full form (`NAME --full`)")
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
    form = "--short" if args.short else "--full" if args.full else None
    if form:
        runtimes = h.RUNTIMES
    examples = h.ready_examples(runtimes, args)
    if examples is None:
        return 2
    estimate = sum(per * len(runtimes) + fixed for _, per, fixed, _ in scripts)
    h.log(f"==> restart proofs on {', '.join(runtimes)}: estimated {estimate // 60} min {estimate % 60} s")

    rows, failed = [], []
    for script, per, fixed, bound in scripts:
        # A short or full form may be several runs of the proof.
        module = importlib.import_module(f"restart.{script}")
        runs = len(module.SHORT if args.short else getattr(module, "FULL", h.DEFAULTS)) if form else 1
        cmd = [sys.executable, h.PROOFS, script, "--bin-dir", examples]
        cmd += [form] if form else ["--runtimes", ",".join(runtimes)]
        if args.keep:
            cmd.append("--keep")
        if args.tls and script != "bad_inputs":
            cmd.append("--tls")
        h.log(f"\n==> {' '.join(cmd)}")
        started = time.monotonic()
        proc = h.spawn(cmd, None, None)
        try:
            code = proc.wait(timeout=runs * bound * len(runtimes) + 60)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            h.end_process(proc)
        took = time.monotonic() - started
        result = "ok" if code == 0 else ("TIMEOUT (killed)" if code is None else f"FAIL (exit {code})")
        if code != 0:
            failed.append(script)
        rows.append([script, f"{took:.0f}s", f"~{per * len(runtimes) + fixed}s", result])
    h.log("\n" + h.table(["proof", "time", "estimate", "result"], rows))
    return h.conclude(failed, "every restart proof passed.")

