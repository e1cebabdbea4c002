//! [`serve`]: an actix server run by the lifecycle, configured so that lameduck alone decides
//! when work ends.

use std::any::Any;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::Extensions;
use futures_util::future::{select, Either};
use lameduck::connection::{CutKind, SILENT_PEER_TIMEOUT};
use lameduck::LifecycleSignal;
use lameduck_hyper::adapter::ConnectionArrival;
use lameduck_hyper::{ConnectionTracker, Runtime, ServeError, Server};
use lameduck_tokio::TokioRuntime;

use crate::connection::{age_from_now, AgedAt, LifecycleRef, TrackedConnection};
use crate::goaway::GoawayBroadcast;

/// What [`serve`] configures an [`ActixServer`] with.
#[derive(Clone, Default)]
pub struct ServeSetup {
    /// actix's own graceful-stop timeout ([`actix_shutdown_timeout`]).
    pub(crate) shutdown_timeout: Duration,
    /// Counts the server's connections (TLS ones from accept on, before their handshake).
    pub(crate) connections: ConnectionTracker,
    /// Tells the server's HTTP/2 connections to say GOAWAY (where they can).
    pub(crate) goaway: Arc<GoawayBroadcast>,
    /// The lifecycle and its clock, which say how long an idle connection is kept at the
    /// stop ([`lameduck::Shared::idle_close_at`]).
    pub(crate) lifecycle: Option<LifecycleRef>,
}

/// Resolves once a connection idle at the stop (awaited from then on) may be closed: at once,
/// or, when the sockets outlive the process, once its client had the time to send the request
/// it may have been sending ([`lameduck::Shared::idle_close_at`]; actix cannot tell a
/// connection that carried no request yet from an idle one: both wait the same).
pub(crate) async fn idle_linger(lifecycle: Option<LifecycleRef>) {
    if let Some((shared, clock)) = lifecycle {
        let now = TokioRuntime.now();
        let until = clock.to_std(shared.idle_close_at(false, clock.instant(now)));
        if until > now {
            TokioRuntime.sleep_until(until).await;
        }
    }
}

impl std::fmt::Debug for ServeSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeSetup")
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// An actix server [`serve`] can run: actix-web's own `HttpServer` (HTTP/1; HTTP/2 without
/// GOAWAY, which actix-http does not send) or [`AutoH2cServer`](crate::AutoH2cServer)
/// (HTTP/1 and h2c, with GOAWAY).
pub trait ActixServer: Sized {
    /// The addresses bound so far.
    fn bound_addrs(&self) -> Vec<SocketAddr>;
    /// The listening sockets bound so far, which a hand-over passes to a successor process
    /// (`lameduck_hyper::sockets::hand_over`). The default, for servers that do not expose
    /// them (actix-web's `HttpServer`): none, and a hand-over fails, the server serving on.
    fn listening_sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        Vec::new()
    }
    /// Whether the server ends its idle connections each at its own point of the idle-close
    /// window ([`lameduck::Config::idle_close_spread`]). The default, for servers whose
    /// connections lameduck cannot reach (actix-web's `HttpServer`): no, and the idle
    /// connections left after the drain are closed together, as without the spread.
    fn spreads_idle_closes(&self) -> bool {
        false
    }
    /// Whether the server ends each of its connections by itself once stopped, at most
    /// [`SILENT_PEER_TIMEOUT`] after the stop or after its work ended, whatever its peer
    /// does ([`lameduck::Shared::connection_bound`]): then the connections still open after
    /// the drain are given until their bounds, rather than [`CLOSE_AFTER_DRAIN`], before the
    /// server is stopped forcibly. The default, for servers whose connections lameduck cannot
    /// reach (actix-web's `HttpServer`): no.
    fn bounds_silent_peers(&self) -> bool {
        false
    }
    /// Configures the server, not yet bound, for the lifecycle.
    fn configure(self, setup: ServeSetup) -> Self;
    /// Starts the bound server.
    ///
    /// # Errors
    ///
    /// A listener cannot be registered with actix.
    fn start(self) -> std::io::Result<actix_server::Server>;
}

