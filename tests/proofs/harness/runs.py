"""One run of a proof, and how a proof ends: the run's record (`Run`: its fields, events, setup
problem, failed assertions and work directory; the example server it starts and terminates),
its log (`log_result`), and the proof's exit status once every run is done (`exit_status`).

A run's record is a dict: besides its own fields, `events` (what happened when, timed from the
run's start), `setup_error` (a setup problem: exit status 2, not a failed assertion),
`failures` (its failed assertions), `workdir` (its logs, None once removed) and `duration_s`.
"""

import json
import os
import shutil
import signal
import tempfile
import time

from harness.processes import kill, log, reap
from harness.servers import Instance, free_port
from harness.setup import SetupError

# How long an example server may take to print its `listening on` line.
START_TIMEOUT_S = 30


class Run:
    """One run: its result record (`fields` first), a work directory for its logs (named
    after `prefix`), a log of what happened when, and the example server it starts (`inst`,
    called `name`), terminates (`t_term`) and sees exit (`exit_at`, `code`)."""

    def __init__(self, prefix, **fields):
        self.t0 = time.monotonic()
        self.workdir = tempfile.mkdtemp(prefix=f"{prefix}-")
        self.result = {**fields, "setup_error": None, "failures": [], "events": [], "workdir": self.workdir}
        self.failures = self.result["failures"]
        self.inst = self.name = None
        self.t_term = self.exit_at = self.code = None

    def note(self, msg):
        """Logs `msg`, timed from the run's start."""
        self.result["events"].append(f"{time.monotonic() - self.t0:6.2f}s {msg}")

    def record(self, error):
        """Records the exception that ended the run early: a SetupError as its setup problem,
        any other as a failure (the logs are then kept)."""
        if isinstance(error, SetupError):
            self.result["setup_error"] = str(error)
        else:
            self.failures.append(f"{type(error).__name__}: {error}")

    def start_server(self, binary, name, flags, tls=None, port=None, timeout=START_TIMEOUT_S):
        """Starts example server `binary` as `name` on 127.0.0.1:`port` (a free port when None;
        0: the one it picks) with `flags` (and `tls`'s), its logs in the work directory, and
        notes where it listens; SetupError when it does not start."""
        self.name = name
        self.inst = Instance(binary, name, free_port() if port is None else port, flags, self.workdir, tls=tls)
        try:
            self.inst.start(timeout=timeout)
        except RuntimeError as e:
            raise SetupError(str(e)) from e
        self.note(f"{name} listening on 127.0.0.1:{self.inst.port} (pid {self.inst.proc.pid}): "
                  f"{' '.join(self.inst.flags)}")
        return self.inst

    def alive(self):
        return self.inst.proc.poll() is None

    def check_running(self):
        """SetupError when the server has exited already."""
        if not self.alive():
            raise SetupError(
                f"{self.name} exited {self.inst.proc.returncode} before SIGTERM:\n{self.inst.stderr_tail()}"
            )

    def sigterm(self):
        """Sends the server SIGTERM, now (`t_term`)."""
        self.t_term = time.monotonic()
        os.kill(self.inst.proc.pid, signal.SIGTERM)
        self.note(f"SIGTERM to {self.name} (pid {self.inst.proc.pid})")

    def watch_exit(self):
        """Notes the server's exit (`exit_at`, `code`) once it has exited."""
        if self.exit_at is None and self.inst is not None and self.inst.proc.poll() is not None:
            self.exit_at, self.code = time.monotonic(), self.inst.proc.returncode

    def wait_exit(self, bound_s, slack=10):
        """Waits for the server's exit until `bound_s` + `slack` seconds after SIGTERM (then it
        is killed, and the run fails)."""
        self.watch_exit()
        if self.exit_at is None:
            got = reap(self.inst.proc, max(0.0, self.t_term + bound_s + slack - time.monotonic()))
            if got is None:
                self.failures.append(f"{self.name} still running {bound_s + slack:g}s after SIGTERM: killed")
            else:
                self.exit_at, self.code = time.monotonic(), got
        else:
            reap(self.inst.proc, 5)
        if self.exit_at is not None:
            self.note(f"{self.name} exited {self.code}, +{self.exit_at - self.t_term:.3f}s after SIGTERM")

    def terminate(self, bound_s):
        """SIGTERM, then the bounded wait for the exit (`wait_exit`); (t_term, exit_at, code)."""
        self.sigterm()
        self.wait_exit(bound_s)
        return self.t_term, self.exit_at, self.code

    def kill_server(self):
        """Kills the server (by its PID) if it still runs."""
        if self.inst is not None and self.inst.proc is not None:
            kill(self.inst.proc)

    def end(self, keep):
        """The result, with the run's duration; the work directory is removed unless `keep` or
        the run failed."""
        r = self.result
        r["duration_s"] = round(time.monotonic() - self.t0, 1)
        if not keep and not r["failures"] and not r["setup_error"]:
            shutil.rmtree(self.workdir, ignore_errors=True)
            r["workdir"] = None
        return r


