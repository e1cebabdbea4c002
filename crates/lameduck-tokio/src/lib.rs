//! [`lameduck`] on tokio + hyper: kube-apiserver's graceful termination for any hyper 1 or
//! axum service, in a few lines.
//!
//! ```no_run
//! use std::convert::Infallible;
//! use lameduck::Config;
//! use tower::service_fn;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = lameduck_tokio::builder(Config::default());
//! builder.pre_shutdown_hook("deregister", || async { Ok::<_, Infallible>(()) })?;
//! let mut server = builder.prepare();
//! let service = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("ok"))))
//! });
//! // The server admits every request: health endpoints, 503/429, the request timeout.
//! let listener = lameduck_tokio::bind("127.0.0.1:8080".parse()?).await?;
//! server.serve("api", listener, service)?;
//! let code = server.run().await?;
//! std::process::exit(code.into());
//! # }
//! ```
//!
//! Over TLS (the `tls` feature, on by default), load the certificate and key once ([`ServerTls`], which reads them again when
//! they change) and serve with a [`TlsAcceptor`]: each handshake runs in its connection's own
//! task, bounded by the handshake timeout, and ALPN picks HTTP/2 or HTTP/1.1.
//!
//! ```no_run
//! # #[cfg(feature = "tls")]
//! # async fn run(mut server: lameduck_tokio::Server<lameduck_tokio::TokioRuntime>,
//! #     service: tower::util::BoxCloneService<http::Request<hyper::body::Incoming>,
//! #         http::Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible>)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let tls = lameduck_tokio::ServerTls::from_files("/etc/tls/tls.crt", "/etc/tls/tls.key")?;
//! let listener = lameduck_tokio::bind("0.0.0.0:8443".parse()?).await?;
//! server.serve_tls("api", listener, lameduck_tokio::TlsAcceptor::new(&tls), service)?;
//! # Ok(()) }
//! ```
//!
//! Time comes from tokio's clock, so tests with paused time (`tokio::time::pause`) drive the
//! whole lifecycle deterministically.
//!
//! # Features
//!
//! * `tls` (on by default): [`TlsAcceptor`] and [`ServerTls`], with rustls and its ring
//!   provider (see `lameduck-tls`). Turn default features off to build without them, and
//!   without ring's C code.
//! * `metrics`: records the lifecycle's series (phase, requests in flight, rejections by
//!   reason, signal times, drain durations, hook outcomes) through the `metrics` facade at
//!   lifecycle events, never per request; call `lameduck::metrics::record_state` in your
//!   `/metrics` handler before the exporter renders. Without it nothing of `metrics` is built.
//!
//! Every step of a termination is logged through `tracing` (install a subscriber, such as
//! `tracing_subscriber::fmt()`, to see it), ending with a one-line termination summary.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::Stream;
use hyper_util::rt::{TokioIo, TokioTimer};
use lameduck::Config;
use lameduck_hyper::{Listener, OsSignal, Runtime};
use signal_hook::low_level::{pipe, unregister};
use signal_hook::SigId;
use tokio::net::{TcpListener, TcpStream, UnixStream};

#[cfg(feature = "tls")]
mod tls;
pub mod websocket;

#[cfg(feature = "tls")]
pub use lameduck_tls::{ServerTls, TlsError};
#[cfg(feature = "tls")]
pub use tls::{TlsAcceptor, TokioRustls};

/// Server-Sent Events at shutdown: events until the stream's turn, then a `retry:` hint.
pub use lameduck_hyper::sse;
pub use lameduck_hyper::{
    take_upgrade_ticket, AdmissionLayer, Builder, Handle, HealthService, Hook, HttpService,
    ListenerContext, ServeError, Server, ShutdownNotice,
};

/// Starts configuring a server on tokio.
#[must_use]
pub fn builder(config: Config) -> Builder<TokioRuntime> {
    Builder::new(config, TokioRuntime)
}

