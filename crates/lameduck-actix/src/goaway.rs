//! GOAWAY for actix's HTTP/2 connections, which actix-http never sends itself: an I/O wrapper
//! around each h2c connection that watches the frames in both directions and writes the
//! GOAWAY between two of the server's own frames, as h2's graceful shutdown would.
//!
//! Like h2 (and Go), in two steps: first GOAWAY with the highest stream id and a PING, so
//! that the client stops opening streams and no stream it has opened meanwhile is refused;
//! once the client acknowledges the PING, every stream it opened has been read, and the final
//! GOAWAY names the highest of them. actix's h2 state machine is not involved: it serves the
//! streams it reads, and the client, not the server, stops opening new ones. Once its streams
//! are done the client closes the connection.
//!
//! A connection says GOAWAY when the listener stops (the lifecycle's stop broadcast, in
//! close-listener mode at `NotAcceptingNewRequest`) or when one of its responses asks to close
//! it (retry-after mode's 429s: `Connection: close`, which HTTP/2 does not have). With the
//! idle-close spread ([`lameduck::Config::idle_close_spread`]) the stop broadcast makes each
//! connection say it at its own random point of the window instead, measured from the
//! broadcast; a response that asks to close the connection still makes it say GOAWAY at once.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll, Waker};
use std::time::Instant;

use event_listener::{Event, EventListener};
use lameduck::{Shared, StdClock};
use lameduck_hyper::Runtime as _;
use lameduck_tokio::TokioRuntime;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use lameduck_hyper::h2_frames::{
    goaway_frame, goaway_ping_frame, IncomingFrames, OutgoingFrames, CONTROL_FRAME_LEN,
    MAX_STREAM_ID,
};

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
    lifecycle: Option<(Arc<Shared>, StdClock)>,
}

impl GoawayBroadcast {
    /// A broadcast after which each connection of the lifecycle (`shared`, on `clock`'s
    /// timeline) ends when the lifecycle says ([`lameduck_hyper::spread_close_at`]): an idle
    /// HTTP/1 connection is kept for the request its client may be sending when the sockets
    /// outlive the process, and, with the [idle-close
    /// spread](lameduck::Config::idle_close_spread), every connection ends at its own random
    /// point of the window that starts at the announcement. [`GoawayBroadcast::default`]:
    /// every connection ends at the announcement.
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
    /// GOAWAY), if later than now: `waits` as [`lameduck_hyper::spread_close_at`]'s.
    pub(crate) fn close_at(&self, waits: Option<bool>) -> Option<Instant> {
        let (shared, clock) = self.lifecycle.as_ref()?;
        let now = TokioRuntime.now();
        let at = clock.instant(now);
        let start = self.announced_at.get().map_or(at, |&t| clock.instant(t));
        let until = clock.to_std(lameduck_hyper::spread_close_at(shared, waits, start, at));
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

    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Whether the broadcast is set; if not, registers `cx`'s waker through `listener`.
    fn poll_register(&self, listener: &mut Option<EventListener>, cx: &mut Context<'_>) -> bool {
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

    fn register(&self, waker: &Waker) {
        let current = self.waker.take();
        let keep = current.filter(|w| w.will_wake(waker));
        self.waker.set(Some(keep.unwrap_or_else(|| waker.clone())));
    }
}

/// Where the GOAWAY of a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nobody asked for it yet.
    Serving,
    /// The broadcast came: waiting for the connection's point in the idle-close window.
    Spreading,
    /// The first GOAWAY and its PING wait for a frame boundary.
    AnnounceDue,
    /// Sent; waiting for the client to acknowledge the PING.
    AwaitingAck,
    /// The final GOAWAY waits for a frame boundary.
    FinalDue,
    /// Both sent.
    Done,
}

/// An h2c connection's I/O, watched for frame boundaries so that GOAWAY can be written in
/// between the server's frames; every other byte passes through unchanged.
#[derive(Debug)]
pub struct GoawayIo<T> {
    inner: T,
    incoming: IncomingFrames,
    outgoing: OutgoingFrames,
    request: Rc<GoawayRequest>,
    broadcast: std::sync::Arc<GoawayBroadcast>,
    listener: Option<EventListener>,
    registered: bool,
    phase: Phase,
    /// Until the connection's point in the idle-close window ([`Phase::Spreading`]).
    spread_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Inserted bytes not yet written: written before any more of the server's bytes.
    pending: [u8; 2 * CONTROL_FRAME_LEN],
    pending_start: usize,
    pending_end: usize,
}

impl<T> GoawayIo<T> {
    /// Wraps the I/O of an h2c connection (whose first bytes from the client are the
    /// preface), saying GOAWAY when `broadcast` is announced or the connection's own request
    /// ([`GoawayIo::request`]) is made.
    pub fn new(inner: T, broadcast: std::sync::Arc<GoawayBroadcast>) -> Self {
        GoawayIo {
            inner,
            incoming: IncomingFrames::default(),
            outgoing: OutgoingFrames::default(),
            request: Rc::new(GoawayRequest::default()),
            broadcast,
            listener: None,
            registered: false,
            phase: Phase::Serving,
            spread_timer: None,
            pending: [0; 2 * CONTROL_FRAME_LEN],
            pending_start: 0,
            pending_end: 0,
        }
    }

