//! A pass-through socket wrapper that parses the HTTP/2 frame headers the server sends, so a
//! test using hyper's client can still see exactly when a GOAWAY or RST_STREAM frame arrived
//! and what it said.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use lameduck_test_support::h2::{frames, Frame, GOAWAY, RST_STREAM};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A GOAWAY frame as received.
#[derive(Debug, Clone, Copy)]
pub struct GoAway {
    pub at: Instant,
    pub last_stream_id: u32,
    pub error_code: u32,
}

/// An RST_STREAM frame as received.
#[derive(Debug, Clone, Copy)]
pub struct Reset {
    pub at: Instant,
    pub stream_id: u32,
    pub error_code: u32,
}

/// What the tap saw on the server-to-client direction.
#[derive(Debug, Default)]
pub struct Seen {
    buffer: Vec<u8>,
    pub goaways: Vec<GoAway>,
    pub resets: Vec<Reset>,
    pub frames: usize,
    pub eof_at: Option<Instant>,
}

impl Seen {
    fn feed(&mut self, bytes: &[u8], at: Instant) {
        self.buffer.extend_from_slice(bytes);
        let frames = frames(&self.buffer);
        for frame in &frames {
            let payload = &frame.payload;
            if frame.kind == GOAWAY && payload.len() >= 8 {
                self.goaways.push(GoAway {
                    at,
                    last_stream_id: u32::from_be_bytes([
                        payload[0] & 0x7f,
                        payload[1],
                        payload[2],
                        payload[3],
                    ]),
                    error_code: u32::from_be_bytes([
                        payload[4], payload[5], payload[6], payload[7],
                    ]),
                });
            }
            if frame.kind == RST_STREAM && payload.len() >= 4 {
                self.resets.push(Reset {
                    at,
                    stream_id: frame.stream,
                    error_code: u32::from_be_bytes([
                        payload[0], payload[1], payload[2], payload[3],
                    ]),
                });
            }
            self.frames += 1;
        }
        self.buffer.drain(..frames.last().map_or(0, Frame::end));
    }
}

/// Wraps a socket; every byte read is also parsed into [`Seen`].
pub struct FrameTap<T> {
    inner: T,
    seen: Arc<Mutex<Seen>>,
}

impl<T> FrameTap<T> {
    pub fn new(inner: T) -> (FrameTap<T>, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        (
            FrameTap {
                inner,
                seen: Arc::clone(&seen),
            },
            seen,
        )
    }
}

/// Reads the shared [`Seen`] state.
pub fn seen<R>(seen: &Mutex<Seen>, f: impl FnOnce(&Seen) -> R) -> R {
    f(&seen.lock().unwrap_or_else(PoisonError::into_inner))
}

impl<T: AsyncRead + Unpin> AsyncRead for FrameTap<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &result {
            let now = Instant::now();
            let mut seen = this.seen.lock().unwrap_or_else(PoisonError::into_inner);
            let new = &buf.filled()[before..];
            if new.is_empty() {
                seen.eof_at.get_or_insert(now);
            } else {
                seen.feed(new, now);
            }
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FrameTap<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[test]
fn goaway_frames_are_parsed_across_reads() {
    let mut seen = Seen::default();
    // SETTINGS (empty), then GOAWAY(last stream 79, NO_ERROR) split over two reads.
    let settings = [0u8, 0, 0, 4, 0, 0, 0, 0, 0];
    let goaway = [0u8, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 79, 0, 0, 0, 0];
    let now = Instant::now();
    seen.feed(&settings, now);
    seen.feed(&goaway[..5], now);
    assert!(seen.goaways.is_empty());
    seen.feed(&goaway[5..], now);
    assert_eq!(seen.frames, 2);
    assert_eq!(seen.goaways.len(), 1);
    assert_eq!(seen.goaways[0].last_stream_id, 79);
    assert_eq!(seen.goaways[0].error_code, 0);
}

#[test]
fn rst_stream_frames_are_parsed() {
    let mut seen = Seen::default();
    // RST_STREAM(stream 3, INTERNAL_ERROR = 2).
    let rst = [0u8, 0, 4, 3, 0, 0, 0, 0, 3, 0, 0, 0, 2];
    seen.feed(&rst, Instant::now());
    assert_eq!(seen.frames, 1);
    assert_eq!(seen.resets.len(), 1);
    assert_eq!(seen.resets[0].stream_id, 3);
    assert_eq!(seen.resets[0].error_code, 2);
    assert!(seen.goaways.is_empty());
}