/// Binds a TCP listener on `addr`, for [`Server::serve`].
pub async fn bind(addr: SocketAddr) -> io::Result<TokioListener> {
    Ok(TokioListener(TcpListener::bind(addr).await?))
}

/// A tokio TCP listener for [`Server::serve`].
#[derive(Debug)]
pub struct TokioListener(pub TcpListener);

impl Listener for TokioListener {
    type Io = TokioIo<TcpStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        let (stream, peer) = self.0.accept().await?;
        // Small responses go out at once; Nagle would hold them behind delayed ACKs.
        let _ = stream.set_nodelay(true);
        Ok((TokioIo::new(stream), peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.0))
    }
}

/// A listener for [`Server::serve`] from a listening socket opened elsewhere: inherited
/// from systemd or a predecessor ([`lameduck_hyper::sockets`]), or bound by your own code.
/// Call it inside the runtime.
pub fn from_std(listener: std::net::TcpListener) -> io::Result<TokioListener> {
    listener.set_nonblocking(true)?;
    Ok(TokioListener(TcpListener::from_std(listener)?))
}

/// The tokio runtime seam: tokio's clock, `tokio::spawn`, tokio signals and hyper-util's
/// `TokioTimer`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioRuntime;

impl Runtime for TokioRuntime {
    type Sleep = tokio::time::Sleep;
    type HyperTimer = TokioTimer;
    type OsSignals = TokioOsSignals;

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline.into())
    }

    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(future);
    }

    fn hyper_timer(&self) -> TokioTimer {
        TokioTimer::new()
    }

    fn os_signals(&self) -> io::Result<TokioOsSignals> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "signal handlers must be installed inside a tokio runtime",
            ));
        }
        Ok(TokioOsSignals {
            pipes: [
                SignalPipe::register(OsSignal::Terminate, signal_hook::consts::SIGTERM)?,
                SignalPipe::register(OsSignal::Interrupt, signal_hook::consts::SIGINT)?,
                SignalPipe::register(OsSignal::HandOver, signal_hook::consts::SIGUSR2)?,
            ],
        })
    }
}

/// SIGTERM, SIGINT and SIGUSR2 as one stream, one item per delivery.
///
/// tokio's own `tokio::signal` merges deliveries that arrive before it is polled, so two
/// quick SIGTERMs (or two sent before the server runs) would count as one; the second must
/// force the exit. Here each delivery writes one byte into a socket pair (signal-hook's
/// self-pipe), read one byte at a time.
#[derive(Debug)]
pub struct TokioOsSignals {
    pipes: [SignalPipe; 3],
}

/// The read end of one signal's self-pipe; unregisters the handler when dropped.
#[derive(Debug)]
struct SignalPipe {
    signal: OsSignal,
    read: UnixStream,
    id: SigId,
}

impl SignalPipe {
    fn register(signal: OsSignal, number: i32) -> io::Result<Self> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        let read = UnixStream::from_std(read)?;
        let id = pipe::register(number, write)?;
        Ok(SignalPipe { signal, read, id })
    }

    /// One delivery, if a byte is waiting.
    fn poll_delivery(&self, cx: &mut Context<'_>) -> Poll<Option<OsSignal>> {
        loop {
            match self.read.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                Poll::Ready(Ok(())) => {}
            }
            match self.read.try_read(&mut [0u8; 1]) {
                Ok(1) => return Poll::Ready(Some(self.signal)),
                // The write end is gone: no more deliveries.
                Ok(_) => return Poll::Ready(None),
                // A spurious wake-up: readiness is cleared, poll again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Poll::Ready(None),
            }
        }
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        unregister(self.id);
    }
}

impl Stream for TokioOsSignals {
    type Item = OsSignal;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OsSignal>> {
        let mut open = false;
        for pipe in &self.pipes {
            match pipe.poll_delivery(cx) {
                Poll::Ready(Some(signal)) => return Poll::Ready(Some(signal)),
                Poll::Ready(None) => {}
                Poll::Pending => open = true,
            }
        }
        if open {
            Poll::Pending
        } else {
            Poll::Ready(None)
        }
    }
}
