//! Every line the driver logs, one function per event, in kube-apiserver's style: the
//! lifecycle's lines carry `[graceful-termination]`, and each signal line names the signal
//! exactly (`[graceful-termination] shutdown event name=NotAcceptingNewRequest`). The signal
//! lines after `ShutdownInitiated` say how long after it they came (`elapsed=`), the drain
//! lines how long the drain took (`took=`), and the exit is preceded by the one-line
//! termination summary ([`lameduck::summary`]). Tests and the trace checker
//! ([`lameduck::trace::log`]) parse these texts: keep the `[graceful-termination]` marker,
//! the `name=`, `received signal`, `is exiting` and `code=` parts, and the summary's fields.

use std::fmt::Display;
use std::net::SocketAddr;
use std::time::Duration;

use lameduck::connection::CutKind;
use lameduck::machine::{DrainPlan, ExitReason, HookKind, HookOutcome, InputError};
use lameduck::shared::counters::ArrivalCounts;
use lameduck::shared::counters::PeerCounts;
use lameduck::summary::{SummaryRecord, SUMMARY_MARKER};
use lameduck::{Config, LifecycleSignal};
use tracing::{debug, error, info, warn};

use crate::runtime::OsSignal;

/// The target of every driver line: the module the driver was written in at first, kept so
/// that log filters naming it (`RUST_LOG=lameduck_hyper::server=info`) keep working.
const TARGET: &str = "lameduck_hyper::server";

/// The driver is running and waits for a stop event.
pub(crate) fn waiting_for_shutdown() {
    info!(
        target: TARGET,
        "[graceful-termination] waiting for shutdown to be initiated"
    );
}

/// An OS signal arrived (before the lifecycle takes it).
pub(crate) fn received_os_signal(signal: OsSignal) {
    info!(
        target: TARGET,
        signal = signal.name(),
        "[graceful-termination] received signal"
    );
}

/// A lifecycle signal fired; `elapsed` is the time since `ShutdownInitiated` (for the
/// signals after it).
pub(crate) fn signal(signal: LifecycleSignal, elapsed: Option<Duration>) {
    match (signal, elapsed) {
        (LifecycleSignal::HasBeenReady | LifecycleSignal::MuxAndDiscoveryComplete, _) => {
            info!(target: TARGET, name = %signal, "[graceful-termination] lifecycle event");
        }
        (LifecycleSignal::PreShutdownHooksStopped, Some(elapsed)) => info!(
            target: TARGET,
            name = %signal,
            elapsed = ?elapsed,
            "[graceful-termination] pre-shutdown hooks completed, shutdown event"
        ),
        (_, Some(elapsed)) => info!(
            target: TARGET,
            name = %signal,
            elapsed = ?elapsed,
            "[graceful-termination] shutdown event"
        ),
        (_, None) => info!(target: TARGET, name = %signal, "[graceful-termination] shutdown event"),
    }
}

/// The drain began (`NotAcceptingNewRequest`).
pub(crate) fn drain_started(plan: &DrainPlan) {
    info!(
        target: TARGET,
        normal = plan.normal_in_flight,
        long_running = plan.long_running_in_flight,
        pacing_interval = ?plan.pacing_interval,
        "[graceful-termination] draining in-flight requests"
    );
}

/// Requests still in flight, about once a second while draining.
pub(crate) fn drain_progress(normal_in_flight: usize, long_running_in_flight: usize) {
    info!(
        target: TARGET,
        normal = normal_in_flight,
        long_running = long_running_in_flight,
        "[graceful-termination] drain in progress"
    );
}

/// The normal drain ended, at its deadline or not; `took` is its time since
/// `NotAcceptingNewRequest`.
pub(crate) fn normal_drain_finished(remaining: usize, timed_out: bool, took: Option<Duration>) {
    if timed_out {
        warn!(target: TARGET, remaining, took = ?took.unwrap_or_default(), "[graceful-termination] normal requests still in flight at the request timeout: the server stops waiting for them");
    } else {
        info!(
            target: TARGET,
            took = ?took.unwrap_or_default(),
            "[graceful-termination] normal requests have drained"
        );
    }
}

/// The long-running drain ended, or was not waited for; `took` is its time since
/// `NotAcceptingNewRequest`.
pub(crate) fn long_running_drain_finished(
    before: usize,
    after: usize,
    timed_out: bool,
    skipped: bool,
    took: Option<Duration>,
) {
    if skipped {
        info!(target: TARGET, open = before, "[graceful-termination] not waiting for long-running requests (grace period 0)");
    } else if timed_out {
        warn!(
            target: TARGET,
            before,
            after,
            took = ?took.unwrap_or_default(),
            "[graceful-termination] long-running requests still open at the end of the grace period: the server stops waiting for them"
        );
    } else {
        info!(
            target: TARGET,
            before,
            after,
            took = ?took.unwrap_or_default(),
            "[graceful-termination] long-running requests have ended"
        );
    }
}

