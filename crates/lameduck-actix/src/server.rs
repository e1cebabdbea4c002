//! [`AutoH2cServer`]: actix-web over plain-text HTTP/1 and h2c, with the HTTP/2 connections
//! watched for GOAWAY (see the `goaway` module), built by lameduck because actix-web's own
//! `HttpServer` offers no way to wrap a connection's I/O.

use std::io;
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_http::body::{BoxBody, MessageBody};
use actix_http::error::DispatchError;
use actix_http::{Extensions, HttpService, KeepAlive, Protocol, Request, Response};
use actix_rt::net::TcpStream;
use actix_service::{
    fn_service, map_config, IntoServiceFactory, ServiceFactory, ServiceFactoryExt,
};
use actix_web::dev::AppConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::goaway::{GoawayBroadcast, GoawayIo, GoawayRequest};
use crate::serve::{ActixServer, ServeSetup};

/// The start of the HTTP/2 preface that marks an h2c (prior knowledge) connection, as actix
/// itself tells them apart: one peek at the connection's first bytes.
const H2C_PREFACE_START: &[u8; 12] = b"PRI * HTTP/2";

/// The I/O of one connection: the plain socket for HTTP/1 (passed through untouched), the
/// GOAWAY-watching wrapper for HTTP/2.
#[derive(Debug)]
pub enum ConnectionIo {
    /// An HTTP/1 connection.
    Http1(TcpStream),
    /// An h2c connection.
    Http2(Box<GoawayIo<TcpStream>>),
}

impl ConnectionIo {
    /// The socket.
    #[must_use]
    pub fn tcp_stream(&self) -> &TcpStream {
        match self {
            ConnectionIo::Http1(io) => io,
            ConnectionIo::Http2(io) => io.get_ref(),
        }
    }
}

impl AsyncRead for ConnectionIo {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_read(cx, buf),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnectionIo {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_write(cx, buf),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            ConnectionIo::Http1(io) => io.is_write_vectored(),
            ConnectionIo::Http2(io) => io.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_flush(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_shutdown(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_shutdown(cx),
        }
    }
}

/// The app's types, for inference only (`fn`: neither owned nor `!Send`).
type AppTypes<I, S, B> = fn() -> (I, S, B);

/// An actix-web server for plain-text HTTP/1 and h2c (HTTP/2 with prior knowledge) whose
/// HTTP/2 connections get GOAWAY when kube-apiserver's would, for [`serve`](crate::serve):
/// the same `App` factory as actix-web's `HttpServer::new`, a subset of its settings, and
/// `bind`/`listen` (both serve HTTP/1 and h2c, as actix's `bind_auto_h2c` does).
///
/// ```no_run
/// # use lameduck_actix::{Server, TokioRuntime};
/// # async fn f(mut server: Server<TokioRuntime>) -> Result<(), lameduck_actix::ActixServeError> {
/// let http = lameduck_actix::AutoH2cServer::new(|| actix_web::App::new());
/// lameduck_actix::serve(&mut server, "api", http, |http| http.workers(2).bind("127.0.0.1:8080"))?;
/// # Ok(()) }
/// ```
pub struct AutoH2cServer<F, I, S, B> {
    factory: F,
    listeners: Vec<(TcpListener, SocketAddr)>,
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
                &self.listeners.iter().map(|l| l.1).collect::<Vec<_>>(),
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
    pub fn listen(mut self, listener: TcpListener) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        self.listeners.push((listener, addr));
        Ok(self)
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
        self.listeners.iter().map(|l| l.1).collect()
    }

    fn listening_sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd as _;
        self.listeners.iter().map(|l| l.0.as_fd()).collect()
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
        let graceful = builder.graceful_shutdown_signal();
        let (keep_alive, request_timeout, disconnect_timeout) = (
            self.keep_alive,
            self.client_request_timeout,
            self.client_disconnect_timeout,
        );
        for (listener, addr) in self.listeners {
            let (factory, setup, graceful) =
                (self.factory.clone(), setup.clone(), graceful.clone());
            builder = builder.listen(format!("lameduck-actix-{addr}"), listener, move || {
                let (connections, graceful) = (setup.connections.clone(), graceful.clone());
                let app = factory().into_factory();
                let host = addr.to_string();
                let http = HttpService::<ConnectionIo, _, _>::build()
                    .graceful_shutdown_signal(move || {
                        let graceful = graceful.clone();
                        async move { graceful.notified().await }
                    })
                    .keep_alive(keep_alive)
                    .client_request_timeout(request_timeout)
                    .client_disconnect_timeout(disconnect_timeout)
                    .local_addr(addr)
                    .on_connect_ext(move |io: &ConnectionIo, data: &mut Extensions| {
                        // Dropped with the connection's data, when the connection ends.
                        data.insert(Rc::new(connections.open()));
                        if let ConnectionIo::Http2(io) = io {
                            data.insert(Rc::clone(io.request()));
                        }
                    })
                    .finish(map_config(app, move |()| {
                        // What actix-web's `HttpServer` gives its apps; actix-web has no
                        // other public constructor for it.
                        AppConfig::__priv_test_new(false, host.clone(), addr)
                    }));
                let goaway = Arc::clone(&setup.goaway);
                fn_service(move |io: TcpStream| accept(io, Arc::clone(&goaway))).and_then(http)
            })?;
        }
        Ok(builder.run())
    }
}

/// One accepted connection: h2c (the HTTP/2 preface) or HTTP/1, told apart by one peek.
async fn accept(
    io: TcpStream,
    goaway: Arc<GoawayBroadcast>,
) -> Result<(ConnectionIo, Protocol, Option<SocketAddr>), DispatchError> {
    let mut start = [0; H2C_PREFACE_START.len()];
    io.peek(&mut start).await?;
    let peer = io.peer_addr().ok();
    Ok(if &start == H2C_PREFACE_START {
        let io = GoawayIo::new(io, goaway);
        (ConnectionIo::Http2(Box::new(io)), Protocol::Http2, peer)
    } else {
        (ConnectionIo::Http1(io), Protocol::Http1, peer)
    })
}

/// The admission middleware's hook: a response that closes its connection makes an HTTP/2
/// connection say GOAWAY (HTTP/2 has no `Connection: close`).
pub(crate) fn request_goaway(conn_data: Option<&Rc<GoawayRequest>>) {
    if let Some(request) = conn_data {
        request.request();
    }
}
