//! [`GoawayIo`]: the I/O of an actix HTTP/2 connection, watched for frame boundaries so that
//! the GOAWAY frames can be written between two of the server's frames, and for the streams
//! the server has not ended; see the `goaway` module.

use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant as StdInstant;

use event_listener::EventListener;
use lameduck::connection::CutKind;
use lameduck_hyper::adapter::h2_frames::{
    goaway_frame, goaway_ping_frame, IncomingFrames, OpenStreams, OutgoingFrames,
    CONTROL_FRAME_LEN, MAX_STREAM_ID,
};
use lameduck_hyper::Runtime as _;
use lameduck_tokio::TokioRuntime;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::broadcast::{GoawayBroadcast, GoawayRequest};
use super::deadlines::{Deadlines, Due, Stage};

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

impl Phase {
    fn stage(self) -> Stage {
        match self {
            Phase::Serving => Stage::Serving,
            Phase::Spreading => Stage::Spreading,
            Phase::AnnounceDue | Phase::AwaitingAck => Stage::AwaitingAck,
            Phase::FinalDue | Phase::Done => Stage::Final,
        }
    }
}

/// The error every read and write of a connection cut at its bound returns, so that actix's
/// dispatcher drops (and so closes) the connection.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("HTTP/2 connection closed at its bound ({}): its peer did not end it", .0.name())]
pub struct ConnectionCut(pub CutKind);

impl From<ConnectionCut> for io::Error {
    fn from(cut: ConnectionCut) -> Self {
        io::Error::new(io::ErrorKind::ConnectionAborted, cut)
    }
}

/// An HTTP/2 connection's I/O, watched for frame boundaries so that GOAWAY can be written in
/// between the server's frames; every other byte passes through unchanged. With a lifecycle
/// ([`GoawayBroadcast::for_lifecycle`]), the connection is also bounded once it stopped
/// (peers cannot hold a termination: see [`serve`](crate::serve)): its final GOAWAY goes out
/// at most [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) after the
/// first, and it is cut at [`Shared::connection_bound`](lameduck::Shared::connection_bound),
/// every read and write failing with [`ConnectionCut`] from then on.
#[derive(Debug)]
pub struct GoawayIo<T> {
    inner: T,
    incoming: IncomingFrames,
    outgoing: OutgoingFrames,
    /// The streams the server has not ended.
    streams: OpenStreams,
    request: Rc<GoawayRequest>,
    broadcast: Arc<GoawayBroadcast>,
    listener: Option<EventListener>,
    registered: bool,
    /// Whether the connection stopped: the broadcast came or its own request was made.
    stopped: bool,
    phase: Phase,
    /// The timers, once there is one to keep (an age, or the stop), with a lifecycle.
    deadlines: Option<Box<Deadlines>>,
    /// Cut at its bound: every read and write fails from then on.
    cut: Option<CutKind>,
    /// It registered its bound with the exit.
    bound_registered: bool,
    /// Inserted bytes not yet written: written before any more of the server's bytes.
    pending: [u8; 2 * CONTROL_FRAME_LEN],
    pending_start: usize,
    pending_end: usize,
}

impl<T> Drop for GoawayIo<T> {
    fn drop(&mut self) {
        if self.bound_registered {
            if let Some(bounds) = self.broadcast.bounds() {
                bounds.set(self.registry_id(), None);
            }
            self.broadcast.count_registered(false);
        }
    }
}

impl<T> GoawayIo<T> {
    /// The connection's key in the exit's register of bounds: the address of its own
    /// GOAWAY request, unique while it lives.
    fn registry_id(&self) -> usize {
        Rc::as_ptr(&self.request) as usize
    }

