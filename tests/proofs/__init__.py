"""The end-to-end proofs: lameduck's example servers driven through their terminations,
restarts and rolling updates by real clients (wrk, Go's HTTP/2 and HTTP/1 client, tonic,
grpcio) and real proxies (HAProxy, systemd-socket-activate, nginx), every process on
127.0.0.1.

Run them through this directory, from the repository root or with its path from anywhere:

    python3 tests/proofs                   # the proofs, one line each
    python3 tests/proofs PROOF --help      # what PROOF checks, and its options
    python3 tests/proofs PROOF [ARGS...]   # e.g. rolling_restart --runtimes tokio_server
    python3 tests/proofs PROOF --short     # its short run, what CI runs
    python3 tests/proofs all --short       # every proof's short run (CI); --full: every full run

Python runs `__main__.py` with this directory first on its module search path, so the modules
import each other from here: `import harness as h`, `from restart import common as c`.

  catalog.py     the proofs' names, modules and one-line descriptions
  suite.py       `all`: every proof's short or full run, one after the other
  harness/       the helpers every proof shares: processes, command lines, runs, ports,
                 builds, TLS, loads, HAProxy, the WebSocket frames
  rolling/       rolling restarts behind HAProxy: HTTP (rolling_restart), gRPC
                 (rolling_restart_grpc), a layer-4 balancer under Go's clients
                 (rolling_restart_l4, its rollout in l4_rollout, its verdict in l4_report),
                 the maximum connection age behind it under Go's client and grpcio
                 (connection_age),
                 the servers' late-connection figures behind well and badly configured
                 balancers (late_arrivals), and long-running streams ended at shutdown
                 (event_streams, grpc_streams, websockets/, websockets_go, idle_spread)
  restart/       restarts on one host: socket_activation, handover, bad_inputs, and run_all
                 for the three
  storm/         the restart storm: a restart a second under every kind of load at once
  dead_peers/    silent peers cannot hold a termination (dead_peers), against Go's net/http
                 server (dead_peers/goserver/)
  l4/h2client/   the Go client (HTTP/2 and HTTP/1), built by the proofs that use it
  rolling/wsclient/
                 the Go WebSocket client (golang.org/x/net/websocket) of websockets_go

Most proofs need HAProxy, wrk, Go with golang.org/x/net/http2, openssl and Python's grpcio,
websockets and h2 (`.ci/run` installs them on Debian); the Python code is stdlib only, those
aside. Each proof kills every process it started by its PID when it ends, however it ends.
"""
