"""`python3 tests/proofs PROOF [ARGS...]`: runs one proof with ARGS; `python3 tests/proofs all
(--short | --full)` runs every proof; without arguments, lists the proofs."""

import importlib
import sys

import harness as h
import suite
from catalog import AGGREGATES, PROOFS

PROG = "tests/proofs"


def listing():
    width = max(len(name) for name in PROOFS)
    lines = [
        f"usage: python3 {PROG} PROOF [ARGS...]",
        f"       python3 {PROG} PROOF --help    (what PROOF checks, and its options)",
        f"       python3 {PROG} PROOF --short   (its short form: what CI runs)",
        f"       python3 {PROG} PROOF --full    (its full form: the release check)",
        f"       python3 {PROG} all --short     (every proof's short form, one after the other: CI)",
        f"       python3 {PROG} all --full      (every proof's full run: the release check)",
        f"       python3 {PROG} all --help      (--only, --skip, --no-build, --keep)",
        "",
        "proofs:",
    ]
    lines += [
        f"  {name.ljust(width)}  {what}" + (" (not in `all`)" if name in AGGREGATES else "")
        for name, (_, what) in PROOFS.items()
    ]
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help", "help", "list"):
        print(listing())
        return 0
    name = args[0]
    if name == "all":
        h.run_main(lambda: suite.main(args[1:]))
    if name not in PROOFS:
        print(f"error: unknown proof {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    proof = importlib.import_module(PROOFS[name][0])
    if not hasattr(proof, "SHORT"):
        # An aggregate: it passes --short and --full on to the proofs it runs.
        h.run_main(lambda: proof.main(args[1:]))
    h.run_main(lambda: h.run_forms(proof.main, args[1:], proof.SHORT, getattr(proof, "FULL", h.DEFAULTS)))


if __name__ == "__main__":
    sys.exit(main())
