//! The I/O hyper's HTTP/2 connection reads through: the client's bytes as they came, less the
//! WINDOW_UPDATE frames for streams that h2 ignores after its final GOAWAY.
//!
//! At a graceful shutdown h2 sends GOAWAY with the highest stream id, and a PING; at the
//! PING's acknowledgement it sends the final GOAWAY, whose last-stream-id is the highest
//! stream it has opened, and from then on it ignores the streams above it (the client opened
//! them before it saw the GOAWAY, and retries them elsewhere). It ignores their DATA and
//! RST_STREAM frames too, but a WINDOW_UPDATE for one of them (clients send one with a new
//! stream, to open its window) is taken for a frame on a stream that was never opened: h2
//! 0.4 ends the whole connection with GOAWAY(PROTOCOL_ERROR), and with it the streams still
//! being served. [`IgnoredStreamFilter`] leaves those frames out.
//!
//! h2 reads frames in the order they came and sends the final GOAWAY as it reads the
//! acknowledgement; so the streams it ignores are exactly those whose HEADERS come after the
//! acknowledgement, above the highest stream id opened before it. The filter sees the same
//! bytes in the same order, so it knows that id without seeing what h2 writes.
//!
//! A client that never acknowledges the PING would keep h2 from ever sending the final
//! GOAWAY, and so from closing the connection once its streams are done. When the
//! connection's task asks ([`Http2Watch::force_ack`], a second after the first GOAWAY), the
//! I/O hands h2 the acknowledgement itself, between two of the client's frames: the final
//! GOAWAY then names the streams opened so far, as Go's server does at its GOAWAY timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use std::io::IoSlice;

use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};

use crate::connection::h2_streams::{Http2Watch, StreamWatch};

use crate::adapter::h2_frames::{
    FrameHeader, FLAG_ACK, FRAME_HEADER_LEN, PREFACE, TYPE_HEADERS, TYPE_PING, TYPE_WINDOW_UPDATE,
};

/// The payload of the PING h2 sends with its first GOAWAY (h2's `Ping::SHUTDOWN`); its
/// acknowledgement is what makes h2 send the final GOAWAY. A test in the suite fails if h2
/// ever changes it.
pub(crate) const H2_SHUTDOWN_PING_PAYLOAD: [u8; 8] =
    [0x0b, 0x7b, 0xa2, 0xf0, 0x8b, 0x9b, 0xfe, 0x54];

/// How many bytes an HTTP/2 connection reads from its socket at a time (h2 reads into a
/// buffer of its own: this is where the client's bytes are looked at first).
const READ_BUFFER_LEN: usize = 8 * 1024;

/// What one call of [`IgnoredStreamFilter::filter`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filtered {
    /// The first `kept` bytes of the buffer are what passes on.
    pub(crate) kept: usize,
    /// The bytes from `unread` to the end are the start of a frame header not complete yet:
    /// they go in front of the next bytes read.
    pub(crate) unread: usize,
}

/// Follows the client's frames and leaves out each WINDOW_UPDATE for a stream above the
/// final GOAWAY's last-stream-id (see the module's documentation).
#[derive(Debug, Clone)]
pub(crate) struct IgnoredStreamFilter {
    preface_left: usize,
    /// Payload bytes left in the current frame.
    payload_left: usize,
    /// Whether the current frame's payload is left out.
    dropping: bool,
    /// The current frame is a PING acknowledgement: how much of its payload was compared, and
    /// whether all of that matched h2's shutdown PING.
    ack: Option<(usize, bool)>,
    /// The highest stream id the client has opened so far.
    highest_stream_id: u32,
    /// The final GOAWAY's last-stream-id, once the shutdown PING is acknowledged.
    last_stream_id: Option<u32>,
    /// The streams the server has not ended, when followed ([`Self::filter_watching`]).
    pub(crate) streams: StreamWatch,
}

impl Default for IgnoredStreamFilter {
    fn default() -> Self {
        IgnoredStreamFilter {
            preface_left: PREFACE.len(),
            payload_left: 0,
            dropping: false,
            ack: None,
            highest_stream_id: 0,
            last_stream_id: None,
            streams: StreamWatch::default(),
        }
    }
}

impl IgnoredStreamFilter {
    /// Filters `bytes`, the client's next bytes, in place: see [`Filtered`]. A frame header is
    /// only looked at whole, so an incomplete one at the end is given back as unread.
    pub(crate) fn filter(&mut self, bytes: &mut [u8]) -> Filtered {
        self.filter_inner(bytes, None)
    }

