"""`python3 tests/proofs all (--short | --full)`: every proof, one after the other, each as its
own process (`python3 tests/proofs NAME --short|--full --no-build`), after one release build
of what they need (unless --no-build): the example servers, and each proof's `BUILDS`.

  --short   each proof's short form (`NAME --short`): what CI runs
  --full    each proof's full form (`NAME --full`: its defaults, and for some the variants
            CI runs too, TLS for one): the release check
  --only a,b / --skip a,b   run only these proofs / all but these
  --keep    pass --keep to every proof (keep every run's logs)

Each proof's output streams through; each one's end prints its result and how long it took,
and the end a table of them all with the total. A proof still running after its bound (30
minutes for a short form, 2 hours for a full run) is ended (SIGTERM, so that it kills its own
children, then SIGKILL) and counted as failed.

Exit status: 0 when every proof passed; 1 when one failed; 2 when the rest passed but one
had a setup problem (or the build failed)."""

import importlib
import subprocess
import sys
import time

import harness as h
from catalog import AGGREGATES, PROOFS

# The bound on one proof's run, in seconds, by form.
BOUNDS = {"short": 30 * 60, "full": 2 * 60 * 60}


def parse_args(argv):
    p = h.parser("all", __doc__)
    form = p.add_mutually_exclusive_group(required=True)
    form.add_argument("--short", action="store_true", help="each proof's short form (what CI runs)")
    form.add_argument("--full", action="store_true", help="each proof's full form (the release check)")
    names = [n for n in PROOFS if n not in AGGREGATES]
    p.add_argument("--only", default="", help="comma-separated proofs to run (default: all of them)")
    p.add_argument("--skip", default="", help="comma-separated proofs to leave out")
    p.add_argument("--no-build", action="store_true", help="use the existing release build")
    p.add_argument("--keep", action="store_true", help="pass --keep to every proof")
    args = p.parse_args(argv)
    only = h.parse_list(p, args.only, names, "proof", least=0)
    skip = h.parse_list(p, args.skip, names, "proof", least=0)
    selected = [n for n in names if (not only or n in only) and n not in skip]
    if not selected:
        p.error("no proof left to run")
    return args, selected


def build(selected):
    """The one release build: the example servers, then each selected proof's BUILDS."""
    builds = [["--examples"]]
    for name in selected:
        for extra in getattr(importlib.import_module(PROOFS[name][0]), "BUILDS", []):
            if extra not in builds:
                builds.append(extra)
    return all(h.cargo_build(*b) for b in builds)


def run_one(name, form, keep):
    """Runs proof `name` in `form` as a child process; (its exit status or None after its
    bound, seconds it took)."""
    cmd = [sys.executable, h.PROOFS, name, f"--{form}", "--no-build"]
    if keep:
        cmd.append("--keep")
    started = time.monotonic()
    proc = h.spawn(cmd, None, None)
    try:
        code = proc.wait(timeout=BOUNDS[form])
    except subprocess.TimeoutExpired:
        code = None
    finally:
        h.end_process(proc)
    return code, time.monotonic() - started, cmd


def verdict(code):
    if code == 0:
        return "ok"
    if code is None:
        return "TIMEOUT (ended)"
    return "SETUP PROBLEM (exit 2)" if code == 2 else f"FAILED (exit {code})"


def main(argv):
    args, selected = parse_args(argv)
    form = "short" if args.short else "full"
    h.raise_fd_limit()
    started = time.monotonic()
    if not args.no_build and not build(selected):
        h.log("error: the release build failed")
        return 2
    built = time.monotonic() - started
    rows, codes = [], []
    for k, name in enumerate(selected, 1):
        h.log(f"\n==> [{k}/{len(selected)}] {name} ({form})")
        code, took, cmd = run_one(name, form, args.keep)
        h.log(f"<== {name} ({form}): {verdict(code)} in {h.fmt_duration(took)}   [{' '.join(cmd[1:])}]")
        rows.append([name, h.fmt_duration(took), verdict(code)])
        codes.append(code)
    proofs_took = time.monotonic() - started - built
    h.log(f"\n==> all --{form}: {len(selected)} proofs in {h.fmt_duration(proofs_took)}"
          + ("" if args.no_build else f" after the build ({h.fmt_duration(built)})"))
    h.log(h.table(["proof", "time", "result"], rows + [["total", h.fmt_duration(proofs_took), ""]]))
    if any(c != 0 and c != 2 for c in codes):
        h.log("\nFAILED: " + ", ".join(n for n, c in zip(selected, codes) if c != 0 and c != 2))
        return 1
    if any(codes):
        h.log("\nSETUP PROBLEM: " + ", ".join(n for n, c in zip(selected, codes) if c))
        return 2
    h.log(f"\nOK: every proof passed ({form}).")
    return 0
