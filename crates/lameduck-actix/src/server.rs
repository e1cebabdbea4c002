//! [`AutoH2cServer`]: actix-web over plain-text HTTP/1 and h2c, and over TLS (HTTP/1.1 and
//! HTTP/2 by ALPN), with the HTTP/2 connections watched for GOAWAY (see the `goaway` module),
//! built by lameduck because actix-web's own `HttpServer` offers no way to wrap a
//! connection's I/O.
//!
//! TLS is terminated here, below the GOAWAY watcher: each TLS connection's handshake runs in
//! the accept service, which actix-server calls in the worker's own task for that connection
//! (`StreamService::call` spawns it), never in its accept thread, so a slow or silent client
//! delays no other. The handshake is bounded by [`ServerTls::handshake_timeout`], and by a
//! second after the server stops accepting; the connection is counted from accept on.
//!
//! With a [maximum connection age](lameduck::Config::max_connection_age), each connection's
//! age is drawn when it is accepted: at its age an HTTP/1 connection is closed after its
//! response in progress (`Connection: close`), or at once when idle, and an HTTP/2 one says
//! the two-step GOAWAY; past the [grace](lameduck::Config::max_connection_age_grace), if one
//! is set, what is left of it is cut and counted.

use std::io;
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix_http::body::{BoxBody, MessageBody};
use actix_http::error::DispatchError;
use actix_http::{Extensions, HttpService, KeepAlive, Protocol, Request, Response};
use actix_rt::net::TcpStream;
use actix_service::{
    fn_service, map_config, IntoServiceFactory, ServiceFactory, ServiceFactoryExt,
};
use actix_web::dev::AppConfig;
use futures_util::future::select;
use lameduck_hyper::{ConnectionTracker, Runtime as _};
use lameduck_tls::ServerTls;
use lameduck_tokio::TokioRuntime;

use crate::connection::LifecycleRef;
use crate::connection::{hand_over_age, take_handed_over_age, AgedAt, TrackedConnection};
use crate::goaway::{Announced, GoawayBroadcast, GoawayIo, GoawayRequest};
use crate::io::{AgedIo, ConnectionIo};
use crate::serve::{note_arrival, ActixServer, ServeSetup};
use crate::tls::TlsAcceptor;

/// The start of the HTTP/2 preface that marks an h2c (prior knowledge) connection, as actix
/// itself tells them apart: one peek at the connection's first bytes.
const H2C_PREFACE_START: &[u8; 12] = b"PRI * HTTP/2";

/// The app's types, for inference only (`fn`: neither owned nor `!Send`).
type AppTypes<I, S, B> = fn() -> (I, S, B);

/// One bound listener, with its TLS configuration when it serves TLS.
struct Listener {
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<ServerTls>,
}

/// An actix-web server for plain-text HTTP/1 and h2c (HTTP/2 with prior knowledge), and for
/// HTTP/1.1 and HTTP/2 over TLS, whose HTTP/2 connections get GOAWAY when kube-apiserver's
/// would, for [`serve`](crate::serve): the same `App` factory as actix-web's
/// `HttpServer::new`, a subset of its settings, and `bind`/`listen` (both serve HTTP/1 and
/// h2c, as actix's `bind_auto_h2c` does) and `bind_tls`/`listen_tls` (TLS, the protocol
/// chosen by ALPN). One server may mix plain-text and TLS listeners.
///
/// ```no_run
/// # use lameduck_actix::{Server, TokioRuntime};
/// # async fn f(mut server: Server<TokioRuntime>) -> Result<(), lameduck_actix::ActixServeError> {
/// let tls = lameduck_actix::ServerTls::from_files("/etc/tls/tls.crt", "/etc/tls/tls.key")
///     .expect("TLS files");
/// let http = lameduck_actix::AutoH2cServer::new(|| actix_web::App::new());
/// lameduck_actix::serve(&mut server, "api", http, |http| {
///     http.workers(2)
///         .bind_tls("0.0.0.0:8443", &tls)?
///         .bind("127.0.0.1:8080")
/// })?;
/// # Ok(()) }
/// ```
pub struct AutoH2cServer<F, I, S, B> {
    factory: F,
    listeners: Vec<Listener>,
    workers: Option<usize>,
    keep_alive: KeepAlive,
    client_request_timeout: Duration,
    client_disconnect_timeout: Duration,
    setup: Option<ServeSetup>,
    _app: PhantomData<AppTypes<I, S, B>>,
}

