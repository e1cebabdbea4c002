"""`python3 tests/proofs PROOF [ARGS...]`: runs one proof with ARGS, or lists the proofs."""

import importlib
import sys

import harness as h

PROG = "tests/proofs"
# Each proof: its module (with a `main(argv)`) and what it proves, in one line.
PROOFS = {
    "rolling_restart": (
        "rolling.rolling_restart",
        "rolling restart behind HAProxy under wrk load; the naive baseline must lose requests",
    ),
    "rolling_restart_grpc": (
        "rolling.rolling_restart_grpc",
        "rolling restart of grpc_server behind HAProxy under tonic or grpcio load",
    ),
    "rolling_restart_l4": (
        "rolling.rolling_restart_l4",
        "Kubernetes-style rolling update behind HAProxy mode tcp under Go's clients",
    ),
    "grpc_streams": (
        "rolling.grpc_streams",
        "200 server-streaming gRPC calls open at SIGTERM all end OK, paced, within the grace period",
    ),
    "event_streams": (
        "rolling.event_streams",
        "500 Server-Sent Events streams open at SIGTERM each end with one retry: event and the last chunk, paced",
    ),
    "websockets": (
        "rolling.websockets",
        "1000 WebSockets open at SIGTERM each get Close 1001, paced; silent clients are cut; bad input never crashes",
    ),
    "websockets_go": (
        "rolling.websockets_go",
        "WebSockets of Go's golang.org/x/net/websocket open at SIGTERM each get Close 1001, paced, and answer it",
    ),
    "idle_spread": (
        "rolling.idle_spread",
        "5000 idle HTTP/1.1 and 500 idle h2c connections end spread over --idle-close-spread, one burst without it",
    ),
    "dead_peers": (
        "dead_peers.proof",
        "silent peers (HTTP/2, TLS handshakes, WebSockets, unread responses) cannot hold a termination; against Go",
    ),
    "late_arrivals": (
        "rolling.late_arrivals",
        "the servers' late-connection figures behind well and badly configured HAProxy, and lameduck plan --observed",
    ),
    "handover": ("restart.handover", "listener hand-over to a successor (SIGUSR2) under wrk load"),
    "socket_activation": ("restart.socket_activation", "restarts on a systemd-style inherited socket under wrk load"),
    "bad_inputs": ("restart.bad_inputs", "bad inherited state, socket names and failed hand-overs"),
    "run_all": ("restart.run_all", "socket_activation, handover and bad_inputs in one run, as CI runs them"),
    "storm": ("storm.storm", "a restart a second of three services under every kind of load at once"),
}


def listing():
    width = max(len(name) for name in PROOFS)
    lines = [
        f"usage: python3 {PROG} PROOF [ARGS...]",
        f"       python3 {PROG} PROOF --help   (what PROOF checks, and its options)",
        "",
        "proofs:",
    ]
    lines += [f"  {name.ljust(width)}  {what}" for name, (_, what) in PROOFS.items()]
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help", "help", "list"):
        print(listing())
        return 0
    name = args[0]
    if name not in PROOFS:
        print(f"error: unknown proof {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    proof = importlib.import_module(PROOFS[name][0])
    h.run_main(lambda: proof.main(args[1:]))


if __name__ == "__main__":
    sys.exit(main())
