"""Rolling restarts behind HAProxy: rolling_restart (HTTP under wrk), rolling_restart_grpc
(grpc_server under tonic or grpcio) and rolling_restart_l4 (a layer-4 balancer under Go's
clients); grpcio_load.py is the grpcio load, run as a script of its own."""