impl<F, I, S, B> ActixServer for actix_web::HttpServer<F, I, S, B>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: actix_service::IntoServiceFactory<S, actix_http::Request>,
    S: actix_web::dev::ServiceFactory<actix_http::Request, Config = actix_web::dev::AppConfig>
        + 'static,
    S::Error: Into<actix_web::Error> + 'static,
    S::InitError: std::fmt::Debug,
    S::Response: Into<actix_http::Response<B>> + 'static,
    <S::Service as actix_web::dev::Service<actix_http::Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    fn bound_addrs(&self) -> Vec<SocketAddr> {
        self.addrs()
    }

    fn configure(self, setup: ServeSetup) -> Self {
        self.disable_signals()
            .shutdown_timeout(setup.shutdown_timeout.as_secs().max(1))
            .on_connect(track_connections(setup.connections, setup.lifecycle))
    }

    fn start(self) -> std::io::Result<actix_server::Server> {
        Ok(self.run())
    }
}

/// The `HttpServer::on_connect` callback that counts connections in `tracker`, so the
/// lifecycle learns the moment the last one closes (and the summary when it did), notes each
/// new one in the lifecycle's arrivals and, with a [maximum
/// age](lameduck::Config::max_connection_age), keeps when it reaches it for the admission
/// middleware. [`serve`] installs it.
fn track_connections(
    tracker: ConnectionTracker,
    lifecycle: Option<LifecycleRef>,
) -> impl Fn(&dyn Any, &mut Extensions) + Send + Sync + 'static {
    move |_, extensions| {
        note_arrival(lifecycle.as_ref(), extensions);
        if let Some(at) = lifecycle
            .as_ref()
            .and_then(|(shared, _)| age_from_now(shared))
        {
            extensions.insert(AgedAt(at));
        }
        // Dropped with the connection's extensions, when the connection ends.
        let tracked = TrackedConnection::new(tracker.open(), lifecycle.as_ref());
        extensions.insert(Rc::new(tracked));
    }
}

/// Keeps in the connection's data when it arrived, while the lifecycle watches arrivals
/// ([`lameduck_hyper::adapter::ConnectionArrival`]): its first request other than health and
/// metrics reports it.
#[inline]
pub(crate) fn note_arrival(lifecycle: Option<&LifecycleRef>, data: &mut Extensions) {
    if let Some((shared, clock)) = lifecycle {
        if let Some(arrival) = ConnectionArrival::accepted(shared, *clock, &TokioRuntime) {
            data.insert(arrival);
        }
    }
}

/// How long after the drain (`InFlightRequestsDrained`) the connections of actix-web's own
/// `HttpServer` still open are closed, by stopping actix forcibly. actix cannot tell its idle
/// connections from busy ones, and actix-web's own `HttpServer` sends no HTTP/2 GOAWAY, so
/// an idle keep-alive or HTTP/2 connection would otherwise hold the exit until the HTTP
/// shutdown timeout; the wait lets the last responses reach the socket first. (Not
/// [`lameduck::connection::IDLE_CONNECTION_LINGER`], the core's wait for the request a
/// connection may be about to carry.) An [`AutoH2cServer`](crate::AutoH2cServer) ends its
/// connections itself, each at its bound ([`ActixServer::bounds_silent_peers`]): it is
/// stopped forcibly only once those bounds have passed.
pub const CLOSE_AFTER_DRAIN: Duration = Duration::from_millis(250);

/// How much later than the bounds of an [`AutoH2cServer`](crate::AutoH2cServer)'s
/// connections ([`SILENT_PEER_TIMEOUT`] after the stop or the drain) the server is stopped
/// forcibly: the connections' own cuts, which say what they were, come first.
const BOUND_SLACK: Duration = Duration::from_millis(100);

/// How long the workers get, once actix stopped accepting, to take the connections its accept
/// thread queued for them, before the graceful stop (which drops what is still queued).
const ACCEPT_QUEUE_GRACE: Duration = Duration::from_millis(100);

