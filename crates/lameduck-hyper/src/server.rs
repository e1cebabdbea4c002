//! The lifecycle driver: runs the core machine on a [`Runtime`], serves hyper connections on
//! any number of listeners, and turns every core event into its effect. It holds no policy:
//! when to do what is decided by [`lameduck::Machine`].

use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use event_listener::Event as Notify;
use futures_channel::mpsc;
use futures_util::{FutureExt, StreamExt};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use lameduck::{
    Config, EndpointSet, Event, HookId, HookKind, HookOutcome, Input, Lifecycle, ListenerId,
    MuxSignalId, Phase, Prepared, RegisterError, Shared, Signal, StdClock, StopSource,
};
use tower_service::Service;
use tracing::{debug, error, info, warn};

use crate::admission::AdmissionLayer;
use crate::error::{BoxError, ServeError};
use crate::flag::Flag;
use crate::runtime::{BoxFuture, Exec, Listener, Runtime};

type HookFn = Box<dyn FnOnce() -> BoxFuture<Result<(), BoxError>> + Send>;

/// A service [`Server::serve`] can serve: a cloneable tower service from hyper requests to
/// responses with a `Bytes` body. Implemented for every such service.
pub trait HttpService:
    Service<
        Request<Incoming>,
        Response = Response<Self::Body>,
        Error: Into<BoxError>,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
    /// The response body.
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
}

impl<S, B> HttpService for S
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Body = B;
}

/// A hook: an async function run once, returning `Ok` or an error. Implemented for every
/// `FnOnce() -> impl Future<Output = Result<(), E>>` with `E: Into<BoxError>`.
pub trait Hook: Send + 'static {
    /// Boxes the hook.
    fn into_boxed(self) -> Box<dyn FnOnce() -> BoxFuture<Result<(), BoxError>> + Send>;
}

impl<F, Fut, E> Hook for F
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    fn into_boxed(self) -> HookFn {
        Box::new(move || Box::pin(async move { self().await.map_err(Into::into) }))
    }
}
type ServeFn<R> = Box<dyn FnOnce(ListenerContext<R>) -> BoxFuture<()> + Send>;

/// What a server task (an accept loop, or another HTTP server such as actix-web's) gets
/// from the driver: when to stop, and how to report back. See [`Server::serve_with`].
pub struct ListenerContext<R> {
    id: ListenerId,
    name: String,
    runtime: R,
    shared: Arc<Shared>,
    control: Arc<ServeControl>,
    tx: mpsc::UnboundedSender<Input>,
}

impl<R> fmt::Debug for ListenerContext<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerContext")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> ListenerContext<R> {
    /// The listener's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime.
    #[must_use]
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// The lifecycle's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Reports that the listener is bound and serving.
    pub fn report_serving(&self) {
        let _ = self.tx.unbounded_send(Input::ListenerServing(self.id));
    }

    /// Reports that the listening socket is closed (new connections are refused).
    pub fn report_listener_stopped(&self) {
        let _ = self.tx.unbounded_send(Input::ListenerStopped(self.id));
    }

    /// Reports that every connection of this server has ended.
    pub fn report_server_stopped(&self) {
        let _ = self.tx.unbounded_send(Input::ServerStopped(self.id));
    }

    /// Reports that the server (another HTTP server implementation, with timeouts of its
    /// own) ended connections on its own while lameduck still allowed them to run: the
    /// termination is not complete, and the exit code will be 1.
    pub fn report_connections_cut(&self) {
        let _ = self.tx.unbounded_send(Input::ConnectionsCut(self.id));
    }

    /// Resolves when the lifecycle says to stop listening and shut connections down
    /// gracefully.
    pub async fn stop_listening(&self) {
        self.control.stop.wait().await;
    }

    /// Whether the lifecycle has said to stop listening.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.control.stop.is_set()
    }
}

/// Broadcast from the driver to every accept loop and connection. There is no "force
/// close": when the HTTP shutdown timeout passes, the lifecycle stops waiting for the
/// connections and closes none of them (each request is bounded by its own deadline).
#[derive(Default)]
struct ServeControl {
    /// `StopListening`: close the listener, shut connections down gracefully.
    stop: Flag,
}

/// Configures hooks and checks before the server is prepared.
pub struct Builder<R: Runtime> {
    lifecycle: Lifecycle<lameduck::Configuring>,
    runtime: R,
    hooks: HashMap<HookId, HookFn>,
    handle_signals: bool,
}