impl<F, I, S, B> std::fmt::Debug for AutoH2cServer<F, I, S, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoH2cServer")
            .field(
                "addrs",
                &self.listeners.iter().map(|l| l.addr).collect::<Vec<_>>(),
            )
            .field(
                "tls",
                &self
                    .listeners
                    .iter()
                    .map(|l| l.tls.is_some())
                    .collect::<Vec<_>>(),
            )
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<F, I, S, B> AutoH2cServer<F, I, S, B>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig>,
{
    /// A server for the apps `factory` makes (one per worker), as `HttpServer::new`.
    pub fn new(factory: F) -> Self {
        AutoH2cServer {
            factory,
            listeners: Vec::new(),
            workers: None,
            // actix-web's defaults.
            keep_alive: KeepAlive::default(),
            client_request_timeout: Duration::from_secs(5),
            client_disconnect_timeout: Duration::from_secs(1),
            setup: None,
            _app: PhantomData,
        }
    }

    /// Number of worker threads (actix's default: one per core).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers.max(1));
        self
    }

    /// HTTP/1 keep-alive, as actix-web's `HttpServer::keep_alive`.
    #[must_use]
    pub fn keep_alive(mut self, keep_alive: impl Into<KeepAlive>) -> Self {
        self.keep_alive = keep_alive.into();
        self
    }

    /// How long a client may take to send a request head (default 5 s).
    #[must_use]
    pub fn client_request_timeout(mut self, timeout: Duration) -> Self {
        self.client_request_timeout = timeout;
        self
    }

    /// How long a closing connection may take to disconnect (default 1 s).
    #[must_use]
    pub fn client_disconnect_timeout(mut self, timeout: Duration) -> Self {
        self.client_disconnect_timeout = timeout;
        self
    }

    /// Serves HTTP/1 and h2c on `listener`.
    ///
    /// # Errors
    ///
    /// The listener has no local address.
    pub fn listen(self, listener: TcpListener) -> io::Result<Self> {
        self.push(listener, None)
    }

    /// Binds every address of `addrs` and serves HTTP/1 and h2c on them.
    ///
    /// # Errors
    ///
    /// An address cannot be resolved or bound.
    pub fn bind(mut self, addrs: impl ToSocketAddrs) -> io::Result<Self> {
        for addr in addrs.to_socket_addrs()? {
            self = self.listen(TcpListener::bind(addr)?)?;
        }
        Ok(self)
    }

    /// Serves TLS on `listener` with `tls` (the certificate it serves at each handshake):
    /// HTTP/2 when the client's ALPN chooses `h2` (with GOAWAY, as h2c), HTTP/1.1 otherwise.
    ///
    /// Each handshake runs in its connection's own task, bounded by
    /// [`ServerTls::handshake_timeout`], and the connection is counted from accept on, so a
    /// termination waits for the handshakes in progress, each for at most
    /// [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) after the server
    /// stopped accepting (then it is cut and counted). A client that speaks plaintext HTTP
    /// is answered [`lameduck_tls::PLAINTEXT_HTTP_RESPONSE`] (400); failed handshakes are
    /// reported to [`ServerTls::handshake_failed`] (counted, logged without flooding).
    ///
    /// # Errors
    ///
    /// The listener has no local address.
    pub fn listen_tls(self, listener: TcpListener, tls: &ServerTls) -> io::Result<Self> {
        self.push(listener, Some(tls.clone()))
    }

    /// Binds every address of `addrs` and serves TLS on them, as [`listen_tls`](Self::listen_tls).
    ///
    /// # Errors
    ///
    /// An address cannot be resolved or bound.
    pub fn bind_tls(mut self, addrs: impl ToSocketAddrs, tls: &ServerTls) -> io::Result<Self> {
        for addr in addrs.to_socket_addrs()? {
            self = self.listen_tls(TcpListener::bind(addr)?, tls)?;
        }
        Ok(self)
    }

    fn push(mut self, listener: TcpListener, tls: Option<ServerTls>) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        self.listeners.push(Listener {
            listener,
            addr,
            tls,
        });
        Ok(self)
    }
}