/// Margin added to the longest lameduck bound for actix's own `shutdown_timeout`.
const ACTIX_SHUTDOWN_MARGIN: Duration = Duration::from_secs(60);

/// actix's own graceful-stop timeout for `config`: above every bound lameduck allows
/// (`max(request_timeout, grace) + HTTP shutdown timeout`, plus a margin), so actix never
/// ends a request or stream that lameduck still allows. Unbounded configurations (a zero
/// request timeout) get a year.
#[must_use]
pub fn actix_shutdown_timeout(config: &lameduck::Config) -> Duration {
    if config.request_timeout().is_zero() {
        return Duration::from_secs(365 * 24 * 3600);
    }
    config
        .request_timeout()
        .max(config.shutdown_watch_termination_grace_period())
        .saturating_add(config.http_shutdown_timeout())
        .saturating_add(ACTIX_SHUTDOWN_MARGIN)
}

/// Errors from [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ActixServeError {
    /// The listener could not be registered with the lifecycle.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The `bind` closure failed (address in use, permission denied, ...), or actix could
    /// not take a bound listener.
    #[error("cannot bind the actix server: {0}")]
    Bind(#[source] std::io::Error),
    /// The server was already bound when handed over: actix fixes its connection callback
    /// at bind time, so lameduck could not count its connections. Bind inside the `bind`
    /// closure instead.
    #[error(
        "the actix HttpServer was bound before lameduck_actix::serve; bind it in serve's closure"
    )]
    AlreadyBound,
    /// The `bind` closure bound nothing.
    #[error("the bind closure bound no address")]
    NothingBound,
}

