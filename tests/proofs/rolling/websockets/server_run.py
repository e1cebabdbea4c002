"""What a run of the websockets proof shares, whichever its scenario: the server run (a
harness DrainRun whose clients live in one asyncio event loop, watched for lateness), the
checks of the server's exit and summary, and the end of whatever the clients left open."""

import asyncio
import time

import harness as h
from rolling.websockets.library import normal_client, timed_connection_class

# Every socket's first echo comes within this long of the server's start.
FIRST_ECHO_TIMEOUT_S = 60
# Opening handshakes in flight at once (the listener's backlog is not flooded).
CONNECT_CONCURRENCY = 64


class WsRun(h.DrainRun):
    """One server run of `scenario` (drain, bad-input) on `runtime` in `mode`."""

    def __init__(self, binary, runtime, mode, args, scenario):
        super().__init__(f"websockets-{scenario}-{runtime}-{mode}", mode, args, scenario=scenario, runtime=runtime)
        self.binary, self.runtime, self.args = binary, runtime, args
        self.max_lag = 0.0

    def start(self):
        self.start_server(self.binary, self.runtime, self.flags)

    async def lag_monitor(self):
        """The event loop's lateness after SIGTERM (a late loop sees every Close late)."""
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            if self.t_term is not None:
                self.max_lag = max(self.max_lag, time.monotonic() - t - 0.01)

    async def wait_clients(self, finished, until):
        """Waits until `finished()` or `until` (monotonic), watching the server's exit."""
        while True:
            self.watch_exit()
            if finished() or time.monotonic() >= until:
                return
            await asyncio.sleep(0.02)

    def reap(self):
        """Waits for the server's exit (bounded) once the clients are done."""
        if self.t_term is not None:
            self.wait_exit(h.ends_bound(self.args.delay, self.args.grace))

    def drive(self, normals, others, open_other, body):
        """Runs the scenario in one event loop: the server started, the clients of the
        library `normals` and the raw clients `others` (each run by `open_other(c, port,
        sem)`) started, then `body()`; whatever the clients left open is ended. Then the
        bounded wait for the server's exit. What ended the run early is recorded; the server
        is killed if it still runs."""

        async def scenario():
            monitor = asyncio.create_task(self.lag_monitor())
            try:
                self.start()
                sem = asyncio.Semaphore(CONNECT_CONCURRENCY)
                connection_class = timed_connection_class()
                port = self.inst.port
                for c in normals:
                    c.task = asyncio.create_task(
                        normal_client(c, port, sem, self.args.echo_interval, connection_class)
                    )
                for c in others:
                    c.task = asyncio.create_task(open_other(c, port, sem))
                await body()
            finally:
                monitor.cancel()
                await cleanup(normals + others)

        try:
            asyncio.run(scenario())
            self.reap()
        except Exception as e:  # noqa: BLE001 (a setup problem, or a failed run with the logs kept)
            self.record(e)
        finally:
            self.kill_server()

    def finish(self):
        self.kill_server()
        self.result["client_loop_lag_max_s"] = round(self.max_lag, 4)
        return self.end(self.args.keep)

    def check_server(self, n_long_running=None, **fields):
        """The server's drain line (informative), exit, panics and termination summary: with
        `n_long_running`, streams_ended=<it> streams_remaining=0 and `fields`
        (check_streams_summary); without, streams_remaining=0 and `fields` alone."""
        r, failures = self.result, self.failures
        stderr_path = self.inst.stderr_path if self.inst else None
        r["drain"] = h.drain_line(stderr_path) if stderr_path else None
        r["exit_code"] = self.code
        r["exit_s"] = h.check_server_exit(
            self.code, self.exit_at, self.t_term, h.ends_bound(self.args.delay, self.args.grace), failures
        )
        if stderr_path:
            panics = panic_lines(stderr_path)
            if panics:
                failures.append(f"the server logged {len(panics)} panics (first: {panics[0][:200]})")
        if n_long_running is not None:
            r["summary"] = h.check_streams_summary(stderr_path, n_long_running, failures, **fields)
        else:
            summary = h.termination_summary(stderr_path) if stderr_path else None
            r["summary"] = summary
            if summary is None:
                failures.append("the server logged no termination summary")
            else:
                for field, value in {"streams_remaining": "0", **fields}.items():
                    if summary.get(field) != value:
                        failures.append(f"summary {field}={summary.get(field)}, want {value}")
        if failures and stderr_path:
            r["server_log"] = h.server_log_lines(stderr_path)


def panic_lines(stderr_path):
    with open(stderr_path, "r", errors="replace") as f:
        return [line.rstrip("\n") for line in f if "panicked" in line]


async def cleanup(clients):
    """Ends whatever the run left open: the clients' tasks and connections."""
    for c in clients:
        ws = getattr(c, "ws", None)
        if ws is not None and ws.transport is not None:
            if not c.done:
                c.gave_up = True
            ws.transport.abort()
        p = getattr(c, "p", None)
        if p is not None:
            if p.ended_at is None:
                c.gave_up = True
            p.abort()
        if c.task is not None and not c.task.done():
            c.task.cancel()
    tasks = [c.task for c in clients if c.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=5)
