"""The proofs' command lines: the parser each proof starts from, the options they share
(--runtimes, --no-build, --keep, --json), the comma-separated lists their options take, and
the short and full forms.

A proof's short form (`--short`) is what CI runs, its full form (`--full`) the release check:
each one or more command lines of the proof itself (its module's `SHORT`, and `FULL`, the
defaults alone unless the module says otherwise), run one after the other in one process
(`run_forms`, called by `python3 tests/proofs PROOF`), each with whatever else was given
(so `--short --keep` keeps every short run's logs). The exit status is 1 when one of them
failed, else the first other nonzero status (2: a setup problem), else 0."""

import argparse
import shlex

from harness.builds import RUNTIMES
from harness.processes import log


def parser(name, doc):
    """The parser of proof `name`, its description `doc` (the module's docstring) as written."""
    return argparse.ArgumentParser(
        prog=f"tests/proofs {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_runtimes(p, default=None, what="comma-separated example servers"):
    """--runtimes, every example server by default."""
    p.add_argument("--runtimes", default=",".join(RUNTIMES) if default is None else default, help=what)


def add_run_options(p, json=True, keep=True):
    """--no-build, --keep (unless `keep` is False) and --json FILE (unless `json` is False)."""
    p.add_argument("--no-build", action="store_true", help="use the existing release build")
    if keep:
        p.add_argument("--keep", action="store_true", help="keep every run's logs (failed runs always keep them)")
    if json:
        p.add_argument("--json", help="also write all results as JSON to this file")


def parse_list(p, text, known, what, least=1):
    """The comma-separated items of `text`; `p.error` on one not in `known` or on fewer than
    `least` of them."""
    items = [x for x in text.split(",") if x]
    for x in items:
        if x not in known:
            p.error(f"unknown {what} {x!r} (known: {', '.join(known)})")
    if len(items) < least:
        p.error(f"at least {least} {what}" + ("" if least == 1 else "s"))
    return items


def parse_runtimes(p, text, known=RUNTIMES, least=1):
    """The comma-separated example servers of `text` (`p.error` on an unknown one, or on none)."""
    return parse_list(p, text, known, "runtime", least)


# A proof's full form when its module has no FULL: the defaults.
DEFAULTS = [[]]


def describe(forms):
    """The command lines of `forms`, for a help text."""
    return " then ".join(f"`{shlex.join(form)}`" if form else "the defaults" for form in forms)


def add_forms(p, short, full=DEFAULTS):
    """--short and --full, described by the command lines of `short` and `full` (see
    `run_forms`)."""
    p.add_argument("--short", action="store_true", help=f"CI's run: {describe(short)}")
    p.add_argument("--full", action="store_true", help=f"the release check's run: {describe(full)}")


def run_forms(main, argv, short, full=DEFAULTS):
    """`main(argv)`; with `--short` (`--full`) in `argv`, `main(form + the rest of argv)` for
    each of `short` (`full`) in turn. The exit status (see the module's docstring)."""
    argv = list(argv or [])
    if "--short" in argv and "--full" in argv:
        log("error: --short or --full, not both")
        return 2
    forms = short if "--short" in argv else full if "--full" in argv else None
    if forms is None:
        return main(argv)
    rest = [a for a in argv if a not in ("--short", "--full")]
    codes = []
    for k, form in enumerate(forms, 1):
        if len(forms) > 1:
            log(f"\n==> run {k}/{len(forms)}: {shlex.join(form + rest) or '(the defaults)'}")
        codes.append(main(form + rest))
    if 1 in codes:
        return 1
    return next((c for c in codes if c), 0)