/// The listeners are told to stop; `shutdown_timeout` is what is left of the HTTP shutdown
/// timeout (`None`: unbounded).
pub(crate) fn stopping_listeners(shutdown_timeout: Option<Duration>) {
    info!(
        target: TARGET,
        shutdown_timeout = ?shutdown_timeout,
        "[graceful-termination] stopping listeners"
    );
}

/// The listeners are told to stop, with the idle-close spread on: the idle connections end
/// each at a random point of the next `spread`, not all at once. (A line of its own: the
/// `stopping listeners` line is unchanged.)
pub(crate) fn idle_close_spread(spread: Duration) {
    info!(
        target: TARGET,
        idle_close_spread = ?spread,
        "[graceful-termination] closing idle connections spread over {spread:?}"
    );
}

/// The HTTP shutdown timeout passed before every server stopped.
pub(crate) fn http_shutdown_timed_out() {
    warn!(
        target: TARGET,
        "[graceful-termination] HTTP shutdown timeout passed: no longer waiting for open connections (none is closed; each request keeps its own deadline)"
    );
}

/// A server ended connections of `listener` before the bounds allowed it.
pub(crate) fn connections_cut(listener: &str) {
    error!(
        target: TARGET,
        listener,
        "[graceful-termination] the server ended connections before the termination bounds allowed it: the drain did not complete"
    );
}

/// The machine reports a failed hook (the exit code will be 1).
pub(crate) fn hook_failed(hook: &str, kind: &str, outcome: HookOutcome) {
    error!(
        target: TARGET,
        hook,
        kind,
        ?outcome,
        "[graceful-termination] hook failed"
    );
}

/// A listener stopped before it was asked to.
pub(crate) fn listener_failed(listener: &str) {
    error!(
        target: TARGET,
        listener,
        "[graceful-termination] listener stopped unexpectedly"
    );
}

/// The destroy hooks start.
pub(crate) fn running_destroy_hooks() {
    info!(target: TARGET, "[graceful-termination] running destroy hooks");
}

/// Connections still arrived late in the shutdown delay (or after it): the balancer barely
/// stopped sending new traffic in time, or did not. Logged once, at `NotAcceptingNewRequest`
/// (or at the exit, when the late connections came after it). No `name=` field: this is not
/// a lifecycle signal.
pub(crate) fn late_connections(arrivals: &ArrivalCounts, config: &Config) {
    let delay = config.shutdown_delay();
    let percent = config.late_arrival_percent();
    match arrivals.last_new_connection {
        Some(last) => warn!(
            target: TARGET,
            event = "LateConnections",
            last_new_connection = ?last,
            late_connections = arrivals.late_connections,
            shutdown_delay = ?delay,
            "[graceful-termination] late connections: the load balancer still opened connections \
             {last:.3?} after the signal, {} of them in the last {percent}% of the {delay:?} \
             shutdown delay or after it; a slower balancer would have lost requests. Raise the \
             shutdown delay, or make the balancer's readiness check fail sooner",
            arrivals.late_connections,
        ),
        None => warn!(
            target: TARGET,
            event = "LateConnections",
            late_connections = arrivals.late_connections,
            shutdown_delay = ?delay,
            "[graceful-termination] late connections: the load balancer opened {} connections \
             after the {delay:?} shutdown delay had passed; raise the shutdown delay, or make \
             the balancer's readiness check fail sooner",
            arrivals.late_connections,
        ),
    }
}

/// The first request (health and metrics aside) since `/readyz` answered "not ready": the
/// balancer sends traffic to an instance whose readiness probe fails. Logged once.
pub(crate) fn requests_before_ready() {
    warn!(
        target: TARGET,
        event = "NonReadyRequests",
        "[graceful-termination] request before ready: a request arrived while /readyz answered \
         \"not ready\"; the load balancer does not honour the readiness probe (counted in \
         requests_before_ready)"
    );
}

/// The exit waited on peers that stayed silent: connections closed at their bound
/// ([`lameduck::Shared::connection_bound`]) during the termination, by kind
/// (`[graceful-termination] the exit waited on silent peers connections_cut=3
/// http2_goaway=2 tls_handshake=1`). Logged once, before the summary, only when there were
/// some. No `name=` field: this is not a lifecycle signal.
pub(crate) fn silent_peers(peers: &PeerCounts) {
    let cut = peers.connections_cut();
    if cut == 0 {
        return;
    }
    let mut kinds = String::new();
    for kind in CutKind::ALL {
        let n = peers.cut_in_termination(kind);
        if n > 0 {
            kinds.push_str(&format!(" {}={n}", kind.name()));
        }
    }
    warn!(
        target: TARGET,
        event = "SilentPeers",
        connections_cut = cut,
        "[graceful-termination] the exit waited on silent peers connections_cut={cut}{kinds}"
    );
}