class Problems:
    """Failures of many clients (streams, sockets, connections) of one run, grouped by kind,
    with the first example of each."""

    def __init__(self):
        self.idx, self.examples = {}, {}

    def adder(self, what, index):
        """The function that records a failure (kind, example) of client `what` `index`."""
        def add(kind, example):
            self.idx.setdefault(kind, []).append(index)
            self.examples.setdefault(kind, f"{what} {index}: {example}")
        return add

    def report(self, n, what, failures):
        """Appends to `failures` one line per kind (how many of the `n` `what`, the first
        example); {kind: count}."""
        for kind, idx in self.idx.items():
            failures.append(f"{len(idx)} of {n} {what}: {kind} (first {self.examples[kind]})")
        return {k: len(v) for k, v in self.idx.items()}


def log_result(r, figures=None):
    """Logs one run's result `r`: its events and setup problem, the lines `figures(r)` logs
    (when given), its failed assertions, the server's log lines kept and where its logs are
    kept; last, how long it took and the machine's load."""
    for e in r["events"]:
        log("    " + e)
    if r.get("setup_error"):
        log("    SETUP: " + r["setup_error"])
    if figures:
        figures(r)
    for f in r["failures"]:
        log("    FAILED: " + f)
    if r.get("server_log"):
        log("    server's log (graceful-termination lines):")
        for line in r["server_log"]:
            log("      " + line)
    if r.get("workdir"):
        log(f"    logs kept in {r['workdir']}")
    log(f"    run took {r['duration_s']:g}s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def log_table(text, indent="    "):
    """Logs `text` (a table) after an empty line, each line indented."""
    log("\n" + "\n".join(indent + line for line in text.split("\n")))


def conclude(bad, ok):
    """The proof's end from `bad`, the failures it found: FAILED and each of them (exit status
    1), or OK and `ok` (0)."""
    if bad:
        log("\nFAILED:\n  " + "\n  ".join(bad))
        return 1
    log("\nOK: " + ok)
    return 0


def exit_status(results, args, where):
    """Writes every run's result to --json when asked, logs each failed assertion and setup
    problem after `where(r)` (its run), and returns the exit status: 1 on a failed assertion,
    2 on a setup problem alone, 0 when every assertion held (the caller then says what held)."""
    if getattr(args, "json", None):
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1, default=str)
            f.write("\n")
    bad = [r for r in results if r["failures"]]
    if bad:
        log("\nFAILED:")
        for r in bad:
            for f in r["failures"]:
                log(f"  {where(r)}: {f}")
        return 1
    setup = [r for r in results if r.get("setup_error")]
    if setup:
        log("\nSETUP PROBLEM:\n  " + "\n  ".join(f"{where(r)}: {r['setup_error']}" for r in setup))
        return 2
    return 0
