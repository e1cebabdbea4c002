"""What a proof sets up before its first run, and how it says a setup went wrong: the example
servers' release build, room for many sockets (the soft limit on open files, which the
servers started from here inherit), and whether grpcio can run here."""

import os
import resource
import subprocess
import sys

from harness.builds import GRPCIO_LOAD, ROOT, cargo_build, examples_dir
from harness.processes import log

# Descriptors a proof needs besides its sockets' (logs, pipes, an event loop...).
SPARE_FDS = 64


class SetupError(Exception):
    """A setup problem (exit status 2), not a failed assertion."""


def raise_fd_limit(n=None, what="sockets"):
    """Raises this process's soft limit on open files: to hold `n` of `what` (SetupError when
    the hard limit is too low), or with `n` None as far as the hard limit allows. Returns the
    soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if n is None:
        want = hard if hard != resource.RLIM_INFINITY else 1 << 20
        if want > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            except (ValueError, OSError):
                return soft
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    need = n + SPARE_FDS
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise SetupError(f"{n} {what} need {need} open files; the hard limit is {hard} (ulimit -Hn)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def grpcio_missing(load=False):
    """Why this Python cannot run grpcio, or with `load` grpcio_load.py (the load script,
    run as a process of its own); None when it can. The import is tried in a child process,
    so that grpc's threads never start in the proof's own."""
    if load and not os.path.isfile(GRPCIO_LOAD):
        return f"{os.path.relpath(GRPCIO_LOAD, ROOT)} does not exist"
    done = subprocess.run([sys.executable, "-c", "import grpc"], capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return None
    why = (done.stderr.strip().splitlines() or ["?"])[-1]
    return f"{sys.executable} cannot import grpc ({why}): pip install grpcio"


def ready_examples(names, args, sockets=None, what="sockets"):
    """The directory of the example servers `names`, ready to run: room made for `sockets`
    of `what` (when given: `raise_fd_limit`); `args.bin_dir` when the proof has --bin-dir and
    it is given, else the release build's directory, built first (`cargo build --release
    --example NAME ...`) unless --no-build; each binary checked. None (each problem logged)
    when not ready."""
    if sockets is not None:
        try:
            raise_fd_limit(sockets, what)
        except SetupError as e:
            log(f"error: {e}")
            return None
    if getattr(args, "bin_dir", None):
        examples = os.path.abspath(args.bin_dir)
    else:
        # One build per example from the workspace root, as the black-box suite builds them
        # (the default members selected, so the same features): nothing is compiled again.
        if not args.no_build and not all(cargo_build("--example", name) for name in names):
            return None
        examples = examples_dir()
    for name in names:
        if not os.path.isfile(os.path.join(examples, name)):
            log(f"error: {os.path.join(examples, name)} does not exist (build without --no-build)")
            return None
    return examples