    /// Wraps the I/O of an HTTP/2 connection (whose first bytes from the client are the
    /// preface), saying GOAWAY when `broadcast` is announced or the connection's own request
    /// ([`GoawayIo::request`]) is made.
    pub fn new(inner: T, broadcast: Arc<GoawayBroadcast>) -> Self {
        GoawayIo {
            inner,
            incoming: IncomingFrames::default(),
            outgoing: OutgoingFrames::default(),
            streams: OpenStreams::default(),
            request: Rc::new(GoawayRequest::default()),
            broadcast,
            listener: None,
            registered: false,
            stopped: false,
            phase: Phase::Serving,
            deadlines: None,
            cut: None,
            bound_registered: false,
            pending: [0; 2 * CONTROL_FRAME_LEN],
            pending_start: 0,
            pending_end: 0,
        }
    }

    /// The connection says GOAWAY once it reaches `age` (its
    /// [maximum age](lameduck::Config::max_connection_age)), as after a 429, and is bounded
    /// from then on ([`lameduck::Shared::aged_connection_bound`]). Nothing without a
    /// lifecycle.
    pub(crate) fn with_age(mut self, age: Option<StdInstant>) -> Self {
        if age.is_some() && self.broadcast.lifecycle().is_some() {
            self.deadlines = Some(Box::new(Deadlines::new(age)));
        }
        self
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

    /// How many streams the server has not ended, as seen in the frames so far.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Moves the phase on from what is known now: a request or the broadcast, the PING's
    /// acknowledgement, the timers. Registers `cx` for the request and the broadcast.
    fn update_phase(&mut self, cx: &mut Context<'_>) {
        if !self.stopped {
            self.watch_stop(cx);
        }
        if self.phase == Phase::Spreading {
            // A response that asks to close the connection cuts the wait short.
            self.request.register(cx.waker());
            if self.request.is_requested() {
                self.phase = Phase::AnnounceDue;
            }
        }
        if !matches!(self.phase, Phase::Serving | Phase::Spreading) {
            self.request.unregister();
        }
        if self.phase == Phase::AwaitingAck && self.incoming.goaway_ping_acked() {
            self.phase = Phase::FinalDue;
        }
        self.poll_deadlines(cx);
    }

    /// Until the connection stopped: its own request, or the broadcast (registered for on
    /// the first call).
    fn watch_stop(&mut self, cx: &mut Context<'_>) {
        if self.phase == Phase::Serving {
            self.request.register(cx.waker());
        }
        let broadcast = if self.registered {
            self.broadcast.is_set()
        } else {
            self.registered = true;
            self.broadcast.poll_register(&mut self.listener, cx)
        };
        if self.request.is_requested() {
            self.stop(false);
        } else if broadcast {
            self.stop(true);
        }
    }

    /// The connection stops now: at the broadcast (`by_broadcast`), it says GOAWAY at once
    /// or at its point in the idle-close window; at its own request, at once.
    fn stop(&mut self, by_broadcast: bool) {
        self.stopped = true;
        self.listener = None;
        let serving = self.phase == Phase::Serving;
        let Some((shared, clock)) = self.broadcast.lifecycle() else {
            if serving {
                self.phase = Phase::AnnounceDue;
            }
            return;
        };
        let now = TokioRuntime.now();
        let spread_until = if by_broadcast && serving {
            self.broadcast.close_at(None)
        } else {
            None
        };
        // The peer's time starts at the lifecycle's stop, at the connection's own point of
        // the idle-close window, or at its own request.
        let stopped_at = match spread_until {
            Some(until) => clock.instant(until),
            None if by_broadcast => shared.idle_close_window_start(clock.instant(now)),
            None => clock.instant(now),
        };
        if serving {
            self.phase = match spread_until {
                Some(_) => Phase::Spreading,
                None => Phase::AnnounceDue,
            };
        }
        self.deadlines
            .get_or_insert_with(|| Box::new(Deadlines::new(None)))
            .stopped(stopped_at, spread_until);
    }

    /// Looks at the timers and acts on what is due.
    fn poll_deadlines(&mut self, cx: &mut Context<'_>) {
        let (Some(deadlines), Some(lifecycle), None) = (
            self.deadlines.as_deref_mut(),
            self.broadcast.lifecycle(),
            self.cut,
        ) else {
            return;
        };
        let id = Rc::as_ptr(&self.request) as usize;
        for _ in 0..4 {
            let open = self.streams.len();
            let due = deadlines.poll(cx, lifecycle, self.phase.stage(), open);
            if let Some(bounds) = self.broadcast.bounds() {
                bounds.set(id, deadlines.last_bound());
                if !self.bound_registered {
                    self.bound_registered = true;
                    self.broadcast.count_registered(true);
                }
            }
            let Some(due) = due else {
                return;
            };
            match due {
                Due::Aged | Due::SpreadOver => {
                    if matches!(self.phase, Phase::Serving | Phase::Spreading) {
                        self.phase = Phase::AnnounceDue;
                    }
                    if due == Due::Aged {
                        tracing::debug!("h2 connection: maximum age reached");
                    }
                }
                Due::ForceFinal => {
                    if self.phase == Phase::AwaitingAck {
                        self.phase = Phase::FinalDue;
                        tracing::debug!("h2 connection: PING unacknowledged, final GOAWAY");
                    }
                }
                Due::Cut(kind) => {
                    self.cut = Some(kind);
                    // Unless the exit, at this same bound, counted it already.
                    if self
                        .broadcast
                        .bounds()
                        .is_none_or(|bounds| bounds.claim(id))
                    {
                        lifecycle.0.counters().count_connection_cut(kind);
                    }
                    tracing::debug!(kind = kind.name(), open, "h2 connection: cut at its bound");
                    // The final GOAWAY still goes out first if it can at once: the client
                    // learns which of its streams were processed.
                    if matches!(self.phase, Phase::AnnounceDue | Phase::AwaitingAck) {
                        self.phase = Phase::FinalDue;
                    }
                    return;
                }
            }
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
                if let Some(deadlines) = self.deadlines.as_deref_mut() {
                    deadlines.goaway_sent();
                }
                tracing::debug!("h2 connection: GOAWAY announced, PING sent");
            } else {
                let last = self.incoming.highest_stream_id();
                self.queue(&[goaway_frame(last)]);
                self.phase = Phase::Done;
                tracing::debug!(last_stream_id = last, "h2 connection: final GOAWAY");
            }
        }
    }