impl<R: Runtime> fmt::Debug for Builder<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").finish_non_exhaustive()
    }
}

impl<R: Runtime> Builder<R> {
    /// A builder for `config` on `runtime`.
    pub fn new(config: Config, runtime: R) -> Self {
        Builder {
            lifecycle: Lifecycle::new(config),
            runtime,
            hooks: HashMap::new(),
            handle_signals: true,
        }
    }

    /// Adds a hook of `kind`; the methods below name each kind.
    pub fn hook(
        &mut self,
        kind: HookKind,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        let id = match kind {
            HookKind::PreShutdown => self.lifecycle.add_pre_shutdown_hook(name)?,
            HookKind::PostStart => self.lifecycle.add_post_start_hook(name)?,
            HookKind::AfterDrain => self.lifecycle.add_after_drain_hook(name)?,
            HookKind::Destroy => self.lifecycle.add_destroy_hook(name)?,
        };
        self.hooks.insert(id, f.into_boxed());
        Ok(self)
    }

    /// Adds a pre-shutdown hook: runs from `ShutdownInitiated`, concurrently with the delay
    /// and the other pre-shutdown hooks; `NotAcceptingNewRequest` waits for it. A failure
    /// or panic is logged with the hook's name and makes the exit code 1, after the drain.
    pub fn pre_shutdown_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::PreShutdown, name, f)
    }

    /// Adds a post-start hook: runs once every listener serves; the health check
    /// `poststarthook/<name>` fails until it returns. A failure starts a graceful
    /// termination that exits 1.
    pub fn post_start_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::PostStart, name, f)
    }

    /// Adds an after-drain hook (flush logs, traces, exporters): runs after
    /// `InFlightRequestsDrained`; the exit waits for it.
    pub fn after_drain_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::AfterDrain, name, f)
    }

    /// Adds a destroy hook: runs once on every exit path but the second stop signal (which
    /// exits at once), one after the other in registration order, for at most
    /// [`DESTROY_HOOKS_TIMEOUT`] in all.
    pub fn destroy_hook(&mut self, name: &str, f: impl Hook) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::Destroy, name, f)
    }

    /// Registers a readiness-of-routes signal: `MuxAndDiscoveryComplete` fires once every
    /// registered one has been reported with [`Handle::mux_signal_fired`]; until then the
    /// admission layer answers paths your service does not know (404) with 503
    /// `Retry-After: 5`.
    pub fn mux_signal(&mut self, name: &str) -> Result<MuxSignalId, RegisterError> {
        self.lifecycle.add_mux_signal(name)
    }

    /// Adds a health check on `endpoints`.
    pub fn health_check(
        &mut self,
        name: &str,
        endpoints: EndpointSet,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<&mut Self, RegisterError> {
        self.lifecycle
            .add_health_check(name, endpoints, Box::new(check))?;
        Ok(self)
    }

    /// Leaves SIGTERM/SIGINT alone, for embedders who own signals; terminate through
    /// [`Handle::request_shutdown`].
    pub fn without_signals(&mut self) -> &mut Self {
        self.handle_signals = false;
        self
    }

    /// Freezes hooks and checks, and (unless [`Builder::without_signals`]) installs the
    /// SIGTERM/SIGINT handlers, so a signal is caught from here on even before
    /// [`Server::run`] (print your "listening" line after this). Call it inside the runtime.
    /// Listeners are added to the prepared server.
    #[must_use]
    pub fn prepare(self) -> Server<R> {
        let signals = self.handle_signals.then(|| install_signals(&self.runtime));
        let (tx, rx) = mpsc::unbounded();
        let clock = StdClock::with_epoch(self.runtime.now());
        Server {
            lifecycle: self.lifecycle.prepare(),
            runtime: self.runtime,
            clock,
            hooks: self.hooks,
            signals,
            serves: Vec::new(),
            control: Arc::new(ServeControl::default()),
            tx,
            rx,
        }
    }
}