/// What one worker's HTTP service of one listener is built from (everything but the app).
#[derive(Clone)]
struct HttpSettings {
    keep_alive: KeepAlive,
    request_timeout: Duration,
    disconnect_timeout: Duration,
    // Set when the graceful stop begins: the connections' graceful-stop signal.
    stopping: Arc<GoawayBroadcast>,
    lifecycle: Option<LifecycleRef>,
    connections: ConnectionTracker,
    addr: SocketAddr,
    secure: bool,
}

/// The HTTP service of one worker for one listener: actix-http over a [`ConnectionIo`], the
/// app `factory` makes inside.
fn http_service<I, S, B>(
    app: I,
    settings: HttpSettings,
) -> impl ServiceFactory<
    (ConnectionIo, Protocol, Option<SocketAddr>),
    Config = (),
    Response = (),
    Error = DispatchError,
    InitError = (),
>
where
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig> + 'static,
    S::Error: Into<Response<BoxBody>> + 'static,
    S::InitError: std::fmt::Debug,
    S::Response: Into<Response<B>> + 'static,
    <S::Service as actix_service::Service<Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    let HttpSettings {
        keep_alive,
        request_timeout,
        disconnect_timeout,
        stopping,
        lifecycle,
        connections,
        addr,
        secure,
    } = settings;
    let app = app.into_factory();
    let host = addr.to_string();
    let lifecycle_for_connections = lifecycle.clone();
    let builder = HttpService::<ConnectionIo, _, _>::build()
        .graceful_shutdown_signal(move || {
            let (announced, stopping) =
                (Announced::new(Arc::clone(&stopping)), Arc::clone(&stopping));
            // actix-http builds an HTTP/1 connection's signal right after the connection
            // callback, which left the connection's maximum age here, if it has one.
            let aged_at = take_handed_over_age();
            async move {
                let stop = async {
                    announced.await;
                    // An idle connection is not closed under a request its client may be
                    // sending, and with the idle-close spread it waits for its own point of
                    // the window; a busy one closes after its response anyway
                    // (`Connection: close` once keep-alive has ended).
                    if let Some(until) = stopping.close_at(Some(false)) {
                        TokioRuntime.sleep_until(until).await;
                    }
                };
                match aged_at {
                    None => stop.await,
                    // At its age the connection ends as at the stop: after its response in
                    // progress, at once when idle.
                    Some(at) => {
                        let aged = TokioRuntime.sleep_until(at);
                        select(pin!(stop), pin!(aged)).await;
                    }
                }
            }
        })
        .keep_alive(keep_alive)
        .client_request_timeout(request_timeout)
        .client_disconnect_timeout(disconnect_timeout)
        .local_addr(addr);
    let builder = if secure { builder.secure() } else { builder };
    builder
        .on_connect_ext(move |io: &ConnectionIo, data: &mut Extensions| {
            let lifecycle = lifecycle_for_connections.as_ref();
            note_arrival(lifecycle, data);
            // Dropped with the connection's data, when the connection ends. A TLS connection
            // is counted by its `TlsIo`, from accept on.
            let track = |data: &mut Extensions| {
                data.insert(Rc::new(TrackedConnection::new(
                    connections.open(),
                    lifecycle,
                )));
            };
            let mut aged_at = None;
            match io {
                ConnectionIo::Http1(_) => track(data),
                ConnectionIo::Http2(io) => {
                    track(data);
                    data.insert(Rc::clone(io.request()));
                }
                ConnectionIo::TlsHttp1(_) => {}
                ConnectionIo::TlsHttp2(io) => {
                    data.insert(Rc::clone(io.request()));
                }
                ConnectionIo::AgedHttp1(io) => {
                    if let ConnectionIo::Http1(_) = io.get_ref() {
                        track(data);
                    }
                    // For the admission middleware's `Connection: close`.
                    data.insert(AgedAt(io.aged_at()));
                    aged_at = Some(io.aged_at());
                }
            }
            // For the connection's graceful-shutdown signal, built next (HTTP/1 only).
            hand_over_age(aged_at);
        })
        .finish(map_config(app, move |()| {
            // What actix-web's `HttpServer` gives its apps; actix-web has no other public
            // constructor for it.
            AppConfig::__priv_test_new(secure, host.clone(), addr)
        }))
}

