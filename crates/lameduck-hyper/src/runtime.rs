//! The seam to an async runtime: one small trait for time, spawning and OS signals, and one
//! for listeners. Adapter crates implement them; everything else in this crate is written
//! once against them.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Instant;

use futures_util::Stream;

/// An OS signal the driver acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OsSignal {
    /// SIGTERM: terminate gracefully.
    Terminate,
    /// SIGINT: terminate gracefully.
    Interrupt,
    /// SIGUSR2: hand the listening sockets to a successor, then terminate gracefully
    /// (see [`crate::sockets::hand_over`]).
    HandOver,
}

impl OsSignal {
    /// The signal's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            OsSignal::Terminate => "SIGTERM",
            OsSignal::Interrupt => "SIGINT",
            OsSignal::HandOver => "SIGUSR2",
        }
    }
}

/// What lameduck needs from an async runtime.
///
/// `now` and `sleep_until` must read the same clock (tokio's, so that paused-time tests
/// work; async-io's on smol).
pub trait Runtime: Clone + Send + Sync + 'static {
    /// The runtime's sleep future.
    type Sleep: Future<Output = ()> + Send + 'static;
    /// The runtime's timer for hyper (header read timeouts, HTTP/2 keep-alive).
    type HyperTimer: hyper::rt::Timer + Clone + Send + Sync + 'static;
    /// A stream of SIGTERM, SIGINT and SIGUSR2 deliveries.
    type OsSignals: Stream<Item = OsSignal> + Send + Unpin + 'static;

    /// The current time on the runtime's clock.
    fn now(&self) -> Instant;
    /// Sleeps until `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;
    /// Runs `future` in the background.
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static;
    /// hyper's timer.
    fn hyper_timer(&self) -> Self::HyperTimer;
    /// Starts listening for SIGTERM, SIGINT and SIGUSR2.
    fn os_signals(&self) -> io::Result<Self::OsSignals>;
}

/// A listening socket.
pub trait Listener: Send + 'static {
    /// A connection.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// Accepts the next connection.
    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Io, SocketAddr)>> + Send;

    /// The bound address.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// The listening socket, so that a hand-over can pass it to a successor process
    /// (`None`, the default: this listener is not handed over).
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// hyper's executor over a [`Runtime`].
#[derive(Clone, Debug)]
pub struct Exec<R>(pub R);

/// For the futures a hyper server spawns (its HTTP/2 streams), which return nothing: each is
/// handed to the runtime as it is, with no wrapper future of ours to move it into first.
impl<R, F> hyper::rt::Executor<F> for Exec<R>
where
    R: Runtime,
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn(future);
    }
}

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
