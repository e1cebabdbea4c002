"""What a proof sets up before its first run, and how it says a setup went wrong: the example
servers' release build, and room for many sockets (the soft limit on open files, which the
servers started from here inherit)."""

import os
import resource

from harness.builds import cargo_build, examples_dir
from harness.processes import log

# Descriptors a proof needs besides its sockets' (logs, pipes, an event loop...).
SPARE_FDS = 64


class SetupError(Exception):
    """A setup problem (exit status 2), not a failed assertion."""


def raise_fd_limit(n, what="sockets"):
    """Raises this process's soft limit on open files to hold `n` of `what`; SetupError when
    the hard limit is too low."""
    need = n + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise SetupError(f"{n} {what} need {need} open files; the hard limit is {hard} (ulimit -Hn)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def ready_examples(runtimes, no_build):
    """Builds the example servers `runtimes` (release) unless `no_build`, and checks their
    binaries are there; False (each problem logged) when not."""
    if not no_build:
        targets = [flag for r in runtimes for flag in ("--example", r)]
        if not cargo_build(*targets):
            return False
    examples = examples_dir()
    for runtime in runtimes:
        if not os.path.isfile(os.path.join(examples, runtime)):
            log(f"error: {os.path.join(examples, runtime)} does not exist (build without --no-build)")
            return False
    return True
