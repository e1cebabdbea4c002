"""The proofs: each one's name, its module and what it proves in one line. A proof's module has
a `main(argv)`, its short form `SHORT` and full form `FULL` (harness.cli; without a FULL, the
defaults; an aggregate, run_all, has neither: it passes --short and --full on to the proofs it
runs) and, when the proof needs more of the
workspace than the example servers, `BUILDS`: the arguments of each further `cargo build
--release`. `python3 tests/proofs all` runs the proofs in this order."""

PROOFS = {
    "rolling_restart": (
        "rolling.rolling_restart",
        "rolling restart behind HAProxy under wrk load; the naive baseline must lose requests",
    ),
    "socket_activation": ("restart.socket_activation", "restarts on a systemd-style inherited socket under wrk load"),
    "handover": ("restart.handover", "listener hand-over to a successor (SIGUSR2) under wrk load"),
    "bad_inputs": ("restart.bad_inputs", "bad inherited state, socket names and failed hand-overs"),
    "rolling_restart_grpc": (
        "rolling.rolling_restart_grpc",
        "rolling restart of grpc_server behind HAProxy under tonic or grpcio load",
    ),
    "rolling_restart_l4": (
        "rolling.rolling_restart_l4",
        "Kubernetes-style rolling update behind HAProxy mode tcp under Go's clients",
    ),
    "connection_age": (
        "rolling.connection_age",
        "--max-connection-age behind HAProxy mode tcp: Go's h2c and grpcio lose nothing, shares even, lifetimes bounded",
    ),
    "storm": ("storm.storm", "a restart a second of three services under every kind of load at once"),
    "late_arrivals": (
        "rolling.late_arrivals",
        "the servers' late-connection figures behind well and badly configured HAProxy, and lameduck plan --observed",
    ),
    "event_streams": (
        "rolling.event_streams",
        "500 Server-Sent Events streams open at SIGTERM each end with one retry: event and the last chunk, paced",
    ),
    "grpc_streams": (
        "rolling.grpc_streams",
        "200 server-streaming gRPC calls open at SIGTERM all end OK, paced, within the grace period",
    ),
    "websockets": (
        "rolling.websockets.proof",
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
    "client": (
        "client.proof",
        "lameduck-client's RetryLayer under tonic and hyper-util: 0 lost through rollouts, restarts, Go, aiohttp; never twice",
    ),
    "run_all": (
        "restart.run_all",
        "socket_activation, handover and bad_inputs in one process tree, the examples built once",
    ),
}

# Proofs that only run others (left out of `all`, which runs those others itself).
AGGREGATES = ("run_all",)
