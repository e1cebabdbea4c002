"""Rolling restarts behind HAProxy: rolling_restart (HTTP under wrk), rolling_restart_grpc
(grpc_server under tonic or grpcio) and rolling_restart_l4 (a layer-4 balancer under Go's
clients), late_arrivals (the servers' late-connection figures), and the long-running streams
at shutdown: event_streams (Server-Sent Events) and grpc_streams (gRPC server streams under
grpcio); grpcio_load.py is the grpcio load, run as a script of its own (the proofs may import
its message helpers)."""