/// A prepared server: hand [`Server::layer`] to your service, add listeners with
/// [`Server::serve`], then [`Server::run`] it.
pub struct Server<R: Runtime> {
    lifecycle: Lifecycle<Prepared>,
    runtime: R,
    clock: StdClock,
    hooks: HashMap<HookId, HookFn>,
    signals: Option<Result<InstalledSignals<R>, ServeError>>,
    serves: Vec<(ListenerId, String, ServeFn<R>)>,
    control: Arc<ServeControl>,
    tx: mpsc::UnboundedSender<Input>,
    rx: mpsc::UnboundedReceiver<Input>,
}

impl<R: Runtime> fmt::Debug for Server<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("lifecycle", &self.lifecycle)
            .finish_non_exhaustive()
    }
}

/// Controls a server from elsewhere: request termination, read its state.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Input>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

impl Handle {
    /// Starts a graceful termination from code. Returns `false` when the server is gone.
    /// Repeating it changes nothing (only a second OS signal forces exit).
    pub fn request_shutdown(&self) -> bool {
        self.tx
            .unbounded_send(Input::StopRequested(StopSource::Api))
            .is_ok()
    }

    /// Delivers an OS-signal-like stop (a second one forces exit 1), for embedders that own
    /// signal handling.
    pub fn deliver_signal(&self) -> bool {
        self.tx
            .unbounded_send(Input::StopRequested(StopSource::Signal))
            .is_ok()
    }

    /// Reports that a readiness-of-routes signal registered with [`Builder::mux_signal`]
    /// fired (idempotent).
    pub fn mux_signal_fired(&self, id: MuxSignalId) -> bool {
        self.tx.unbounded_send(Input::MuxSignalFired(id)).is_ok()
    }

    /// The lifecycle's shared state: signals, gate counts, health.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Normal and long-running requests in flight.
    #[must_use]
    pub fn in_flight(&self) -> (usize, usize) {
        let gate = self.shared.gate();
        (gate.normal_in_flight(), gate.long_running_in_flight())
    }

    /// Resolves when `signal` fires.
    pub fn signal_fired(&self, signal: Signal) -> lameduck::SignalFired {
        self.shared.signal_fired(signal)
    }

    /// The lifecycle's phase: the core's one phase function ([`Shared::phase`]), the same
    /// the driver's machine reports.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.shared.phase()
    }
}

pub use lameduck::machine::DESTROY_HOOKS_TIMEOUT;

static SIGNALS_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Clears [`SIGNALS_INSTALLED`] when the server that set it ends.
struct SignalsInstalled;

/// The process's signal handlers, installed at prepare time.
struct InstalledSignals<R: Runtime> {
    guard: SignalsInstalled,
    stream: R::Signals,
}

fn install_signals<R: Runtime>(runtime: &R) -> Result<InstalledSignals<R>, ServeError> {
    if SIGNALS_INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(ServeError::SignalsAlreadyInstalled);
    }
    let guard = SignalsInstalled;
    let stream = runtime.signals().map_err(ServeError::Signals)?;
    Ok(InstalledSignals { guard, stream })
}

impl Drop for SignalsInstalled {
    fn drop(&mut self) {
        SIGNALS_INSTALLED.store(false, Ordering::Release);
    }
}