    /// [`Self::filter`], following the streams the client opens and resets in `streams`
    /// (told to `watch`).
    pub(crate) fn filter_watching(&mut self, bytes: &mut [u8], watch: &Http2Watch) -> Filtered {
        self.filter_inner(bytes, Some(watch))
    }

    fn filter_inner(&mut self, bytes: &mut [u8], watch: Option<&Http2Watch>) -> Filtered {
        let len = bytes.len();
        // The preface is passed as it is.
        let mut read = len.min(self.preface_left);
        self.preface_left -= read;
        let mut kept = read;
        while read < len {
            if self.payload_left == 0 {
                let Some(header) = bytes.get(read..read + FRAME_HEADER_LEN) else {
                    return Filtered { kept, unread: read };
                };
                let header = FrameHeader::parse(header.try_into().unwrap_or(&[0; 9]));
                self.frame_started(header, watch);
                if !self.dropping {
                    if kept != read {
                        bytes.copy_within(read..read + FRAME_HEADER_LEN, kept);
                    }
                    kept += FRAME_HEADER_LEN;
                }
                read += FRAME_HEADER_LEN;
            } else {
                let n = self.payload_left.min(len - read);
                self.payload(&bytes[read..read + n]);
                if !self.dropping {
                    if kept != read {
                        bytes.copy_within(read..read + n, kept);
                    }
                    kept += n;
                }
                read += n;
                self.payload_left -= n;
            }
        }
        Filtered { kept, unread: len }
    }

    fn frame_started(&mut self, header: FrameHeader, watch: Option<&Http2Watch>) {
        self.payload_left = header.length;
        // Client-initiated streams have odd ids; trailers leave the highest as it is. A
        // stream above the final GOAWAY's last-stream-id is one h2 ignores.
        let opens = header.kind == TYPE_HEADERS
            && header.stream_id % 2 == 1
            && header.stream_id > self.highest_stream_id
            && self
                .last_stream_id
                .is_none_or(|last| header.stream_id <= last);
        if header.kind == TYPE_HEADERS && header.stream_id % 2 == 1 {
            self.highest_stream_id = self.highest_stream_id.max(header.stream_id);
        }
        if let Some(watch) = watch {
            self.streams.client_frame(header, opens, watch);
        }
        self.dropping = header.kind == TYPE_WINDOW_UPDATE
            && header.stream_id != 0
            && self
                .last_stream_id
                .is_some_and(|last| header.stream_id > last);
        let is_ack = header.kind == TYPE_PING && header.flags & FLAG_ACK != 0;
        self.ack =
            (is_ack && header.length == 8 && self.last_stream_id.is_none()).then_some((0, true));
    }

    /// Compares the payload of a PING acknowledgement with h2's shutdown PING; when all of it
    /// matched, the final GOAWAY's last-stream-id is known.
    fn payload(&mut self, bytes: &[u8]) {
        let Some((offset, matched)) = self.ack else {
            return;
        };
        let end = offset + bytes.len();
        let matched = matched && H2_SHUTDOWN_PING_PAYLOAD[offset..end] == *bytes;
        if end < H2_SHUTDOWN_PING_PAYLOAD.len() {
            self.ack = Some((end, matched));
            return;
        }
        self.ack = None;
        if matched {
            self.last_stream_id = Some(self.highest_stream_id);
        }
    }
}

impl IgnoredStreamFilter {
    /// Whether the bytes filtered so far end at a frame boundary (after the preface): a frame
    /// may be inserted there.
    fn at_frame_boundary(&self) -> bool {
        self.preface_left == 0 && self.payload_left == 0
    }

    /// Whether h2's shutdown PING has been acknowledged in the bytes filtered so far.
    fn saw_shutdown_ack(&self) -> bool {
        self.last_stream_id.is_some()
    }
}

/// The acknowledgement of h2's shutdown PING, as h2 would read it from the client.
fn shutdown_ping_ack() -> [u8; FRAME_HEADER_LEN + 8] {
    let mut frame = [0; FRAME_HEADER_LEN + 8];
    frame[2] = 8;
    frame[3] = TYPE_PING;
    frame[4] = FLAG_ACK;
    frame[FRAME_HEADER_LEN..].copy_from_slice(&H2_SHUTDOWN_PING_PAYLOAD);
    frame
}

