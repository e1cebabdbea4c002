//! Black-box suite of the example-server contract (`docs/design.md#example-servers`).
//!
//! Every case runs against every example server: each binary is built once per run
//! (`cargo build --release --example NAME` into this run's target directory), started on
//! `127.0.0.1:0`, and driven through real sockets and real signals. Tests are named
//! `<binary>::<case>`, so `cargo test --test blackbox tokio_server::` runs one binary and
//! `cargo test --test blackbox close_listener_mode_timeline` one case on every binary.
//!
//! To add a runtime, add its example's name to the `servers:` list at the bottom; to add a
//! case, write `fn case(bin: &'static str)` in `cases/` and add its name to the `cases:` list.

mod cases;
mod support;

/// Stamps one `#[test]` per case for one server binary, in a module named after the binary.
macro_rules! server_tests {
    ([$($case:ident),* $(,)?] $server:ident) => {
        mod $server {
            $(
                #[test]
                fn $case() {
                    crate::cases::$case(stringify!($server));
                }
            )*
        }
    };
}

/// The suite: every case in `cases` for every binary in `servers`.
macro_rules! suite {
    (cases: $cases:tt, servers: [$($server:ident),* $(,)?] $(,)?) => {
        /// The example binaries under test.
        pub const SERVERS: &[&str] = &[$(stringify!($server)),*];
        $( server_tests!($cases $server); )*
    };
}

suite! {
    cases: [
        health_bodies,
        close_listener_mode_timeline,
        retry_after_mode_timeline,
        slow_pre_shutdown_hook,
        watch_streams_drain_paced,
        event_streams_end_with_a_retry_hint,
        event_streams_end_with_a_retry_hint_retry_after_mode,
        websockets_close_1001_at_their_turn,
        request_timeout_gives_504,
        bad_sleep_duration_gives_400,
        bytes_route_sizes_and_400,
        second_signal_exits_1,
        sigint_like_sigterm,
        signal_right_after_listening_line,
        help_lists_flags,
        invalid_flags_exit_2,
        busy_port_exits_1,
        http2_streams_complete_then_goaway,
        http2_retry_after_mode,
        systemd_ready_and_stopping,
        corrupted_trace_is_rejected,
        watches_outlive_the_request_timeout,
        stream_is_aborted_at_the_request_timeout,
        long_request_survives_the_drain,
        second_signal_during_destroy_hook_exits_at_once,
        two_signals_back_to_back_exit_1,
        exempt_request_in_flight_at_drain_completes,
        exempt_request_in_flight_at_drain_completes_retry_after_mode,
        metrics_follow_the_drain_and_the_summary_counts_it,
        metrics_and_summary_in_close_listener_mode,
        goaway_chance_ends_connections_by_chance,
        hand_over_to_a_successor,
        hand_over_without_successor_keeps_serving,
        tls_serves_http1_and_http2_by_alpn,
        tls_plaintext_request_is_refused,
        tls_client_ca_requires_client_certificates,
        tls_bad_files_exit_2,
        tls_silent_clients_do_not_block,
        tls_rotation_in_place,
        tls_rotation_secret_volume_swap,
        tls_rotation_to_a_bad_pair_keeps_the_old,
        tls_http2_goaway_at_not_accepting,
        late_connections_are_reported,
        timely_connections_are_not_late,
        requests_before_ready_are_counted,
    ],
    servers: [tokio_server, axum_server, smol_server, actix_server, grpc_server],
}

/// The gRPC cases (`docs/design.md#grpc`), for the gRPC example server only (it also passes
/// every case above: its HTTP routes are the other examples').
mod grpc {
    const BIN: &str = "grpc_server";

    #[test]
    fn health_not_serving_while_calls_served() {
        crate::cases::grpc_health_not_serving_while_calls_served(BIN);
    }

    #[test]
    fn streams_end_ok_paced() {
        crate::cases::grpc_streams_end_ok_paced(BIN);
    }

    #[test]
    fn retry_after_mode_unavailable_with_pushback() {
        crate::cases::grpc_retry_after_mode_unavailable_with_pushback(BIN);
    }

    #[test]
    fn deadline_exceeded() {
        crate::cases::grpc_deadline_exceeded(BIN);
    }

    #[test]
    fn goaway_at_not_accepting() {
        crate::cases::grpc_goaway_at_not_accepting(BIN);
    }
}

#[test]
fn server_list_is_not_empty() {
    assert!(!SERVERS.is_empty());
}