impl<R: Runtime> Server<R> {
    /// The shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.lifecycle.shared()
    }

    /// The clock that converts the runtime's instants to the core's.
    #[must_use]
    pub fn clock(&self) -> StdClock {
        self.clock
    }

    /// A handle for requesting termination and observing the server.
    #[must_use]
    pub fn handle(&self) -> Handle {
        Handle {
            shared: Arc::clone(self.shared()),
            tx: self.tx.clone(),
        }
    }

    /// The admission layer to wrap around your service (axum: `Router::layer`).
    #[must_use]
    pub fn layer(&self) -> AdmissionLayer<R> {
        AdmissionLayer::new(Arc::clone(self.shared()), self.runtime.clone(), self.clock)
    }

    /// A service answering the health endpoints, for routers that mount them explicitly.
    #[must_use]
    pub fn health_service(&self) -> crate::HealthService<R> {
        crate::HealthService::new(Arc::clone(self.shared()), self.runtime.clone(), self.clock)
    }

    /// The runtime.
    #[must_use]
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// Adds a server of your own to this lifecycle (another HTTP server implementation, for
    /// example): `serve` runs once the lifecycle starts, reports through the
    /// [`ListenerContext`] when it serves, when its listener stopped and when its last
    /// connection ended, and reacts to [`ListenerContext::stop_listening`]. It must never
    /// close a connection before lameduck's bounds allow it; if it does (a timeout of its
    /// own), it reports [`ListenerContext::report_connections_cut`].
    pub fn serve_with<F, Fut>(&mut self, name: &str, serve: F) -> Result<(), ServeError>
    where
        F: FnOnce(ListenerContext<R>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let id = self.lifecycle.add_listener(name)?;
        let serve: ServeFn<R> = Box::new(move |ctx| Box::pin(serve(ctx)));
        self.serves.push((id, name.to_string(), serve));
        Ok(())
    }

    /// Serves `service` on `listener` (HTTP/1.1 and HTTP/2 with prior knowledge, upgrades
    /// allowed) as part of this lifecycle. Wrap the service in [`Server::layer`] first.
    pub fn serve<L, S>(
        &mut self,
        name: &str,
        listener: L,
        service: S,
    ) -> Result<SocketAddr, ServeError>
    where
        L: Listener,
        S: HttpService,
    {
        let addr = listener.local_addr().map_err(|e| {
            ServeError::Register(RegisterError::InvalidName {
                what: "listener",
                name: e.to_string(),
            })
        })?;
        let id = self.lifecycle.add_listener(name)?;
        let serve: ServeFn<R> = Box::new(move |ctx| Box::pin(accept_loop(ctx, listener, service)));
        self.serves.push((id, name.to_string(), serve));
        Ok(addr)
    }

    /// Runs the lifecycle until it exits; returns the process exit code (0 or 1).
    ///
    /// Installs SIGTERM/SIGINT handling unless [`Builder::without_signals`] was called.
    pub async fn run(self) -> Result<u8, ServeError> {
        let Server {
            lifecycle,
            runtime,
            clock,
            mut hooks,
            signals,
            serves,
            control,
            tx,
            mut rx,
        } = self;
        let _installed = match signals {
            Some(Ok(InstalledSignals {
                guard,
                stream: mut signals,
            })) => {
                let stop_tx = tx.clone();
                runtime.spawn(async move {
                    while let Some(sig) = signals.next().await {
                        info!(
                            signal = sig.name(),
                            "[graceful-termination] received signal"
                        );
                        if stop_tx
                            .unbounded_send(Input::StopRequested(StopSource::Signal))
                            .is_err()
                        {
                            break;
                        }
                    }
                });
                Some(guard)
            }
            Some(Err(e)) => return Err(e),
            None => None,
        };

        let shared = Arc::clone(lifecycle.shared());
        let now = |rt: &R| clock.instant(rt.now());
        info!("[graceful-termination] waiting for shutdown to be initiated");
        let mut lc = lifecycle.start(now(&runtime));
        for (id, name, serve) in serves {
            let ctx = ListenerContext {
                id,
                name,
                runtime: runtime.clone(),
                shared: Arc::clone(&shared),
                control: Arc::clone(&control),
                tx: tx.clone(),
            };
            runtime.spawn(serve(ctx));
        }

        // HasBeenReady fires in a request task (the first 200 from /readyz); log it here.
        let mut has_been_ready = Some(shared.signal_fired(Signal::HasBeenReady));
        loop {
            while let Some(event) = lc.poll_event() {
                match event {
                    Event::Signal { signal, .. } => {
                        // HasBeenReady can only fire before ShutdownInitiated; if it did and is
                        // not logged yet, log it first so the log keeps the real order.
                        if signal == Signal::ShutdownInitiated
                            && has_been_ready.is_some()
                            && shared.has_fired(Signal::HasBeenReady)
                        {
                            has_been_ready = None;
                            log_signal(Signal::HasBeenReady);
                        }
                        log_signal(signal);
                    }
                    Event::NotifyReady => notify_systemd(&[sd_notify::NotifyState::Ready]),
                    Event::NotifyStopping => notify_systemd(&[sd_notify::NotifyState::Stopping]),
                    Event::RunPostStartHooks => {
                        spawn_hooks(&runtime, &lc, HookKind::PostStart, &mut hooks, &tx)
                    }
                    Event::RunPreShutdownHooks => {
                        spawn_hooks(&runtime, &lc, HookKind::PreShutdown, &mut hooks, &tx)
                    }
                    Event::RunAfterDrainHooks => {
                        spawn_hooks(&runtime, &lc, HookKind::AfterDrain, &mut hooks, &tx)
                    }
                    Event::DrainStarted(plan) => info!(
                        normal = plan.normal_in_flight,
                        long_running = plan.long_running_in_flight,
                        pacing_interval = ?plan.pacing_interval,
                        "[graceful-termination] draining in-flight requests"
                    ),
                    Event::DrainProgress {
                        normal_in_flight,
                        long_running_in_flight,
                    } => info!(
                        normal = normal_in_flight,
                        long_running = long_running_in_flight,
                        "[graceful-termination] drain in progress"
                    ),
                    Event::NormalDrainFinished {
                        remaining,
                        timed_out,
                    } => {
                        if timed_out {
                            warn!(remaining, "[graceful-termination] in-flight non long-running request(s) did not drain before the deadline");
                        } else {
                            info!("[graceful-termination] in-flight non long-running request(s) have drained");
                        }
                    }
                    Event::LongRunningDrainFinished {
                        before,
                        after,
                        timed_out,
                        skipped,
                    } => {
                        if skipped {
                            info!(active = before, "[graceful-termination] not going to wait for active watch request(s) to drain");
                        } else {
                            info!(
                                activeWatchesBefore = before,
                                activeWatchesAfter = after,
                                timed_out,
                                "[graceful-termination] active watch request(s) have drained"
                            );
                        }
                    }
                    Event::StopListening { shutdown_deadline } => {
                        info!(
                            shutdown_timeout = ?shutdown_deadline.map(|d| d.saturating_duration_since(now(&runtime))),
                            "[graceful-termination] stopping listeners"
                        );
                        control.stop.set();
                    }
                    Event::HttpShutdownTimedOut => warn!(
                        "[graceful-termination] HTTP shutdown timeout passed: no longer waiting for open connections (none is closed; each request keeps its own deadline)"
                    ),
                    Event::ConnectionsCut(id) => error!(
                        listener = lc.machine().listener_name(id).unwrap_or("?"),
                        "[graceful-termination] the server ended connections before the termination bounds allowed it: the drain did not complete"
                    ),
                    Event::HookFailed { hook, outcome } => error!(
                        hook = lc.machine().hook_name(hook).unwrap_or("?"),
                        kind = lc.machine().hook_kind(hook).map_or("?", HookKind::name),
                        ?outcome,
                        "[graceful-termination] hook failed"
                    ),
                    Event::ListenerFailed(id) => error!(
                        listener = lc.machine().listener_name(id).unwrap_or("?"),
                        "[graceful-termination] listener stopped unexpectedly"
                    ),
                    Event::RunDestroyHooks => {
                        info!("[graceful-termination] running destroy hooks");
                        spawn_destroy_hooks(&runtime, &lc, &mut hooks, &tx);
                    }
                    Event::Exit { code, reason } => {
                        info!(code, %reason, "[graceful-termination] server is exiting");
                        return Ok(code);
                    }
                }
            }

            // Wait for an input, a deadline or a drain notification. The gate listener is
            // created before the machine re-checks the counts, so no release is missed.
            let draining = lc.phase() == Phase::Draining;
            let gate_listener = draining.then(|| shared.gate().listen());
            if draining {
                let _ = lc.handle_input(Input::DrainProgress, now(&runtime));
                if lc.machine().has_pending_events() {
                    continue;
                }
            }
            let deadline = lc.poll_timeout().map(|d| clock.to_std(d));
            let mut sleep = pin!(deadline.map(|d| runtime.sleep_until(d)));
            let mut gate_listener = gate_listener;
            let woke = poll_fn(|cx| {
                // HasBeenReady first: it fired before anything queued behind it.
                if let Some(ready) = has_been_ready.as_mut() {
                    if ready.poll_unpin(cx).is_ready() {
                        has_been_ready = None;
                        return Poll::Ready(Wake::Ready);
                    }
                }
                if let Poll::Ready(input) = rx.poll_next_unpin(cx) {
                    return Poll::Ready(Wake::Input(input));
                }
                if let Some(l) = gate_listener.as_mut() {
                    if l.poll_unpin(cx).is_ready() {
                        return Poll::Ready(Wake::Gate);
                    }
                }
                if let Some(s) = sleep.as_mut().as_pin_mut() {
                    if s.poll(cx).is_ready() {
                        return Poll::Ready(Wake::Timer);
                    }
                }
                Poll::Pending
            })
            .await;
            let t = now(&runtime);
            let result = match woke {
                Wake::Input(Some(input)) => lc.handle_input(input, t),
                // Every sender lives in this function too; cannot happen while it runs.
                Wake::Input(None) => Ok(()),
                Wake::Gate => lc.handle_input(Input::DrainProgress, t),
                Wake::Ready => {
                    log_signal(Signal::HasBeenReady);
                    Ok(())
                }
                Wake::Timer => {
                    lc.handle_timeout(t);
                    Ok(())
                }
            };
            if let Err(e) = result {
                debug!(error = %e, "input ignored by the lifecycle");
            }
        }
    }
}

