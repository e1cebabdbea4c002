//! The stop broadcast every h2c connection of a listener listens to, and the request a
//! response makes to close its own connection: what tells a [`GoawayIo`](super::GoawayIo)
//! when to say GOAWAY.

use crate::connection::LifecycleRef;
use event_listener::{Event, EventListener};
use lameduck::connection::SILENT_PEER_TIMEOUT;
use lameduck::{Shared, StdClock};
use lameduck_hyper::adapter::{spread_close_at, ConnectionBounds};
use lameduck_hyper::Runtime as _;
use lameduck_tokio::TokioRuntime;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Tells every HTTP/2 connection of a server to say GOAWAY: set once, when the listener
/// stops. Each connection registers for it once, on its first read.
#[derive(Debug, Default)]
pub struct GoawayBroadcast {
    set: AtomicBool,
    event: Event,
    /// When it was announced: the start of the idle-close window.
    announced_at: OnceLock<Instant>,
    /// The lifecycle whose configuration says how long a connection waits after the
    /// announcement ([`GoawayBroadcast::for_lifecycle`]); none: no wait.
    lifecycle: Option<LifecycleRef>,
    /// Where the connections register their bounds for the exit, once the server runs.
    bounds: OnceLock<ConnectionBounds>,
    /// The live connections registered there (the exit counts the others itself).
    registered: AtomicUsize,
    /// Connections the forced stop counted as cut already (the exit does not again).
    counted_by_stop: AtomicUsize,
}

impl GoawayBroadcast {
    /// A broadcast after which each connection of the lifecycle (`shared`, on `clock`'s
    /// timeline) ends when the lifecycle says ([`spread_close_at`]): an idle HTTP/1 connection
    /// is kept for the request its client may be sending when the sockets outlive the process,
    /// and, with the [idle-close spread](lameduck::Config::idle_close_spread), every connection
    /// ends at its own random point of the window that starts at the announcement.
    /// [`GoawayBroadcast::default`]: every connection ends at the announcement.
    #[must_use]
    pub fn for_lifecycle(shared: Arc<Shared>, clock: StdClock) -> Self {
        GoawayBroadcast {
            lifecycle: Some((shared, clock)),
            ..GoawayBroadcast::default()
        }
    }

    /// Every connection of the server says GOAWAY (those not yet open too).
    pub fn announce(&self) {
        let _ = self.announced_at.set(TokioRuntime.now());
        if !self.set.swap(true, Ordering::AcqRel) {
            self.event.notify(usize::MAX);
        }
    }

    /// When a connection that sees the announcement now ends (HTTP/1: closed, HTTP/2:
    /// GOAWAY), if later than now: `waits` as [`spread_close_at`]'s.
    pub(crate) fn close_at(&self, waits: Option<bool>) -> Option<Instant> {
        let (shared, clock) = self.lifecycle.as_ref()?;
        let now = TokioRuntime.now();
        let at = clock.instant(now);
        let start = self.announced_at.get().map_or(at, |&t| clock.instant(t));
        let until = clock.to_std(spread_close_at(shared, waits, start, at));
        (until > now).then_some(until)
    }

    /// The end of the idle-close window, once announced with the spread on: no connection's
    /// point is later.
    pub(crate) fn window_end(&self) -> Option<Instant> {
        let (shared, _) = self.lifecycle.as_ref()?;
        let spread = shared.config().idle_close_spread();
        let announced = *self.announced_at.get()?;
        (!spread.is_zero()).then(|| announced + spread)
    }

    /// When the broadcast was announced, once it was.
    pub(crate) fn announced_at(&self) -> Option<Instant> {
        self.announced_at.get().copied()
    }

    /// Where the server's connections register their bounds, so that the exit counts those
    /// it closes at their bound ([`ConnectionBounds`]); set once the server runs.
    pub(crate) fn set_bounds(&self, bounds: ConnectionBounds) {
        let _ = self.bounds.set(bounds);
    }

    /// See [`GoawayBroadcast::set_bounds`].
    pub(crate) fn bounds(&self) -> Option<&ConnectionBounds> {
        self.bounds.get()
    }