    /// What the watcher does at every read, write and flush before the server's bytes: moves
    /// the phase on, writes what is inserted, arms the timers. An error once the connection
    /// is cut.
    fn poll_own(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(kind) = self.cut {
            return Poll::Ready(Err(ConnectionCut(kind).into()));
        }
        self.update_phase(cx);
        let phase = self.phase;
        let inserted = self.poll_insert(cx);
        if self.phase != phase {
            // A GOAWAY went out: the timers follow.
            self.poll_deadlines(cx);
        }
        match self.cut {
            Some(kind) => Poll::Ready(Err(ConnectionCut(kind).into())),
            None => inserted,
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
        // An idle connection is woken here: write what is due (not waiting for the socket
        // to take it; the next read or write goes on).
        if let Poll::Ready(Err(e)) = this.poll_own(cx) {
            return Poll::Ready(Err(e));
        }
        loop {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let read = buf.filled().len() - before;
            let streams = &mut this.streams;
            let ack = this
                .incoming
                .read_each(&buf.filled()[before..], |header, opens| {
                    streams.client_frame(header, opens);
                });
            let Some(ack) = ack else {
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
        ready!(this.poll_own(cx))?;
        // With a GOAWAY due, the write stops at the end of the current frame (or of its
        // header, which tells where the frame ends); the GOAWAY goes out before the rest.
        let allowed = if this.insertion_due() {
            buf.len().min(this.outgoing.bytes_to_next_boundary())
        } else {
            buf.len()
        };
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..allowed]))?;
        let streams = &mut this.streams;
        this.outgoing.wrote_headers(&buf[..written], |header| {
            streams.server_frame(&header);
        });
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_own(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // What was inserted is written first; nothing new is started.
        if this.pending_start < this.pending_end && this.cut.is_none() {
            ready!(this.poll_insert(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