/// An HTTP/2 connection's I/O: reads go through an [`IgnoredStreamFilter`], writes pass
/// straight on; both are followed for the streams the server has not ended
/// ([`StreamWatch`]).
pub(crate) struct Http2Io<I> {
    inner: I,
    filter: IgnoredStreamFilter,
    /// What the connection's task reads of the connection.
    watch: Arc<Http2Watch>,
    /// Whether `watch` says the acknowledgement was read.
    ack_read: bool,
    /// The client's bytes have ended: nothing is inserted after them (an incomplete header
    /// may have gone on unfiltered).
    client_ended: bool,
    /// `buf[start..end]` is filtered and not yet given to h2; `buf[end..unread_end]` is the
    /// start of a frame header, to be filtered with the next bytes.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    unread_end: usize,
}

impl<I> Http2Io<I> {
    /// `inner`, from the start of the client's bytes (its preface); `watch` is shared with
    /// the connection's task.
    pub(crate) fn new(inner: I, watch: Arc<Http2Watch>) -> Self {
        Http2Io {
            inner,
            filter: IgnoredStreamFilter::default(),
            watch,
            ack_read: false,
            client_ended: false,
            buf: vec![0; READ_BUFFER_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            unread_end: 0,
        }
    }
}

impl<I: Read + Unpin> Read for Http2Io<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut out: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.start < this.end {
                let n = (this.end - this.start).min(out.remaining());
                out.put_slice(&this.buf[this.start..this.start + n]);
                this.start += n;
                return Poll::Ready(Ok(()));
            }
            // The unread start of a header goes first, then what the socket gives.
            let unread = this.unread_end - this.end;
            if unread == 0 && !this.ack_read && !this.client_ended && this.watch.ack_forced() {
                if let Some(n) = this.acknowledge_in_clients_stead() {
                    (this.start, this.end, this.unread_end) = (0, n, n);
                    continue;
                }
            }
            if unread > 0 {
                this.buf.copy_within(this.end..this.unread_end, 0);
            }
            (this.start, this.end, this.unread_end) = (0, 0, unread);
            let mut read_buf = ReadBuf::new(&mut this.buf[unread..]);
            ready!(Pin::new(&mut this.inner).poll_read(cx, read_buf.unfilled()))?;
            let got = read_buf.filled().len();
            if got == 0 {
                // The end of the stream: an incomplete header goes on as it is, then the end.
                this.client_ended = true;
                this.end = unread;
                if unread == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let total = unread + got;
            let filtered = this
                .filter
                .filter_watching(&mut this.buf[..total], &this.watch);
            if !this.ack_read && this.filter.saw_shutdown_ack() {
                this.ack_read = true;
                this.watch.set_ack_read();
            }
            if filtered.unread < total {
                this.buf.copy_within(filtered.unread..total, filtered.kept);
            }
            this.end = filtered.kept;
            this.unread_end = filtered.kept + (total - filtered.unread);
            // Nothing to give yet (all of it left out, or a header still incomplete): read on,
            // since giving nothing would mean the end of the stream.
        }
    }
}

impl<I> Http2Io<I> {
    /// Puts the shutdown PING's acknowledgement in the (empty) buffer, through the filter,
    /// when the client's bytes are at a frame boundary: the number of bytes to give h2.
    #[cold]
    fn acknowledge_in_clients_stead(&mut self) -> Option<usize> {
        if !self.filter.at_frame_boundary() {
            return None;
        }
        let ack = shutdown_ping_ack();
        self.buf[..ack.len()].copy_from_slice(&ack);
        let filtered = self.filter.filter(&mut self.buf[..ack.len()]);
        self.ack_read = true;
        self.watch.set_ack_read();
        Some(filtered.kept)
    }
}

