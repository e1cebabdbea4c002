//! HTTP/1's header-read timeout (the slowloris protection), kept outside hyper: a
//! connection that waits for a request head must receive the whole head within
//! [`HEADER_READ_TIMEOUT`], or it is closed. The wait starts when the connection opens and
//! again whenever its last response has ended (an idle keep-alive connection is closed after
//! the same time).
//!
//! Giving hyper a timer would do this too, but hyper then starts a timer for every request
//! head and reads the socket once more after every response; here a request costs two atomic
//! operations and one clock read. Three parts share one [`ConnActivity`]:
//!
//! - the connection's service counts the heads it is called with and holds an [`InFlight`]
//!   guard until the response body has ended;
//! - the connection's I/O ([`WatchedIo`]) recognises the HTTP/2 preface, which turns the
//!   watch off (hyper has no header-read timeout for HTTP/2 either);
//! - the connection's task ([`HeadWatch`]) checks, each time the connection is pending,
//!   whether it now waits for a head, keeps one timer at the earliest deadline (re-armed only
//!   when it fires early), and says when the deadline has passed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};

use crate::runtime::Runtime;

/// How long an HTTP/1 connection may wait for a complete request head (hyper's default).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The client preface every HTTP/2 connection starts with.
const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What one connection's service, I/O and task share.
#[derive(Debug, Default)]
pub(crate) struct ConnActivity {
    /// Request heads received (the service was called).
    heads: AtomicUsize,
    /// Requests whose response has ended (their [`InFlight`] was dropped).
    ended: AtomicUsize,
    /// The connection speaks HTTP/2: no header-read timeout.
    http2: AtomicBool,
}

impl ConnActivity {
    /// Called for every request head, before it is served.
    pub(crate) fn head_received(self: &Arc<Self>) -> InFlight {
        self.heads.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    /// Marks the connection as HTTP/2.
    pub(crate) fn set_http2(&self) {
        self.http2.store(true, Ordering::Relaxed);
    }
}

/// Held from a request's head until its response body has ended: the connection is busy.
#[derive(Debug)]
pub struct InFlight(Arc<ConnActivity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::Release);
    }
}

/// A connection's I/O, watched for the HTTP/2 preface during its first bytes.
pub(crate) struct WatchedIo<I> {
    inner: I,
    /// While deciding: the activity to tell, and how many preface bytes matched so far.
    detecting: Option<(Arc<ConnActivity>, usize)>,
}

impl<I> WatchedIo<I> {
    pub(crate) fn new(inner: I, activity: Arc<ConnActivity>) -> Self {
        WatchedIo {
            inner,
            detecting: Some((activity, 0)),
        }
    }
}

impl<I: Read + Unpin> Read for WatchedIo<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some((activity, matched)) = this.detecting.as_mut() else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        // Read at most the rest of the preface through a buffer of our own, to look at it.
        let mut own = [0u8; HTTP2_PREFACE.len()];
        let want = (HTTP2_PREFACE.len() - *matched).min(buf.remaining());
        let mut read = ReadBuf::new(&mut own[..want]);
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, read.unfilled()))?;
        let got = read.filled();
        buf.put_slice(got);
        if got.is_empty() {
            // End of stream before a decision: nothing more to watch.
            this.detecting = None;
        } else if HTTP2_PREFACE[*matched..].starts_with(got) {
            *matched += got.len();
            if *matched == HTTP2_PREFACE.len() {
                activity.set_http2();
                this.detecting = None;
            }
        } else {
            this.detecting = None;
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: Write + Unpin> Write for WatchedIo<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
}

/// Wakes the connection task when the watch's timer fires, and says that it did, so the
/// task polls the timer only then.
#[derive(Default)]
struct TimerWake {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for TimerWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// The connection task's side: when the connection waits for a head, and one timer at the
/// earliest deadline.
pub(crate) struct HeadWatch<R: Runtime> {
    activity: Arc<ConnActivity>,
    runtime: R,
    timeout: Duration,
    /// Heads counted when the current wait was last seen.
    seen_heads: usize,
    /// When the connection started waiting for the next head, while it does.
    waiting_since: Option<Instant>,
    /// The armed timer and the instant it fires at.
    armed: Option<(Instant, Pin<Box<R::Sleep>>)>,
    wake: Arc<TimerWake>,
    waker: Waker,
}

impl<R: Runtime> HeadWatch<R> {
    /// The watch over `activity`.
    pub(crate) fn new(activity: Arc<ConnActivity>, runtime: R, timeout: Duration) -> Self {
        let wake = Arc::new(TimerWake::default());
        HeadWatch {
            activity,
            runtime,
            timeout,
            seen_heads: usize::MAX,
            waiting_since: None,
            armed: None,
            waker: Waker::from(Arc::clone(&wake)),
            wake,
        }
    }

    /// Call after the connection returned `Pending`. Returns `true` once the connection has
    /// waited for a request head for longer than the timeout: close it.
    pub(crate) fn after_pending(&mut self, cx: &mut Context<'_>) -> bool {
        if self.activity.http2.load(Ordering::Relaxed) {
            self.armed = None;
            return false;
        }
        let heads = self.activity.heads.load(Ordering::Relaxed);
        if self.activity.ended.load(Ordering::Acquire) != heads {
            // A request is in flight.
            self.waiting_since = None;
            return false;
        }
        let since = match self.waiting_since {
            Some(since) if heads == self.seen_heads => since,
            // A new wait: the connection was busy, or served heads since it was last seen.
            _ => {
                self.seen_heads = heads;
                let now = self.runtime.now();
                self.waiting_since = Some(now);
                now
            }
        };
        let deadline = since + self.timeout;
        match &self.armed {
            // Armed at or before the deadline and not fired: it fires (early) and is looked
            // at then. The common case: one atomic load.
            Some((at, _)) if *at <= deadline && !self.wake.fired.load(Ordering::Acquire) => {
                return false
            }
            _ => {}
        }
        self.wake.fired.store(false, Ordering::Release);
        let now = self.runtime.now();
        if deadline <= now {
            self.armed = None;
            return true;
        }
        // (Re-)arm at the deadline, woken through `wake`.
        let mut sleep = Box::pin(self.runtime.sleep_until(deadline));
        self.wake.task.register(cx.waker());
        if sleep
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
            .is_ready()
        {
            self.armed = None;
            return true;
        }
        self.armed = Some((deadline, sleep));
        false
    }
}