/// Serves an actix server (not yet bound) as listener `name` of the lifecycle, configured
/// so that lameduck alone decides when work ends, then bound by `bind` (your `bind`,
/// `listen`, worker count, ...). The server is actix-web's `HttpServer` (`listen_auto_h2c`,
/// TLS, ... included) or, for HTTP/2 clients to get GOAWAY, [`AutoH2cServer`](crate::AutoH2cServer):
///
/// * actix's own signal handling is disabled (the lifecycle owns SIGTERM/SIGINT);
/// * actix's `shutdown_timeout` is set above every lameduck bound
///   ([`actix_shutdown_timeout`]), so actix's default 30 s never cuts a long request;
/// * connections are counted (through `on_connect`, set before `bind`, which is when actix
///   fixes it; any `on_connect` of your own is replaced), so the exit follows the last
///   connection at once;
/// * an [`AutoH2cServer`](crate::AutoH2cServer)'s HTTP/2 connections (h2c or TLS) get GOAWAY
///   when the listener stops (close-listener mode: at `NotAcceptingNewRequest`) and after a
///   response that closes its connection (retry-after mode's 429); peers cannot hold the
///   termination: a connection without streams in flight is closed at most
///   [`SILENT_PEER_TIMEOUT`] after the stop (or after its last stream ended), its final
///   GOAWAY sent by then even if the client never acknowledged the PING, and a TLS
///   handshake still running at the stop gets that second too, not its whole timeout (each
///   connection cut there is counted: the summary's `connections_cut`);
/// * with the idle-close spread ([`lameduck::Config::idle_close_spread`]), an
///   [`AutoH2cServer`](crate::AutoH2cServer)'s idle HTTP/1 connections are closed, and its
///   HTTP/2 connections told GOAWAY, each at its own random point of the window from the
///   listener's stop (actix-web's own `HttpServer` cannot spread them: a warning says so, and
///   its idle connections are closed together after the drain, as without the spread).
///
/// ```no_run
/// # use lameduck_actix::{Server, TokioRuntime};
/// # async fn f(mut server: Server<TokioRuntime>) -> Result<(), lameduck_actix::ActixServeError> {
/// let http = actix_web::HttpServer::new(|| actix_web::App::new());
/// lameduck_actix::serve(&mut server, "api", http, |http| http.bind("127.0.0.1:8080"))?;
/// # Ok(()) }
/// ```
///
/// The lifecycle stops the server at the point of the mode (`ServerHandle::stop(true)`),
/// and closes what is left [`CLOSE_AFTER_DRAIN`] after the drain (or, spreading, after the
/// idle-close window's end); an [`AutoH2cServer`](crate::AutoH2cServer) only once its
/// connections' bounds have passed ([`SILENT_PEER_TIMEOUT`] after the stop or the drain).
/// Each connection still open then is counted as cut (`request_head`: actix cannot tell
/// what it waited for). Should actix end connections before the lifecycle allows it
/// anyway, the log says so and the exit code is 1.
///
/// # Errors
///
/// [`ActixServeError`]: the name is taken or invalid, the server was bound already, or
/// binding failed.
pub fn serve<H: ActixServer>(
    lifecycle: &mut Server<TokioRuntime>,
    name: &str,
    http: H,
    bind: impl FnOnce(H) -> std::io::Result<H>,
) -> Result<(), ActixServeError> {
    if !http.bound_addrs().is_empty() {
        return Err(ActixServeError::AlreadyBound);
    }
    let connections = ConnectionTracker::new();
    let shutdown_timeout = actix_shutdown_timeout(lifecycle.shared().config());
    let lifecycle_ref: LifecycleRef = (Arc::clone(lifecycle.shared()), lifecycle.clock());
    let clock = lifecycle.clock();
    let goaway = Arc::new(GoawayBroadcast::for_lifecycle(
        Arc::clone(lifecycle.shared()),
        lifecycle.clock(),
    ));
    let spread = lifecycle.shared().config().idle_close_spread();
    let spreads = http.spreads_idle_closes();
    let bounded = http.bounds_silent_peers();
    if !spread.is_zero() && !spreads {
        tracing::warn!(
            listener = %name,
            idle_close_spread = ?spread,
            "the idle-close spread needs lameduck_actix::AutoH2cServer: actix-web's own HttpServer closes its idle connections together after the drain"
        );
    }
    let http = http.configure(ServeSetup {
        shutdown_timeout,
        connections: connections.clone(),
        goaway: Arc::clone(&goaway),
        lifecycle: Some(lifecycle_ref.clone()),
    });
    let http = bind(http).map_err(ActixServeError::Bind)?;
    if http.bound_addrs().is_empty() {
        return Err(ActixServeError::NothingBound);
    }
    for socket in http.listening_sockets() {
        lifecycle
            .hand_over_socket(name, socket)
            .map_err(|e| ActixServeError::Serve(ServeError::HandOverSocket(e)))?;
    }
    let http = http.start().map_err(ActixServeError::Bind)?;
    lifecycle.serve_with(name, move |ctx| async move {
        // The exit counts the connections it closes at their bound: the HTTP/2 ones of an
        // AutoH2cServer register theirs; the others it counts by number.
        let bounds = ctx.connection_bounds();
        let (open, registered) = (connections.clone(), Arc::clone(&goaway));
        bounds.count_open_at_exit(move || registered.open_at_exit(open.live()));
        goaway.set_bounds(bounds);
        let handle = http.handle();
        // The actix server runs (its accept thread and workers) while this future is polled.
        let mut running = tokio::spawn(http);
        ctx.report_serving();
        let stopped = async {
            let elsewhere = pin!(ctx.accepting_elsewhere());
            let paused_at = match select(elsewhere, pin!(ctx.stop_listening())).await {
                Either::Left(_) => {
                    // Another process accepts on the sockets: stop accepting, keep serving.
                    handle.pause().await;
                    let paused_at = TokioRuntime.now();
                    ctx.stop_listening().await;
                    paused_at
                }
                Either::Right(_) => {
                    handle.pause().await;
                    TokioRuntime.now()
                }
            };
            // actix's graceful stop drops the connections its accept thread has queued for a
            // worker and no worker has taken yet, resetting them under their first request:
            // give the workers the time to take them.
            TokioRuntime
                .sleep_until(paused_at + ACCEPT_QUEUE_GRACE)
                .await;
        };
        if let Either::Left(_) = select(&mut running, pin!(stopped)).await {
            // actix stopped on its own: the listener failed.
            tracing::error!(listener = %ctx.name(), "the actix server stopped on its own");
            ctx.report_listener_stopped();
            ctx.report_server_stopped();
            return;
        }
        // HTTP/2 connections: GOAWAY, as hyper's graceful shutdown at the same point.
        goaway.announce();
        // Graceful stop: actix closes the listener at once and drains its connections.
        let stop_began = TokioRuntime.now();
        let mut stopping = tokio::spawn(handle.stop(true));
        ctx.report_listener_stopped();
        let shared = Arc::clone(ctx.shared());
        let drained = Arc::clone(&shared);
        let goaway_end = Arc::clone(&goaway);
        let idle_after_drain = pin!(async move {
            drained
                .signal_fired(LifecycleSignal::InFlightRequestsDrained)
                .await;
            let drained_at = TokioRuntime.now();
            TokioRuntime
                .sleep_until(forced_stop_at(&goaway_end, drained_at, spreads, bounded))
                .await;
            // Idle connections kept for a request their clients may be sending.
            idle_linger(Some(lifecycle_ref)).await;
        });
        let closed = pin!(connections.wait_zero());
        let actix_done = pin!(async {
            let _ = (&mut stopping).await;
        });
        match select(closed, select(actix_done, idle_after_drain)).await {
            Either::Left(_) => {}
            Either::Right((Either::Left(_), _)) => {
                // actix finished its graceful stop. If that was its own timeout while
                // requests lameduck allows were still running, they were cut.
                let timed_out = TokioRuntime.now() >= stop_began + shutdown_timeout;
                if timed_out && !shared.has_fired(LifecycleSignal::InFlightRequestsDrained) {
                    ctx.report_connections_cut();
                }
            }
            Either::Right((Either::Right(_), _)) => {
                // What is left is closed now, its peers silent (or busy with what actix
                // cannot tell apart): counted.
                // (The HTTP/2 connections registered with the exit are its to count.)
                let unregistered = goaway.open_at_exit(connections.live());
                goaway.counted_by_stop(unregistered);
                count_forced_closes(&shared, clock, unregistered);
                // Not awaited: actix handles its commands one at a time and is still busy
                // with the graceful stop. The process exits next, closing what is left.
                drop(tokio::spawn(handle.stop(false)));
            }
        }
        ctx.report_server_stopped();
        // actix's own bookkeeping finishes in the background; the process does not wait.
        drop((running, stopping));
    })?;
    Ok(())
}