enum Wake {
    Input(Option<Input>),
    Gate,
    Ready,
    Timer,
}

fn log_signal(signal: Signal) {
    match signal {
        Signal::PreShutdownHooksStopped => info!(
            name = %signal,
            "[graceful-termination] pre-shutdown hooks completed, shutdown event"
        ),
        Signal::HasBeenReady | Signal::MuxAndDiscoveryComplete => {
            info!(name = %signal, "[graceful-termination] lifecycle event");
        }
        _ => info!(name = %signal, "[graceful-termination] shutdown event"),
    }
}

fn notify_systemd(state: &[sd_notify::NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, state) {
        warn!(error = %e, "cannot notify systemd");
    }
}

fn spawn_hooks<R: Runtime>(
    runtime: &R,
    lc: &Lifecycle<lameduck::Running>,
    kind: HookKind,
    hooks: &mut HashMap<HookId, HookFn>,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let ids: Vec<(HookId, String)> = lc
        .machine()
        .hooks(kind)
        .map(|(id, name)| (id, name.to_string()))
        .collect();
    for (id, name) in ids {
        let Some(hook) = hooks.remove(&id) else {
            continue;
        };
        let tx = tx.clone();
        runtime.spawn(async move {
            let outcome = match AssertUnwindSafe(async move { hook().await }).catch_unwind().await {
                Ok(Ok(())) => HookOutcome::Succeeded,
                Ok(Err(e)) => {
                    error!(hook = %name, kind = kind.name(), error = %e, "[graceful-termination] hook returned an error");
                    HookOutcome::Failed
                }
                Err(_) => {
                    error!(hook = %name, kind = kind.name(), "[graceful-termination] hook panicked");
                    HookOutcome::Panicked
                }
            };
            let _ = tx.unbounded_send(Input::HookFinished { hook: id, outcome });
        });
    }
}

