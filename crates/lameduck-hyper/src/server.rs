//! The prepared server: listeners are added to it, its admission layer wraps the user's
//! service, and [`Server::run`] hands everything to the run loop.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use futures_channel::mpsc;
use lameduck::machine::RegisterError;
use lameduck::{Input, Lifecycle, Prepared, RequestInfo, Shared, StdClock};

use crate::connection::accept::{accept_loop, NoHandshake};
use crate::connection::context::{ListenerContext, ServeControl, ServeTask};
use crate::connection::handshake::Handshake;
use crate::connection::HttpService;
use crate::error::ServeError;
use crate::handle::Handle;
use crate::request::health::HealthService;
use crate::request::layer::AdmissionLayer;
use crate::run::hooks::Hooks;
use crate::run::os_signals::InstalledOsSignals;
use crate::run::succession::Succession;
use crate::run::RunLoop;
use crate::runtime::{Listener, Runtime};
use crate::sockets::hand_over::{HandOver, Predecessor};

/// A prepared server: add listeners with [`Server::serve`], then [`Server::run`] it.
///
/// Every request of a served listener is admitted by the server itself: classified (normal,
/// long-running, exempt), rejected with 503/429 once the gate closes, bounded by the request
/// timeout, counted until its response body ends; `/readyz`, `/livez` and `/healthz` are
/// answered. Pass your service as it is (an axum `Router`, a `tower::service_fn`, ...).
pub struct Server<R: Runtime> {
    lifecycle: Lifecycle<Prepared>,
    runtime: R,
    clock: StdClock,
    /// How the listeners served from now on admit requests.
    admission: AdmissionLayer<R>,
    hooks: Hooks,
    os_signals: Option<Result<InstalledOsSignals<R>, ServeError>>,
    serves: Vec<ServeTask<R>>,
    /// The hand-over: its target, the listening sockets, the predecessor.
    succession: Succession,
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

impl<R: Runtime> Server<R> {
    /// The server [`Builder::prepare`](crate::Builder::prepare) makes.
    pub(crate) fn new(
        lifecycle: Lifecycle<Prepared>,
        runtime: R,
        hooks: Hooks,
        os_signals: Option<Result<InstalledOsSignals<R>, ServeError>>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded();
        let clock = StdClock::with_epoch(runtime.now());
        let admission = AdmissionLayer::new(Arc::clone(lifecycle.shared()), runtime.clone(), clock);
        Server {
            lifecycle,
            runtime,
            clock,
            admission,
            hooks,
            os_signals,
            serves: Vec::new(),
            succession: Succession::default(),
            tx,
            rx,
        }
    }

    /// Hands the listening sockets over to a successor waiting at `target` when asked
    /// (SIGUSR2, or [`Handle::hand_over`]), then terminates gracefully once the successor
    /// is ready; see [`crate::sockets::hand_over`]. Without it, a hand-over request is
    /// logged as failed and the server keeps serving.
    pub fn hand_over_to(&mut self, target: HandOver) -> &mut Self {
        self.succession.target = Some(target);
        self
    }

    /// Adds `socket`, the listening socket of a listener served with
    /// [`Server::serve_with`], to those a hand-over passes on ([`Server::serve`] adds its
    /// listeners' own). A copy is kept until the listeners stop.
    pub fn hand_over_socket(
        &mut self,
        listener: &str,
        socket: std::os::fd::BorrowedFd<'_>,
    ) -> std::io::Result<()> {
        self.succession.keep(listener, socket)
    }

    /// Says that the listening sockets outlive this process: they were inherited from
    /// systemd socket activation ([`crate::sockets::systemd::systemd_listeners`]), whose copy keeps
    /// listening. From `ShutdownInitiated` on this process then stops accepting (connections
    /// wait in the socket's backlog, or go to the next generation) and ends keep-alive after
    /// each response, then drains as usual. A completed hand-over says it by itself.
    pub fn sockets_outlive_process(&mut self) -> &mut Self {
        self.shared().set_sockets_outlive();
        self
    }

    /// This process is a successor: tells `predecessor` (from
    /// [`receive_listeners`](crate::sockets::hand_over::receive_listeners)) once it is up
    /// (every listener serves and every post-start hook succeeded), and systemd that it is
    /// the service's main process (`MAINPID=`, with `NotifyAccess=all` in the unit). If it
    /// terminates before, the predecessor learns it and keeps serving.
    pub fn report_up_to(&mut self, predecessor: Predecessor) -> &mut Self {
        self.succession.predecessor = Some(predecessor);
        self
    }

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
        Handle::new(Arc::clone(self.shared()), self.tx.clone())
    }