    /// A connection registered its bound (`true`) or, registered, ended (`false`).
    pub(crate) fn count_registered(&self, live: bool) {
        if live {
            self.registered.fetch_add(1, Ordering::AcqRel);
        } else {
            self.registered.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The live connections the exit would close unregistered, not yet counted as cut by
    /// the forced stop, of `live` in all.
    pub(crate) fn open_at_exit(&self, live: usize) -> usize {
        live.saturating_sub(self.registered.load(Ordering::Acquire))
            .saturating_sub(self.counted_by_stop.load(Ordering::Acquire))
    }

    /// The forced stop counted `n` connections as cut.
    pub(crate) fn counted_by_stop(&self, n: usize) {
        self.counted_by_stop.fetch_add(n, Ordering::AcqRel);
    }

    /// The lifecycle and its clock, for a broadcast [for a lifecycle](Self::for_lifecycle).
    pub(crate) fn lifecycle(&self) -> Option<&LifecycleRef> {
        self.lifecycle.as_ref()
    }

    /// When a TLS handshake still running at the announcement is cut:
    /// [`SILENT_PEER_TIMEOUT`] after the server stopped accepting (the lifecycle's stop,
    /// [`Shared::idle_close_window_start`]), not at the handshake timeout. `None` without a
    /// lifecycle, or before the announcement.
    pub(crate) fn handshake_cut_at(&self) -> Option<Instant> {
        let (shared, clock) = self.lifecycle.as_ref()?;
        let announced = *self.announced_at.get()?;
        let stop = shared.idle_close_window_start(clock.instant(announced));
        Some(clock.to_std(stop) + SILENT_PEER_TIMEOUT)
    }

    /// The maximum age of a connection of this server accepted now
    /// ([`lameduck::Config::max_connection_age`]): when it reaches it; `None` without a
    /// lifecycle or an age (then the clock is not read).
    pub(crate) fn age_from_now(&self) -> Option<Instant> {
        let (shared, _) = self.lifecycle.as_ref()?;
        crate::connection::age_from_now(shared)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Whether the broadcast is set; if not, registers `cx`'s waker through `listener`.
    pub(crate) fn poll_register(
        &self,
        listener: &mut Option<EventListener>,
        cx: &mut Context<'_>,
    ) -> bool {
        if self.is_set() {
            return true;
        }
        let mut l = self.event.listen();
        if self.is_set() || Pin::new(&mut l).poll(cx).is_ready() {
            return true;
        }
        *listener = Some(l);
        self.is_set()
    }
}

/// Resolves once the broadcast is set ([`GoawayBroadcast::announce`], called when the server's
/// graceful stop begins): the graceful-stop signal of every connection, HTTP/1 ones too.
/// actix-http polls it each time it polls the connection, on every request, so waiting costs
/// an atomic load and a waker comparison; the listener is polled again only for a new waker.
#[derive(Debug)]
pub(crate) struct Announced {
    broadcast: std::sync::Arc<GoawayBroadcast>,
    listener: Option<EventListener>,
    // The waker `listener` holds.
    waker: Option<Waker>,
}

impl Announced {
    pub(crate) fn new(broadcast: std::sync::Arc<GoawayBroadcast>) -> Self {
        Announced {
            broadcast,
            listener: None,
            waker: None,
        }
    }
}

impl Future for Announced {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.broadcast.is_set() {
            return Poll::Ready(());
        }
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            // Registered with this waker: the announcement wakes it.
            return Poll::Pending;
        }
        let this = &mut *self;
        let registered = match this.listener.as_mut() {
            Some(listener) => Pin::new(listener).poll(cx).is_ready(),
            None => this.broadcast.poll_register(&mut this.listener, cx),
        };
        if registered || this.broadcast.is_set() {
            return Poll::Ready(());
        }
        this.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// One HTTP/2 connection's own request for GOAWAY, in its connection data: the admission
/// middleware calls [`GoawayRequest::request`] when a response on it asks to close the
/// connection. HTTP/1 connections have none.
#[derive(Default)]
pub struct GoawayRequest {
    requested: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl std::fmt::Debug for GoawayRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoawayRequest")
            .field("requested", &self.requested.get())
            .finish_non_exhaustive()
    }
}

impl GoawayRequest {
    /// The connection says GOAWAY at its next frame boundary.
    pub fn request(&self) {
        if !self.requested.replace(true) {
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }

    /// Whether the GOAWAY was asked for.
    pub(crate) fn is_requested(&self) -> bool {
        self.requested.get()
    }

    /// Wakes no one when the GOAWAY is asked for from now on.
    pub(crate) fn unregister(&self) {
        self.waker.take();
    }

    /// Wakes `waker` when the GOAWAY is asked for.
    pub(crate) fn register(&self, waker: &Waker) {
        let current = self.waker.take();
        let keep = current.filter(|w| w.will_wake(waker));
        self.waker.set(Some(keep.unwrap_or_else(|| waker.clone())));
    }
}
