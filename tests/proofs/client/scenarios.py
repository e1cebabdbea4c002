"""The client proof's runs, one function each: a gRPC rolling update behind HAProxy mode tcp
(rolling_restart_grpc's run, tonic's client with or without the layer), an HTTP rolling update
behind HAProxy mode tcp (counting_server, lameduck; or goserver, Go's net/http), restarts on
one host (socket activation, hand-over) and aiohttp's 429s, under client_load (hyper-util's
client with the layer). Each returns a result dict: the load's counts, the ids processed more
than once, its events and problems."""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import harness as h
from restart import common as c
from restart.handover import socket_identity, wait_new_socket
from rolling import rolling_restart as rr
from rolling import rolling_restart_grpc as rrg

CLIENT_DIR = os.path.join(h.PROOFS, "client")
GOSERVER_DIR = os.path.join(CLIENT_DIR, "goserver")
AIOSERVER = os.path.join(CLIENT_DIR, "aioserver.py")
# client_load's retries with the layer: 4 attempts per request.
RETRIES = 3
# Seconds of load of an HTTP rollout (its two restarts fit), of a one-host run, of aiohttp's.
ROLLOUT_S, ONE_HOST_S, AIOHTTP_S = 16, 15, 8
# One-host restarts: at these seconds into the load.
RESTARTS_AT = (3, 7, 11)


class Result(dict):
    """One run: its fields, events (timed from its start) and problems."""

    def __init__(self, scenario, run, layer, **fields):
        super().__init__(scenario=scenario, run=run, layer=layer, requests=None, failed=None, failures={},
                         retries={}, processed=None, twice=[], events=[], problems=[], workdir=None, **fields)
        self.t0 = time.monotonic()

    def note(self, msg):
        self["events"].append(f"{time.monotonic() - self.t0:6.2f}s {msg}")

    def end(self, keep):
        self["duration_s"] = round(time.monotonic() - self.t0, 1)
        failed = self["problems"] or (self["layer"] and self["failed"])
        if self["workdir"] and not keep and not failed:
            shutil.rmtree(self["workdir"], ignore_errors=True)
            self["workdir"] = None
        return self


def load_command(examples, port, protocol, seconds, layer, prefix, workers=16):
    return [
        os.path.join(examples, "client_load"), "--target", f"http://127.0.0.1:{port}", "--protocol", protocol,
        "--clients", "4", "--workers", str(workers), "--duration", f"{seconds}s", "--post-every", "5",
        "--retries", str(RETRIES if layer else 0), "--id-prefix", prefix,
    ]


class Load:
    """client_load running, its output in the run's directory."""

    def __init__(self, cmd, workdir, seconds):
        self.out_path, self.err_path = os.path.join(workdir, "load.out"), os.path.join(workdir, "load.err")
        self.seconds = seconds
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = h.spawn(cmd, out, err)
        self.started = time.monotonic()

    def finish(self, r):
        """Waits for the load's end and records its counts in `r`."""
        code = h.reap(self.proc, self.seconds + 60)
        with open(self.out_path, errors="replace") as f:
            text = f.read()
        if code != 0 or not text.strip():
            raise RuntimeError(f"client_load exited {code}: {text[-2000:]}{h.tail(self.err_path, 10)}")
        counts = json.loads(text.strip().splitlines()[-1])
        r.update(requests=counts["requests"], failed=counts["failed"], failures=counts["failures"],
                 retries=counts["retries"], posts=counts["posts"], skipped=counts["skipped"],
                 exhausted=counts["exhausted"])
        r.note(f"load done: {counts['requests']} requests ({counts['posts']} marked POSTs), {counts['failed']} "
               f"failed; retries {counts['retries'] or '-'}; skipped {counts['skipped'] or '-'}")
        with open(self.err_path, errors="replace") as f:
            for line in f:
                if line.startswith("failed request: "):
                    r.note("  first of its kind: " + line[len("failed request: "):].strip())

    def stop(self):
        if self.proc.poll() is None:
            h.kill(self.proc)