    /// Uses `is_long_running` to pick the long-running requests (watch, SSE, WebSocket) of
    /// the listeners served after this call; the default is
    /// [`lameduck::default_is_long_running`].
    pub fn long_running(
        &mut self,
        is_long_running: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> &mut Self {
        self.admission = self.admission.clone().long_running(is_long_running);
        self
    }

    /// Whether the listeners served after this call answer `/readyz`, `/livez` and
    /// `/healthz` themselves (default: yes). Turn it off to mount
    /// [`Server::health_service`] in your own router.
    pub fn serve_health(&mut self, serve: bool) -> &mut Self {
        self.admission = self.admission.clone().serve_health(serve);
        self
    }

    /// The admission the server applies, as a tower layer, for a server of your own added
    /// with [`Server::serve_with`]. Do not wrap a service passed to [`Server::serve`] in it:
    /// that one is admitted already, and would be counted twice.
    #[must_use]
    pub fn admission_layer(&self) -> AdmissionLayer<R> {
        self.admission.clone()
    }

    /// A service answering the health endpoints, for routers that mount them explicitly.
    #[must_use]
    pub fn health_service(&self) -> HealthService<R> {
        HealthService::new(Arc::clone(self.shared()), self.runtime.clone(), self.clock)
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
        self.serves.push(ServeTask {
            id,
            name: name.to_string(),
            serve: Box::new(move |ctx| Box::pin(serve(ctx))),
        });
        Ok(())
    }

    /// Serves `service` on `listener` (HTTP/1.1 and HTTP/2 with prior knowledge, upgrades
    /// allowed) as part of this lifecycle, admitting every request (see [`Server`]).
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
        self.serve_listener(name, listener, None::<Arc<NoHandshake>>, service)
    }

    /// Serves `service` on `listener` as [`Server::serve`] does, each connection going
    /// through `handshake` first (TLS: the adapters' `TlsAcceptor`), in the connection's own
    /// task and bounded by [`Handshake::timeout`], so that a slow or silent client never
    /// delays another. The protocol the handshake chose (ALPN `h2` or `http/1.1`) is the one
    /// served.
    pub fn serve_tls<L, H, S>(
        &mut self,
        name: &str,
        listener: L,
        handshake: H,
        service: S,
    ) -> Result<SocketAddr, ServeError>
    where
        L: Listener,
        H: Handshake<L::Io>,
        S: HttpService,
    {
        self.serve_listener(name, listener, Some(Arc::new(handshake)), service)
    }

    fn serve_listener<L, H, S>(
        &mut self,
        name: &str,
        listener: L,
        handshake: Option<Arc<H>>,
        service: S,
    ) -> Result<SocketAddr, ServeError>
    where
        L: Listener,
        H: Handshake<L::Io>,
        S: HttpService,
    {
        let addr = listener.local_addr().map_err(|e| {
            ServeError::Register(RegisterError::InvalidName {
                what: "listener",
                name: e.to_string(),
            })
        })?;
        let id = self.lifecycle.add_listener(name)?;
        if let Some(socket) = listener.socket() {
            self.succession
                .keep(name, socket)
                .map_err(ServeError::HandOverSocket)?;
        }
        let admission = Arc::new(self.admission.clone());
        self.serves.push(ServeTask {
            id,
            name: name.to_string(),
            serve: Box::new(move |ctx| {
                Box::pin(accept_loop(ctx, listener, service, admission, handshake))
            }),
        });
        Ok(addr)
    }

    /// Runs the lifecycle until it exits; returns the process exit code (0 or 1).
    ///
    /// Installs SIGTERM/SIGINT handling unless
    /// [`Builder::without_os_signals`](crate::Builder::without_os_signals) was called.
    pub async fn run(self) -> Result<u8, ServeError> {
        let Server {
            lifecycle,
            runtime,
            clock,
            hooks,
            os_signals,
            serves,
            succession,
            tx,
            rx,
            admission: _,
        } = self;
        // Held until the run ends: the next server of this process may install them again.
        let _installed = os_signals
            .transpose()?
            .map(|os_signals| os_signals.forward(&runtime, tx.clone()));
        let control = Arc::new(ServeControl::default());
        let run = RunLoop::start(lifecycle, runtime, clock, hooks, Arc::clone(&control), tx)
            .with_succession(succession);
        for task in serves {
            run.spawn_server(task);
        }
        Ok(run.run(rx).await)
    }
}
