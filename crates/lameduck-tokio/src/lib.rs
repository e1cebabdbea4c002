//! [`lameduck`] on tokio + hyper: kube-apiserver's graceful termination for any hyper 1 or
//! axum service, in a few lines.
//!
//! ```no_run
//! use std::convert::Infallible;
//! use lameduck::Config;
//! use tower::ServiceBuilder;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = lameduck_tokio::builder(Config::default());
//! builder.pre_shutdown_hook("deregister", || async { Ok::<_, Infallible>(()) })?;
//! let mut server = builder.prepare();
//! let service = ServiceBuilder::new()
//!     .layer(server.layer())
//!     .service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!         Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("ok"))))
//!     });
//! let listener = lameduck_tokio::bind("127.0.0.1:8080".parse()?).await?;
//! server.serve("api", listener, service)?;
//! let code = server.run().await?;
//! std::process::exit(code.into());
//! # }
//! ```
//!
//! Time comes from tokio's clock, so tests with paused time (`tokio::time::pause`) drive the
//! whole lifecycle deterministically.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::Stream;
use hyper_util::rt::{TokioIo, TokioTimer};
use lameduck_hyper::{OsSignal, Runtime};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, Signal, SignalKind};

pub use lameduck_hyper::{take_upgrade_ticket, AdmissionLayer, Handle, ServeError, ShutdownSignal};

/// The tokio runtime seam: tokio's clock, `tokio::spawn`, tokio signals and hyper-util's
/// `TokioTimer`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioRuntime;

impl Runtime for TokioRuntime {
    type Sleep = tokio::time::Sleep;
    type HyperTimer = TokioTimer;
    type Signals = TokioSignals;

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

    fn signals(&self) -> io::Result<TokioSignals> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "signal handlers must be installed inside a tokio runtime",
            ));
        }
        Ok(TokioSignals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }
}

/// SIGTERM and SIGINT as one stream.
#[derive(Debug)]
pub struct TokioSignals {
    terminate: Signal,
    interrupt: Signal,
}

impl Stream for TokioSignals {
    type Item = OsSignal;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OsSignal>> {
        if let Poll::Ready(Some(())) = self.terminate.poll_recv(cx) {
            return Poll::Ready(Some(OsSignal::Terminate));
        }
        if let Poll::Ready(Some(())) = self.interrupt.poll_recv(cx) {
            return Poll::Ready(Some(OsSignal::Interrupt));
        }
        Poll::Pending
    }
}

lameduck_hyper::adapter_items! {
    runtime: TokioRuntime = TokioRuntime,
    listener: TokioListener(TcpListener),
    io: TokioIo<TcpStream> = TokioIo::new,
}