    /// This connection's own GOAWAY request, for its connection data.
    pub fn request(&self) -> &Rc<GoawayRequest> {
        &self.request
    }

    /// The wrapped I/O.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped I/O, mutably (bytes written or read through it directly are not watched).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Moves the phase on from what is known now: a request or the broadcast, the PING's
    /// acknowledgement. Registers `cx` for both the first time.
    fn update_phase(&mut self, cx: &mut Context<'_>) {
        if self.phase == Phase::Serving {
            self.request.register(cx.waker());
            let broadcast = if self.registered {
                self.broadcast.is_set()
            } else {
                self.registered = true;
                self.broadcast.poll_register(&mut self.listener, cx)
            };
            if self.request.requested.get() {
                self.phase = Phase::AnnounceDue;
            } else if broadcast {
                // At once, or at the connection's point in the idle-close window.
                self.phase = match self.broadcast.close_at(None) {
                    Some(until) => {
                        self.spread_timer = Some(Box::pin(tokio::time::sleep_until(until.into())));
                        Phase::Spreading
                    }
                    None => Phase::AnnounceDue,
                };
            }
            if self.phase != Phase::Serving {
                self.listener = None;
            }
        }
        if self.phase == Phase::Spreading {
            // A response that asks to close the connection cuts the wait short.
            self.request.register(cx.waker());
            let due = self
                .spread_timer
                .as_mut()
                .is_none_or(|timer| timer.as_mut().poll(cx).is_ready());
            if due || self.request.requested.get() {
                self.phase = Phase::AnnounceDue;
                self.spread_timer = None;
            }
        }
        if !matches!(self.phase, Phase::Serving | Phase::Spreading) {
            self.request.waker.take();
        }
        if self.phase == Phase::AwaitingAck && self.incoming.goaway_ping_acked() {
            self.phase = Phase::FinalDue;
        }
    }

    fn insertion_due(&self) -> bool {
        matches!(self.phase, Phase::AnnounceDue | Phase::FinalDue)
    }

