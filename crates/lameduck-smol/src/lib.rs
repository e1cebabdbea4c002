//! [`lameduck`] on smol / async-io: kube-apiserver's graceful termination for hyper 1
//! services, from the same core and the same hyper glue as the tokio adapter.
//!
//! This crate supplies only smol's pieces: async-io's clock and timers, a spawner (smol's
//! global executor or your own multi-threaded [`async_executor::Executor`]), async-signal's
//! SIGTERM/SIGINT/SIGUSR2, and async-net listeners. Everything else is [`lameduck_hyper`].
//!
//! [`async_executor::Executor`]: https://docs.rs/async-executor/1/async_executor/struct.Executor.html
//!
//! ```no_run
//! use std::convert::Infallible;
//! use lameduck::Config;
//! use tower::service_fn;
//!
//! smol::block_on(async {
//!     let mut server = lameduck_smol::builder(Config::default()).prepare();
//!     let service = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!         Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("ok"))))
//!     });
//!     let listener = lameduck_smol::bind("127.0.0.1:8080".parse().unwrap()).await.unwrap();
//!     server.serve("api", listener, service).unwrap();
//!     std::process::exit(server.run().await.unwrap().into());
//! })
//! ```
//!
//! Over TLS, load the certificate and key once ([`ServerTls`], which reads them again when
//! they change) and serve with `server.serve_tls("api", listener, TlsAcceptor::new(&tls),
//! service)` ([`TlsAcceptor`], on futures-rustls): each handshake runs in its connection's own
//! task, bounded by the handshake timeout, and ALPN picks HTTP/2 or HTTP/1.1.
//!
//! # Features
//!
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
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use async_executor::Executor;
use async_io::Timer;
use async_net::{TcpListener, TcpStream};
use async_signal::{Signal, Signals};
use futures_util::Stream;
use lameduck::Config;
use lameduck_hyper::{Listener, OsSignal, Runtime};
use smol_hyper::rt::{FuturesIo, SmolTimer};

mod tls;
pub mod websocket;

pub use lameduck_tls::{ServerTls, TlsError};
pub use tls::{SmolRustls, TlsAcceptor};

/// Server-Sent Events at shutdown: events until the stream's turn, then a `retry:` hint.
pub use lameduck_hyper::sse;
pub use lameduck_hyper::{
    take_upgrade_ticket, AdmissionLayer, Builder, Handle, HealthService, Hook, HttpService,
    ListenerContext, ServeError, Server, ShutdownNotice,
};

/// Starts configuring a server whose tasks run on smol's global executor.
#[must_use]
pub fn builder(config: Config) -> Builder<SmolRuntime> {
    Builder::new(config, SmolRuntime::global())
}

/// Starts configuring a server whose tasks run on `executor`.
#[must_use]
pub fn builder_on(config: Config, executor: Arc<Executor<'static>>) -> Builder<SmolRuntime> {
    Builder::new(config, SmolRuntime::with_executor(executor))
}

/// Binds a TCP listener on `addr`, for [`Server::serve`].
pub async fn bind(addr: SocketAddr) -> io::Result<SmolListener> {
    Ok(SmolListener(TcpListener::bind(addr).await?))
}

/// An async-net TCP listener for [`Server::serve`].
#[derive(Debug)]
pub struct SmolListener(pub TcpListener);

impl Listener for SmolListener {
    type Io = FuturesIo<TcpStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        let (stream, peer) = self.0.accept().await?;
        // Small responses go out at once; Nagle would hold them behind delayed ACKs.
        let _ = stream.set_nodelay(true);
        Ok((FuturesIo::new(stream), peer))
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
pub fn from_std(listener: std::net::TcpListener) -> io::Result<SmolListener> {
    Ok(SmolListener(TcpListener::try_from(listener)?))
}

/// The smol runtime seam. Tasks go to smol's global executor, or to an executor of yours
/// (run it on as many threads as you like).
#[derive(Clone, Default)]
pub struct SmolRuntime {
    executor: Option<Arc<Executor<'static>>>,
}

impl std::fmt::Debug for SmolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmolRuntime")
            .field("own_executor", &self.executor.is_some())
            .finish()
    }
}

impl SmolRuntime {
    /// Spawns onto smol's global executor (`smol::spawn`).
    #[must_use]
    pub fn global() -> Self {
        SmolRuntime { executor: None }
    }

    /// Spawns onto `executor`.
    #[must_use]
    pub fn with_executor(executor: Arc<Executor<'static>>) -> Self {
        SmolRuntime {
            executor: Some(executor),
        }
    }
}

/// async-io's timer as a `()` future.
#[derive(Debug)]
pub struct SmolSleep(Timer);

impl Future for SmolSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl Runtime for SmolRuntime {
    type Sleep = SmolSleep;
    type HyperTimer = SmolTimer;
    type OsSignals = SmolOsSignals;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> SmolSleep {
        SmolSleep(Timer::at(deadline))
    }

    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match &self.executor {
            Some(ex) => ex.spawn(future).detach(),
            None => smol::spawn(future).detach(),
        }
    }

    fn hyper_timer(&self) -> SmolTimer {
        SmolTimer::new()
    }

    fn os_signals(&self) -> io::Result<SmolOsSignals> {
        Ok(SmolOsSignals(Signals::new([
            Signal::Term,
            Signal::Int,
            Signal::Usr2,
        ])?))
    }
}

/// SIGTERM, SIGINT and SIGUSR2 from async-signal.
#[derive(Debug)]
pub struct SmolOsSignals(Signals);

impl Stream for SmolOsSignals {
    type Item = OsSignal;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OsSignal>> {
        loop {
            return match Pin::new(&mut self.0).poll_next(cx) {
                Poll::Ready(Some(Ok(Signal::Term))) => Poll::Ready(Some(OsSignal::Terminate)),
                Poll::Ready(Some(Ok(Signal::Int))) => Poll::Ready(Some(OsSignal::Interrupt)),
                Poll::Ready(Some(Ok(Signal::Usr2))) => Poll::Ready(Some(OsSignal::HandOver)),
                // Other signals are not registered; errors are transient reads.
                Poll::Ready(Some(_)) => continue,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}