/// Runs the destroy hooks one after the other, in registration order, reporting each; the
/// machine bounds them with [`DESTROY_HOOKS_TIMEOUT`] and exits at once on a second signal.
fn spawn_destroy_hooks<R: Runtime>(
    runtime: &R,
    lc: &Lifecycle<lameduck::Running>,
    hooks: &mut HashMap<HookId, HookFn>,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let ordered: Vec<(HookId, String, HookFn)> = lc
        .machine()
        .hooks(HookKind::Destroy)
        .filter_map(|(id, name)| Some((id, name.to_string(), hooks.remove(&id)?)))
        .collect();
    let tx = tx.clone();
    runtime.spawn(async move {
        for (id, name, hook) in ordered {
            let outcome = match AssertUnwindSafe(async move { hook().await })
                .catch_unwind()
                .await
            {
                Ok(Ok(())) => HookOutcome::Succeeded,
                Ok(Err(e)) => {
                    error!(hook = %name, error = %e, "destroy hook failed");
                    HookOutcome::Failed
                }
                Err(_) => {
                    error!(hook = %name, "destroy hook panicked");
                    HookOutcome::Panicked
                }
            };
            if tx
                .unbounded_send(Input::HookFinished { hook: id, outcome })
                .is_err()
            {
                return;
            }
        }
    });
}

/// Counts a server's live connections and wakes waiters when none is left, so a server
/// reports `ServerStopped` the moment its last connection ends.
#[derive(Clone, Default)]
pub struct ConnectionTracker {
    inner: Arc<TrackerInner>,
}

#[derive(Default)]
struct TrackerInner {
    count: AtomicUsize,
    zero: Notify,
}

impl fmt::Debug for ConnectionTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionTracker")
            .field("live", &self.live())
            .finish()
    }
}