def check_ids(r, paths):
    """Records in `r` how many requests the servers processed (their id files) and the ids
    processed more than once."""
    seen = {}
    for path in paths:
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                for line in f:
                    rid = line.strip()
                    if rid:
                        seen[rid] = seen.get(rid, 0) + 1
    twice = sorted(rid for rid, n in seen.items() if n > 1)
    r.update(processed=len(seen), twice=twice[:20])
    r.note(f"the servers processed {len(seen)} distinct requests, {len(twice)} of them more than once")
    if twice and not r["scenario"].startswith("go"):
        r["problems"].append(f"{len(twice)} requests processed more than once (first: {twice[:5]})")
    elif twice:
        r.note(f"Go's Shutdown race: {len(twice)} requests processed twice (first: {twice[:5]}): read as it "
               f"closed their connection, then processed unanswered, then retried as idempotent or marked")


def grpc_rollout(examples, front, mode, run, layer, args):
    """rolling_restart_grpc's run: HAProxy mode tcp, h2c (`front` "h2c") or TLS passed
    through ("tls"), grpc_load with the layer (--retries 3) or without it (--retries 0)."""
    ns = argparse.Namespace(
        tls=front == "tls", l4=front == "h2c", client="tonic", duration=16, connections=8, concurrency=4,
        warmup=1.5, settle=1.0, retries=RETRIES if layer else 0,
    )
    g = rrg.run_one(examples, mode, rr.SHUTDOWN_DELAY_MS, ns, args.keep)
    r = Result(f"grpc {front} {mode}", run, layer)
    r.update(requests=g["requests"], failed=g["failed"], failures=g["failures"], retries=g["retries"],
             workdir=g["workdir"], late_down=g.get("late_down", []))
    r["events"] += g["events"] + [f"note: {n}" for n in g.get("notes", [])]
    r["problems"] += g["problems"]
    r.end(True)
    r["duration_s"] = g["duration_s"]
    return r