/// When, after a drain at `drained_at`, the connections still open are closed by stopping
/// actix forcibly: [`CLOSE_AFTER_DRAIN`] after the drain, or after the idle-close window's
/// end when the server `spreads` its closes; for a server that `bounded` its connections,
/// only once their bounds have passed ([`SILENT_PEER_TIMEOUT`] after the stop, the drain or
/// the window's end).
fn forced_stop_at(
    goaway: &GoawayBroadcast,
    drained_at: std::time::Instant,
    spreads: bool,
    bounded: bool,
) -> std::time::Instant {
    let after = if bounded {
        SILENT_PEER_TIMEOUT + BOUND_SLACK
    } else {
        CLOSE_AFTER_DRAIN
    };
    let mut from = drained_at;
    if bounded {
        from = from.max(goaway.announced_at().unwrap_or(drained_at));
    }
    // With the idle-close spread, each connection ends at its own point of the window.
    if let Some(end) = goaway.window_end().filter(|_| spreads) {
        from = from.max(end);
    }
    from + after
}

/// Counts the `live` connections closed by the forced stop: cut with their peers silent, as
/// far as actix tells (`request_head`: waiting for a request head, or for a peer that does
/// not read); their close is noted now.
fn count_forced_closes(shared: &lameduck::Shared, clock: lameduck::StdClock, live: usize) {
    if live == 0 {
        return;
    }
    for _ in 0..live {
        shared.counters().count_connection_cut(CutKind::RequestHead);
    }
    crate::connection::note_closed(shared, clock);
    tracing::debug!(
        connections = live,
        "actix stopped forcibly: connections still open closed"
    );
}