/// One live connection; dropping it ends it for the [`ConnectionTracker`].
#[derive(Debug)]
pub struct ConnectionGuard(ConnectionTracker);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let inner = &self.0.inner;
        if inner.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.zero.notify(usize::MAX);
        }
    }
}

impl ConnectionTracker {
    /// A tracker with no connection.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a new connection until the guard drops.
    #[must_use]
    pub fn open(&self) -> ConnectionGuard {
        self.inner.count.fetch_add(1, Ordering::AcqRel);
        ConnectionGuard(self.clone())
    }

    /// Live connections.
    #[must_use]
    pub fn live(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    /// Resolves once no connection is live.
    pub async fn wait_zero(&self) {
        loop {
            if self.live() == 0 {
                return;
            }
            let l = self.inner.zero.listen();
            if self.live() == 0 {
                return;
            }
            l.await;
        }
    }
}

/// How long an accept loop waits after an accept error (e.g. too many open files).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

async fn accept_loop<R, L, S>(ctx: ListenerContext<R>, mut listener: L, service: S)
where
    R: Runtime,
    L: Listener,
    S: HttpService,
{
    let mut builder = auto::Builder::new(Exec(ctx.runtime.clone()));
    builder.http1().timer(ctx.runtime.hyper_timer());
    builder.http2().timer(ctx.runtime.hyper_timer());
    let builder = Arc::new(builder);
    let connections = ConnectionTracker::new();
    if let Ok(addr) = listener.local_addr() {
        info!(listener = %ctx.name, %addr, "Serving on {addr}");
    }
    ctx.report_serving();

    loop {
        let stop = ctx.stop_listening();
        let accepted = {
            let accept = pin!(listener.accept());
            let stop = pin!(stop);
            match futures_util::future::select(accept, stop).await {
                futures_util::future::Either::Left((r, _)) => r,
                futures_util::future::Either::Right(_) => break,
            }
        };
        match accepted {
            Ok((io, peer)) => {
                let guard = connections.open();
                let conn = serve_connection(
                    Arc::clone(&builder),
                    io,
                    peer,
                    service.clone(),
                    Arc::clone(&ctx.control),
                );
                ctx.runtime.spawn(async move {
                    conn.await;
                    drop(guard);
                });
            }
            Err(e) => {
                warn!(listener = %ctx.name, error = %e, "accept failed");
                let sleep = ctx
                    .runtime
                    .sleep_until(ctx.runtime.now() + ACCEPT_ERROR_BACKOFF);
                let stop = ctx.stop_listening();
                if let futures_util::future::Either::Right(_) =
                    futures_util::future::select(pin!(sleep), pin!(stop)).await
                {
                    break;
                }
            }
        }
    }
    let addr = listener.local_addr().ok();
    drop(listener);
    info!(listener = %ctx.name, addr = ?addr, "Stopped listening");
    ctx.report_listener_stopped();
    connections.wait_zero().await;
    ctx.report_server_stopped();
}

/// Serves one connection. Graceful shutdown (HTTP/1 `Connection: close` after the current
/// response, idle connections closed; HTTP/2 GOAWAY) starts when the driver broadcasts
/// `StopListening` (the machine decides when: in mode A at `NotAcceptingNewRequest`, in
/// mode B after the drain), and for an HTTP/2 connection also when one of its responses asks
/// to close the connection (mode B's 429).
async fn serve_connection<R, I, S>(
    builder: Arc<auto::Builder<Exec<R>>>,
    io: I,
    peer: SocketAddr,
    service: S,
    control: Arc<ServeControl>,
) where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
{
    let goaway = Arc::new(Flag::default());
    let svc = crate::conn::ConnService::new(service, Arc::clone(&goaway));
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, svc));
    let graceful = async {
        let stop = pin!(control.stop.wait());
        let goaway = pin!(goaway.wait());
        futures_util::future::select(stop, goaway).await;
    };
    let mut graceful = pin!(graceful);
    let mut shutting_down = false;
    let result = poll_fn(|cx| {
        if !shutting_down && graceful.as_mut().poll(cx).is_ready() {
            shutting_down = true;
            conn.as_mut().graceful_shutdown();
        }
        conn.as_mut().poll(cx)
    })
    .await;
    if let Err(e) = result {
        debug!(%peer, error = %e, "connection error");
    }
}
