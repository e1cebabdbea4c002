"""The helpers every proof shares, imported as `import harness as h`:

  processes  child processes tracked by PID and killed on every exit path (`run_main`), log
             lines, durations, file tails and result tables;
  cli        the proofs' command lines: the parser, the shared options, comma-separated
             lists, the short and full forms (`--short`, CI's run; `--full`);
  builds     the repository's paths, the example servers (cargo, release) and the Go clients
             (GOPATH mode);
  servers    free loopback ports, listening sockets, one example-server instance, HAProxy's
             runtime API;
  runs       one run's record (its events, setup problem, failures, work directory, the
             server it starts and terminates), its log, and the proof's exit status;
  tls        a throwaway CA and server certificate (openssl), and the run's TLS;
  loads      HTTP requests, wrk, a `/watch` stream reader and a keep-alive probe;
  selector   many client connections read in one thread;
  ws_frames  the WebSocket protocol as a raw client speaks it: handshake, frames, Close;
  haproxy    HAProxy in mode http (health-checking /readyz, or with endpoints removed
             through its runtime API) and in mode tcp (a layer-4 balancer);
  summary    the termination summary, arrival and silent-peers warnings an example server
             logged;
  paced_ends the ends of long-running streams at shutdown: the pacing the server should
             follow and the checks of when the ends came;
  setup      the example servers' build before a proof's runs, the open-files limit,
             whether grpcio can run, and the setup error (exit status 2).

Stdlib only. Loopback only.
"""

from harness.builds import (  # noqa: F401
    GRPCIO_LOAD,
    H2CLIENT_DIR,
    PROOFS,
    ROOT,
    RUNTIMES,
    build_h2client,
    build_wsclient,
    cargo_build,
    examples_dir,
    target_dir,
)
from harness.cli import (  # noqa: F401
    DEFAULTS,
    add_forms,
    add_run_options,
    add_runtimes,
    parse_list,
    parse_runtimes,
    parser,
    run_forms,
)
from harness.haproxy import HAProxy, TcpBalancer, start_behind, stop_behind  # noqa: F401
from harness.loads import (  # noqa: F401
    KeepAliveProbe,
    WatchStream,
    http_get,
    parse_wrk,
    wrk,
    wrk_result,
)
from harness.paced_ends import (  # noqa: F401
    DEFAULT_MIN_WATCH_DRAIN_QPS,
    MODE_NAMES,
    DrainRun,
    add_drain_arguments,
    check_bursts,
    check_ends,
    check_server_exit,
    check_streams_summary,
    drain_figures,
    drain_line,
    drain_modes,
    ends_bound,
    pacing_interval,
    server_log_lines,
    shutdown_flags,
)
from harness.processes import (  # noqa: F401
    check_tools,
    end_process,
    fmt_duration,
    fmt_ms,
    fmt_s,
    kill,
    kill_all_children,
    log,
    log_run,
    reap,
    run_main,
    spawn,
    table,
    tail,
    wait_until,
)
from harness.runs import Problems, Run, conclude, exit_status, log_result, log_table  # noqa: F401
from harness.selector import SocketReader  # noqa: F401
from harness.servers import (  # noqa: F401
    Instance,
    free_port,
    haproxy_command,
    listening_socket,
    port_of,
    show_stat,
)
from harness.summary import (  # noqa: F401
    SILENT_PEER_KINDS,
    connections_cut,
    seconds,
    silent_peers_warning,
    termination_summary,
    warning_counts,
)
from harness.tls import Tls, connect, run_tls, use_tls  # noqa: F401
from harness.setup import SPARE_FDS, SetupError, grpcio_missing, raise_fd_limit, ready_examples  # noqa: F401