    fn queue(&mut self, frames: &[[u8; CONTROL_FRAME_LEN]]) {
        let mut end = 0;
        for frame in frames {
            self.pending[end..end + CONTROL_FRAME_LEN].copy_from_slice(frame);
            end += CONTROL_FRAME_LEN;
        }
        (self.pending_start, self.pending_end) = (0, end);
    }
}

impl<T: AsyncWrite + Unpin> GoawayIo<T> {
    /// Writes what is inserted: queued frames first, then a due GOAWAY if the server's output
    /// is at a frame boundary. Ready once nothing inserted is left to write now.
    fn poll_insert(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            while self.pending_start < self.pending_end {
                let bytes = &self.pending[self.pending_start..self.pending_end];
                match ready!(Pin::new(&mut self.inner).poll_write(cx, bytes))? {
                    0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    n => self.pending_start += n,
                }
            }
            if !self.insertion_due() || !self.outgoing.at_boundary() {
                return Poll::Ready(Ok(()));
            }
            if self.phase == Phase::AnnounceDue {
                self.queue(&[goaway_frame(MAX_STREAM_ID), goaway_ping_frame()]);
                self.phase = Phase::AwaitingAck;
                tracing::debug!("h2 connection: GOAWAY announced, PING sent");
            } else {
                let last = self.incoming.highest_stream_id();
                self.queue(&[goaway_frame(last)]);
                self.phase = Phase::Done;
                tracing::debug!(last_stream_id = last, "h2 connection: final GOAWAY");
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for GoawayIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.update_phase(cx);
        // An idle connection is woken here: write what is due (not waiting for the socket
        // to take it; the next read or write goes on).
        if let Poll::Ready(Err(e)) = this.poll_insert(cx) {
            return Poll::Ready(Err(e));
        }
        loop {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let read = buf.filled().len() - before;
            let Some(ack) = this.incoming.read(&buf.filled()[before..]) else {
                break;
            };
            // The acknowledgement of the GOAWAY's PING is left out when it came whole: h2
            // never sent that PING, and would log the stray acknowledgement.
            let (start, end) = (before + ack.start, before + ack.end);
            let filled = buf.filled().len();
            buf.filled_mut().copy_within(end..filled, start);
            buf.set_filled(filled - (end - start));
            if buf.filled().len() > before || read == 0 {
                break;
            }
            // Nothing else came with it: read on (no bytes would mean the end of the stream).
        }
        if this.phase == Phase::AwaitingAck && this.incoming.goaway_ping_acked() {
            this.phase = Phase::FinalDue;
            if let Poll::Ready(Err(e)) = this.poll_insert(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for GoawayIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.update_phase(cx);
        ready!(this.poll_insert(cx))?;
        // With a GOAWAY due, the write stops at the end of the current frame (or of its
        // header, which tells where the frame ends); the GOAWAY goes out before the rest.
        let allowed = if this.insertion_due() {
            buf.len().min(this.outgoing.bytes_to_next_boundary())
        } else {
            buf.len()
        };
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..allowed]))?;
        this.outgoing.wrote(&buf[..written]);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.update_phase(cx);
        ready!(this.poll_insert(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // What was inserted is written first; nothing new is started.
        if this.pending_start < this.pending_end {
            ready!(this.poll_insert(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn announced_waits_registers_once_per_waker_and_wakes_at_the_announcement() {
        let broadcast = Arc::new(GoawayBroadcast::default());
        let mut announced = Announced::new(Arc::clone(&broadcast));
        let (first, second) = (
            Arc::new(CountingWaker::default()),
            Arc::new(CountingWaker::default()),
        );
        let first_waker = Waker::from(Arc::clone(&first));
        let mut cx = Context::from_waker(&first_waker);
        for _ in 0..3 {
            assert!(Pin::new(&mut announced).poll(&mut cx).is_pending());
        }
        // A new waker registers anew; the announcement wakes the one registered last.
        let second_waker = Waker::from(Arc::clone(&second));
        let mut cx2 = Context::from_waker(&second_waker);
        assert!(Pin::new(&mut announced).poll(&mut cx2).is_pending());
        broadcast.announce();
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert!(Pin::new(&mut announced).poll(&mut cx2).is_ready());
        // Created after the announcement: ready at once.
        let mut late = Announced::new(broadcast);
        assert!(Pin::new(&mut late).poll(&mut cx).is_ready());
    }
}