impl<F, I, S, B> ActixServer for AutoH2cServer<F, I, S, B>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig> + 'static,
    // actix-web's `Error` (an `App`'s) is one: no error-mapping layer around every request.
    S::Error: Into<Response<BoxBody>> + 'static,
    S::InitError: std::fmt::Debug,
    S::Response: Into<Response<B>> + 'static,
    <S::Service as actix_service::Service<Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    fn bound_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().map(|l| l.addr).collect()
    }

    fn listening_sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd as _;
        self.listeners.iter().map(|l| l.listener.as_fd()).collect()
    }

    fn spreads_idle_closes(&self) -> bool {
        true
    }

    fn bounds_silent_peers(&self) -> bool {
        true
    }

    fn configure(mut self, setup: ServeSetup) -> Self {
        self.setup = Some(setup);
        self
    }

    fn start(self) -> io::Result<actix_server::Server> {
        let setup = self.setup.unwrap_or_default();
        let mut builder = actix_server::Server::build()
            .disable_signals()
            .shutdown_timeout(setup.shutdown_timeout.as_secs().max(1));
        if let Some(workers) = self.workers {
            builder = builder.workers(workers);
        }
        for Listener {
            listener,
            addr,
            tls,
        } in self.listeners
        {
            let settings = HttpSettings {
                keep_alive: self.keep_alive,
                request_timeout: self.client_request_timeout,
                disconnect_timeout: self.client_disconnect_timeout,
                stopping: Arc::clone(&setup.goaway),
                lifecycle: setup.lifecycle.clone(),
                connections: setup.connections.clone(),
                addr,
                secure: tls.is_some(),
            };
            let (factory, goaway) = (self.factory.clone(), Arc::clone(&setup.goaway));
            let name = format!("lameduck-actix-{addr}");
            builder = match tls {
                None => builder.listen(name, listener, move || {
                    let http = http_service(factory(), settings.clone());
                    let goaway = Arc::clone(&goaway);
                    fn_service(move |io: TcpStream| accept(io, Arc::clone(&goaway))).and_then(http)
                })?,
                Some(tls) => builder.listen(name, listener, move || {
                    let http = http_service(factory(), settings.clone());
                    // One acceptor per worker, shared by its connections.
                    let acceptor = Rc::new(TlsAcceptor {
                        rustls: lameduck_tokio::TlsAcceptor::new(&tls),
                        goaway: Arc::clone(&goaway),
                        connections: settings.connections.clone(),
                    });
                    fn_service(move |io: TcpStream| Rc::clone(&acceptor).accept(io)).and_then(http)
                })?,
            };
        }
        Ok(builder.run())
    }
}

/// One accepted connection: h2c (the HTTP/2 preface) or HTTP/1, told apart by one peek.
async fn accept(
    io: TcpStream,
    goaway: Arc<GoawayBroadcast>,
) -> Result<(ConnectionIo, Protocol, Option<SocketAddr>), DispatchError> {
    let age = goaway.age_from_now();
    let mut start = [0; H2C_PREFACE_START.len()];
    io.peek(&mut start).await?;
    let peer = io.peer_addr().ok();
    Ok(if &start == H2C_PREFACE_START {
        let io = GoawayIo::new(io, goaway).with_age(age);
        (ConnectionIo::Http2(Box::new(io)), Protocol::Http2, peer)
    } else {
        let io = match age {
            None => ConnectionIo::Http1(io),
            Some(at) => {
                let aged = AgedIo::new(ConnectionIo::Http1(io), at, goaway);
                ConnectionIo::AgedHttp1(Box::new(aged))
            }
        };
        (io, Protocol::Http1, peer)
    })
}

/// The admission middleware's hook: a response that closes its connection makes an HTTP/2
/// connection say GOAWAY (HTTP/2 has no `Connection: close`).
pub(crate) fn request_goaway(conn_data: Option<&Rc<GoawayRequest>>) {
    if let Some(request) = conn_data {
        request.request();
    }
}