impl<I: Write + Unpin> Write for Http2Io<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.filter.streams.server_wrote(&buf[..n], &this.watch);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        let written = n;
        for buf in bufs {
            if n == 0 {
                break;
            }
            let take = n.min(buf.len());
            this.filter.streams.server_wrote(&buf[..take], &this.watch);
            n -= take;
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::h2_frames::tests::frame;

    fn window_update(stream: u32) -> Vec<u8> {
        frame(TYPE_WINDOW_UPDATE, 0, stream, &[0, 1, 0, 0])
    }

    /// Runs `bytes` through a filter in chunks of `split`, as [`Http2Io`] does.
    fn filtered(bytes: &[u8], split: usize) -> Vec<u8> {
        let mut filter = IgnoredStreamFilter::default();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        for chunk in bytes.chunks(split) {
            pending.extend_from_slice(chunk);
            let f = filter.filter(&mut pending);
            assert!(f.kept <= f.unread);
            out.extend_from_slice(&pending[..f.kept]);
            pending.drain(..f.unread);
        }
        out.extend_from_slice(&pending);
        out
    }

    /// A client's bytes around a graceful shutdown: streams 1 and 3 before the
    /// acknowledgement, 5 after it; a WINDOW_UPDATE for each, and for the connection.
    fn shutdown_sequence() -> (Vec<u8>, Vec<u8>) {
        let mut before = PREFACE.to_vec();
        before.extend(frame(0x4, 0, 0, &[0; 6]));
        before.extend(frame(TYPE_HEADERS, 0x4, 1, &[1, 2, 3]));
        before.extend(window_update(1));
        before.extend(frame(TYPE_HEADERS, 0x4, 3, &[1]));
        before.extend(frame(0x0, 0x1, 3, &[7; 20_000]));
        // Another acknowledgement first: not h2's shutdown PING.
        before.extend(frame(TYPE_PING, FLAG_ACK, 0, &[1; 8]));
        before.extend(frame(TYPE_PING, FLAG_ACK, 0, &H2_SHUTDOWN_PING_PAYLOAD));
        let mut expected = before.clone();
        let mut after = Vec::new();
        after.extend(frame(TYPE_HEADERS, 0x4, 5, &[1]));
        after.extend(window_update(5));
        after.extend(window_update(3));
        after.extend(window_update(0));
        after.extend(frame(0x0, 0x1, 5, &[9; 100]));
        after.extend(window_update(7));
        after.extend(frame(0x3, 0, 5, &[0, 0, 0, 8]));
        let mut kept = frame(TYPE_HEADERS, 0x4, 5, &[1]);
        kept.extend(window_update(3));
        kept.extend(window_update(0));
        kept.extend(frame(0x0, 0x1, 5, &[9; 100]));
        kept.extend(frame(0x3, 0, 5, &[0, 0, 0, 8]));
        before.extend(after);
        expected.extend(kept);
        (before, expected)
    }

    #[test]
    fn window_updates_above_the_final_goaway_are_left_out_in_any_split() {
        let (bytes, expected) = shutdown_sequence();
        for split in [1, 2, 3, 8, 9, 10, 13, 17, 24, 100, 4096, bytes.len()] {
            assert_eq!(filtered(&bytes, split), expected, "split {split}");
        }
    }

    #[test]
    fn before_the_acknowledgement_every_frame_passes() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(window_update(9));
        bytes.extend(frame(TYPE_PING, FLAG_ACK, 0, &[0x0b; 8]));
        bytes.extend(window_update(11));
        bytes.extend(frame(TYPE_PING, 0, 0, &H2_SHUTDOWN_PING_PAYLOAD));
        bytes.extend(window_update(13));
        assert_eq!(filtered(&bytes, 5), bytes);
    }

    #[test]
    fn an_incomplete_header_is_given_back_unread() {
        let mut filter = IgnoredStreamFilter::default();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(&window_update(1)[..4]);
        assert_eq!(
            filter.filter(&mut bytes),
            Filtered {
                kept: 24,
                unread: 24
            }
        );
    }

    /// Reads of at most `.1` bytes from `.0`, then the end of the stream.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            mut buf: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let n = this.0.len().min(this.1).min(buf.remaining());
            buf.put_slice(&this.0[..n]);
            this.0.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn the_io_gives_what_the_filter_keeps_then_the_end() {
        let (mut bytes, mut expected) = shutdown_sequence();
        // The stream ends inside a header: those bytes still reach h2.
        bytes.extend([0, 0]);
        expected.extend([0, 0]);
        let mut io = Http2Io::new(Trickle(bytes, 3), Arc::default());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut out = Vec::new();
        loop {
            let mut raw = [0u8; 1000];
            let mut buf = ReadBuf::new(&mut raw);
            let Poll::Ready(Ok(())) = Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) else {
                panic!("reads are ready");
            };
            if buf.filled().is_empty() {
                break;
            }
            out.extend_from_slice(buf.filled());
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn nothing_is_acknowledged_in_the_clients_stead_after_its_bytes_ended_inside_a_header() {
        let mut bytes = PREFACE.to_vec();
        bytes.push(0x03);
        let expected = bytes.clone();
        let watch = Arc::new(Http2Watch::default());
        watch.force_ack();
        // All of it in one read: the preface, and the first byte of a header.
        let mut io = Http2Io::new(Trickle(bytes, usize::MAX), Arc::clone(&watch));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut out = Vec::new();
        for _ in 0..100 {
            let mut raw = [0u8; 1000];
            let mut buf = ReadBuf::new(&mut raw);
            let Poll::Ready(Ok(())) = Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) else {
                panic!("reads are ready");
            };
            if buf.filled().is_empty() {
                break;
            }
            out.extend_from_slice(buf.filled());
        }
        assert_eq!(out, expected);
        assert!(!watch.ack_read());
    }
}