/// The one-line account of the termination, just before the exit line.
pub(crate) fn summary(record: &SummaryRecord) {
    info!(target: TARGET, "[graceful-termination] {SUMMARY_MARKER} {record}");
}

/// The process exits with `code`.
pub(crate) fn exiting(code: u8, reason: ExitReason) {
    info!(target: TARGET, code, %reason, "[graceful-termination] server is exiting");
}

/// A hook (not a destroy hook) returned an error.
pub(crate) fn hook_returned_error(hook: &str, kind: HookKind, error: &dyn Display) {
    error!(target: TARGET, hook = %hook, kind = kind.name(), error = %error, "[graceful-termination] hook returned an error");
}

/// A hook (not a destroy hook) panicked.
pub(crate) fn hook_panicked(hook: &str, kind: HookKind) {
    error!(target: TARGET, hook = %hook, kind = kind.name(), "[graceful-termination] hook panicked");
}

/// A destroy hook returned an error.
pub(crate) fn destroy_hook_failed(hook: &str, error: &dyn Display) {
    error!(target: TARGET, hook = %hook, error = %error, "destroy hook failed");
}

/// A destroy hook panicked.
pub(crate) fn destroy_hook_panicked(hook: &str) {
    error!(target: TARGET, hook = %hook, "destroy hook panicked");
}

/// The lifecycle refused an input (a late or repeated report): harmless, logged for
/// debugging.
pub(crate) fn input_ignored(error: &InputError) {
    debug!(target: TARGET, error = %error, "input ignored by the lifecycle");
}

/// systemd could not be notified.
pub(crate) fn systemd_notify_failed(error: &dyn Display) {
    warn!(target: TARGET, error = %error, "cannot notify systemd");
}

/// A listener serves on `addr`.
pub(crate) fn serving_on(listener: &str, addr: SocketAddr) {
    info!(target: TARGET, listener = %listener, %addr, "Serving on {addr}");
}

/// A listener closed its listening socket.
pub(crate) fn stopped_listening(listener: &str, addr: Option<SocketAddr>) {
    info!(target: TARGET, listener = %listener, addr = ?addr, "Stopped listening");
}

/// Accepting a connection failed (the accept loop backs off and retries).
pub(crate) fn accept_failed(listener: &str, error: &dyn Display) {
    warn!(target: TARGET, listener = %listener, error = %error, "accept failed");
}

/// A connection ended with an error.
pub(crate) fn connection_error(peer: SocketAddr, error: &dyn Display) {
    debug!(target: TARGET, %peer, error = %error, "connection error");
}

/// A hand-over of the listeners was asked for (SIGUSR2 or the API).
pub(crate) fn hand_over_requested(signal: Option<OsSignal>) {
    info!(
        target: TARGET,
        signal = signal.map_or("none", OsSignal::name),
        "[graceful-termination] hand-over requested"
    );
}

/// The listeners are on their way to the successor at `path`.
pub(crate) fn handing_over(path: &std::path::Path, sockets: usize) {
    info!(
        target: TARGET,
        path = %path.display(),
        sockets,
        "[graceful-termination] handing the listeners over"
    );
}

/// The successor is ready: this process terminates (the trace's `HandedOver`).
pub(crate) fn handed_over(successor: Option<u32>) {
    info!(
        target: TARGET,
        successor = successor.unwrap_or(0),
        "[graceful-termination] listeners handed over to the successor"
    );
}

/// The hand-over failed; the process keeps serving.
pub(crate) fn hand_over_failed(error: &dyn Display) {
    warn!(
        target: TARGET,
        error = %error,
        "[graceful-termination] hand-over failed, still serving"
    );
}

/// A listener stopped accepting: its socket lives on in another process, which accepts.
pub(crate) fn accepting_elsewhere(listener: &str, addr: Option<SocketAddr>) {
    info!(
        target: TARGET,
        listener,
        addr = ?addr,
        "[graceful-termination] stopped accepting: another process accepts on the socket"
    );
}

/// This process, a successor, is up and told its predecessor.
pub(crate) fn told_predecessor(result: &std::io::Result<()>) {
    match result {
        Ok(()) => info!(
            target: TARGET,
            "[graceful-termination] up: the predecessor was told to terminate"
        ),
        Err(e) => warn!(
            target: TARGET,
            error = %e,
            "[graceful-termination] up, but the predecessor could not be told"
        ),
    }
}