def http_rollout(examples, goserver, kind, protocol, mode, run, layer, args):
    """Two instances behind HAProxy mode tcp, each restarted in turn under client_load:
    counting_server (`kind` "lameduck", with the rollouts' shutdown delay, retry-after mode
    for `mode` B) or goserver ("go": Server.Shutdown at SIGTERM, no lame-duck window)."""
    r = Result(f"{kind} rollout {protocol}" + (f" {mode}" if kind == "lameduck" else ""), run, layer)
    workdir = r["workdir"] = tempfile.mkdtemp(prefix=f"client-{kind}-{protocol}-")
    ids = os.path.join(workdir, "ids.txt")
    if kind == "lameduck":
        binary, delay_ms = os.path.join(examples, "counting_server"), rr.SHUTDOWN_DELAY_MS
        flags = ["--shutdown-delay", h.fmt_ms(delay_ms)] + (["--shutdown-send-retry-after"] if mode == "B" else [])
    else:
        binary, delay_ms, flags = goserver, 0, ["-record", ids]
    instances = [h.Instance(binary, name, h.free_port(), flags, workdir) for name in ("a", "b")]
    fe_port = h.free_port()
    haproxy = rrg.tcp_haproxy(workdir, fe_port, [(i.name, i.port) for i in instances])
    load = None
    os.environ["LAMEDUCK_RECORD_IDS"] = ids
    try:
        h.start_behind(haproxy, instances)
        load = Load(load_command(examples, fe_port, protocol, ROLLOUT_S, layer, f"r{run}"), workdir, ROLLOUT_S)
        r.note(f"both instances UP in HAProxy (mode tcp); client_load {protocol}, layer {'on' if layer else 'off'}")
        time.sleep(1.5)
        for inst in instances:
            rr.restart_one(haproxy, inst, delay_ms, 1.0, r.note, r["problems"], load_start=load.started)
        if time.monotonic() - load.started > ROLLOUT_S - 0.5:
            r["problems"].append("the rollout outlasted the load")
        load.finish(r)
    except Exception as e:  # reported as a failed run, with the logs kept
        r["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        os.environ.pop("LAMEDUCK_RECORD_IDS", None)
        h.stop_behind(haproxy, instances, [load.proc if load else None])
    check_ids(r, [ids])
    return r.end(args.keep)


def one_host(examples, how, run, args):
    """Three restarts of counting_server on one host with `--shutdown-delay 0s`, the
    listening socket kept: `how` "socket activation" (each generation inherits the socket;
    SIGTERM, then the next) or "hand-over" (the successor takes it over on SIGUSR2), under
    client_load's keep-alive HTTP/1 requests with the layer."""
    r = Result(f"one host: {how}", run, True)
    workdir = r["workdir"] = tempfile.mkdtemp(prefix="client-restart-")
    ids = os.path.join(workdir, "ids.txt")
    binary = os.path.join(examples, "counting_server")
    env = {"LAMEDUCK_RECORD_IDS": ids}
    gens, load, sock = [], None, None
    h2sock = os.path.join(workdir, "h.sock")
    common = ["--shutdown-delay", "0s", "--shutdown-watch-termination-grace-period", "1s"]

    def generation(listen, **kw):
        gen = c.Generation(binary, f"g{len(gens) + 1}", workdir)
        extra = ["--handover-socket", h2sock] if how == "hand-over" else []
        gen.start(["--listen", listen, *common, *extra], env={**env, **kw.pop("env", {})}, **kw)
        gens.append(gen)
        return gen

    try:
        if how == "socket activation":
            sock = h.listening_socket(backlog=1024)
            port = sock.getsockname()[1]
            start = lambda: generation("systemd", fds=[sock.fileno()], listen_pid="self",  # noqa: E731
                                       env={"LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"})
            cur = start()
            cur.wait_listening(1, timeout=15)
        else:
            cur = generation("127.0.0.1:0")
            port = h.port_of(cur.wait_listening(1, timeout=15)[0])
        load = Load(load_command(examples, port, "http1", ONE_HOST_S, True, f"o{run}"), workdir, ONE_HOST_S)
        r.note(f"{cur.name} (pid {cur.pid}) on 127.0.0.1:{port}; client_load http1 keep-alive, layer on")
        for at in RESTARTS_AT:
            time.sleep(max(0.0, load.started + at - time.monotonic()))
            old = cur
            if how == "socket activation":
                old.signal(signal.SIGTERM)
                cur = start()
                cur.wait_listening(1, timeout=15)
            else:
                before = socket_identity(h2sock)
                cur = generation("handover")
                wait_new_socket(h2sock, before, cur.proc, 15)
                old.signal(signal.SIGUSR2)
                cur.wait_listening(1, timeout=15)
            code = old.wait_exit(10)
            r.note(f"{old.name} -> {cur.name} (pid {cur.pid}); {old.name} exited {code}")
            if code != 0:
                r["problems"].append(f"{old.name} exited {code}:\n{old.stderr_tail()}")
        load.finish(r)
        cur.signal(signal.SIGTERM)
        if cur.wait_exit(10) != 0:
            r["problems"].append(f"the last generation did not exit 0:\n{cur.stderr_tail()}")
    except Exception as e:  # reported as a failed run, with the logs kept
        r["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            load.stop()
        for gen in gens:
            gen.kill()
        if sock:
            sock.close()
    check_ids(r, [ids])
    return r.end(args.keep)


def aiohttp_429(examples, run, args):
    """aiohttp answering every fourth request 429 with Retry-After (seconds, or an
    HTTP-date), under client_load with the layer."""
    r = Result("aiohttp 429", run, True)
    workdir = r["workdir"] = tempfile.mkdtemp(prefix="client-aiohttp-")
    ids = os.path.join(workdir, "ids.txt")
    out_path, err_path = os.path.join(workdir, "server.out"), os.path.join(workdir, "server.err")
    server, load = None, None
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            server = h.spawn([sys.executable, AIOSERVER, "--listen", "127.0.0.1:0", "--record", ids], out, err)
        h.wait_until(lambda: "listening on" in open(out_path).read(), server, 15)
        with open(out_path) as f:
            text = f.read()
        if "listening on" not in text:
            raise h.SetupError(f"aioserver did not start: {h.tail(err_path, 10)}")
        port = int(text.split()[2].rsplit(":", 1)[1])
        load = Load(load_command(examples, port, "http1", AIOHTTP_S, True, f"a{run}", workers=8), workdir, AIOHTTP_S)
        r.note(f"aioserver on 127.0.0.1:{port} (429 Retry-After to every 4th request); client_load http1")
        load.finish(r)
        if not r["retries"].get("retry_after"):
            r["problems"].append("no 429 was retried: the run proves nothing")
    except Exception as e:  # reported as a failed run, with the logs kept
        r["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            load.stop()
        if server:
            h.end_process(server)
    check_ids(r, [ids])
    return r.end(args.keep)
