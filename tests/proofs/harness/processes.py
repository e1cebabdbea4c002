"""Child processes tracked by PID and killed on every exit path (`run_main`), the proofs' log
lines, durations, file tails and result tables."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

# Children alive right now, by PID: killed on the way out, however the proof ends.
_children = {}
_children_lock = threading.Lock()


def log(msg):
    print(msg, flush=True)


def log_run(r, keep_logs):
    """Logs one run's events, notes and problems, and where its logs are kept when
    `keep_logs` (the caller decides: problems, or --keep)."""
    for e in r["events"]:
        log("    " + e)
    for n in r.get("notes", []):
        log("    note: " + n)
    for problem in r["problems"]:
        log("    PROBLEM: " + problem)
    if keep_logs:
        log(f"    logs kept in {r['workdir']}")


def fmt_ms(ms):
    return f"{ms / 1000:g}s" if ms % 1000 == 0 else f"{ms}ms"


def fmt_s(v):
    """Seconds with three decimals (`1.234s`), or `-` for None."""
    return "-" if v is None else f"{v:.3f}s"


def fmt_duration(seconds):
    """A duration as minutes and seconds (`4m07s`), as .ci/run prints its steps' times."""
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def tail(path, n=20):
    """The last `n` lines of the file at `path`, or "" when it cannot be read."""
    try:
        with open(path, "r", errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def table(head, rows, markdown=False):
    """`rows` under `head` in aligned columns, or as a Markdown table (a `|` in a cell
    escaped)."""
    rows = [[str(c) for c in row] for row in rows]
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(out)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def check_tools(*tools, hint=""):
    """True when every one of `tools` is on PATH; else logs each missing one (with `hint`, how
    to install them) and returns False."""
    missing = [t for t in tools if not shutil.which(t)]
    for t in missing:
        log(f"error: {t} not found" + (f" ({hint})" if hint else ""))
    return not missing


def spawn(args, stdout, stderr, env=None, pass_fds=()):
    """Starts `args` with NO_COLOR=1 and `env` (name: value, or None to remove the name) over
    this process's environment, and with the descriptors `pass_fds` left open."""
    environ = dict(os.environ, NO_COLOR="1")
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=environ,
        pass_fds=pass_fds,
    )
    with _children_lock:
        _children[proc.pid] = proc
    return proc


def reap(proc, timeout):
    """Waits up to `timeout` seconds for `proc`; kills it (by PID) if it is still running."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        return None
    finally:
        with _children_lock:
            _children.pop(proc.pid, None)


def kill(proc):
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with _children_lock:
        _children.pop(proc.pid, None)


def wait_until(ready, proc, timeout, step=0.05):
    """Waits until `ready()` (an OSError from it counts as not yet), `timeout` seconds at most;
    True when ready, False after the timeout or once `proc` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        time.sleep(step)
    return False


def end_process(proc, grace=15):
    """Ends `proc` by its PID: SIGTERM first, so that a proof run as a child kills its own
    children, then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    kill(proc)


def kill_all_children():
    with _children_lock:
        procs = list(_children.values())
    for proc in procs:
        kill(proc)


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run_main(main):
    """Runs `main()` as the proof's body: SIGTERM ends it like Ctrl-C, and every child still
    running is killed by its PID however it ends. Exits with main's status (130 when
    interrupted)."""
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    finally:
        kill_all_children()
    sys.exit(code)
