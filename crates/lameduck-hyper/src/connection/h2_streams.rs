//! What an HTTP/2 connection's task knows of it that hyper does not tell: the streams the
//! server has not ended yet, and whether h2's shutdown PING was acknowledged.
//!
//! hyper hands a response body to h2 as soon as h2 takes its data, which h2 then keeps until
//! the client's flow-control window lets it out: a client that stopped reading leaves its
//! stream open in h2 with the request long over as far as hyper is concerned. The
//! connection's I/O ([`Http2Io`](super::h2_io::Http2Io)) sees both directions, so it follows
//! the streams itself ([`StreamWatch`]): a stream opens with the client's HEADERS and ends
//! with the server's END_STREAM, or a RST_STREAM either way. Only frame headers are looked
//! at. [`Http2Watch`] is what the task reads of it.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::adapter::h2_frames::{FrameHeader, OpenStreams, OutgoingFrames};

/// Shared by an HTTP/2 connection's task and its I/O: the streams the server has not ended,
/// whether h2's shutdown PING has been acknowledged, and the task's request that the I/O
/// acknowledge it in the client's stead.
#[derive(Debug, Default)]
pub(crate) struct Http2Watch {
    ack: AtomicU8,
    open_streams: AtomicUsize,
}

/// [`Http2Watch::ack`]: no acknowledgement yet.
const ACK_AWAITED: u8 = 0;
/// [`Http2Watch::ack`]: the task asked for one.
const ACK_FORCED: u8 = 1;
/// [`Http2Watch::ack`]: h2 has read one (the client's, or the I/O's own).
const ACK_READ: u8 = 2;

impl Http2Watch {
    /// Asks the I/O to hand h2 the acknowledgement at the next frame boundary of the
    /// client's bytes (unless the client's own came first). h2 reads it the next time it
    /// reads, which it does whenever the connection is polled and is not stuck writing.
    pub(crate) fn force_ack(&self) {
        let _ =
            self.ack
                .compare_exchange(ACK_AWAITED, ACK_FORCED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Whether h2 has read an acknowledgement of its shutdown PING.
    pub(crate) fn ack_read(&self) -> bool {
        self.ack.load(Ordering::Acquire) == ACK_READ
    }

    /// The streams the server has not ended yet.
    pub(crate) fn open_streams(&self) -> usize {
        self.open_streams.load(Ordering::Acquire)
    }

    pub(crate) fn ack_forced(&self) -> bool {
        self.ack.load(Ordering::Relaxed) == ACK_FORCED
    }

    pub(crate) fn set_ack_read(&self) {
        self.ack.store(ACK_READ, Ordering::Release);
    }

    fn set_open_streams(&self, n: usize) {
        self.open_streams.store(n, Ordering::Release);
    }
}

/// The streams of a connection the server has not ended (see the module's documentation),
/// told to an [`Http2Watch`].
#[derive(Debug, Default, Clone)]
pub(crate) struct StreamWatch {
    streams: OpenStreams,
    /// Where the server's frames are.
    outgoing: OutgoingFrames,
}

impl StreamWatch {
    /// A frame of the client's began (`opens`: see [`OpenStreams::client_frame`]).
    pub(crate) fn client_frame(&mut self, header: FrameHeader, opens: bool, watch: &Http2Watch) {
        if self.streams.client_frame(&header, opens) {
            watch.set_open_streams(self.streams.len());
        }
    }

    /// The server wrote `bytes`.
    pub(crate) fn server_wrote(&mut self, bytes: &[u8], watch: &Http2Watch) {
        let streams = &mut self.streams;
        let mut changed = false;
        self.outgoing
            .wrote_headers(bytes, |header| changed |= streams.server_frame(&header));
        if changed {
            watch.set_open_streams(streams.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::h2_frames::tests::frame;
    use crate::adapter::h2_frames::{FRAME_HEADER_LEN, TYPE_DATA, TYPE_HEADERS, TYPE_RST_STREAM};

    fn header(bytes: &[u8]) -> FrameHeader {
        FrameHeader::parse(bytes[..FRAME_HEADER_LEN].try_into().unwrap())
    }

    #[test]
    fn a_stream_is_open_from_the_clients_headers_to_the_servers_end_or_a_reset() {
        let watch = Http2Watch::default();
        let mut streams = StreamWatch::default();
        for id in [1, 3, 5] {
            streams.client_frame(header(&frame(TYPE_HEADERS, 0x5, id, &[])), true, &watch);
        }
        // Trailers, or a stream h2 ignores, open nothing.
        streams.client_frame(header(&frame(TYPE_HEADERS, 0x5, 1, &[])), false, &watch);
        assert_eq!(watch.open_streams(), 3);
        // The server's frames, split anywhere: stream 1 ends with its DATA, 3 with a reset.
        let mut out = frame(0x4, 0, 0, &[0; 6]);
        out.extend(frame(TYPE_HEADERS, 0x4, 1, &[0x88]));
        out.extend(frame(TYPE_DATA, 0x1, 1, &[b'x'; 40]));
        out.extend(frame(TYPE_HEADERS, 0x4, 5, &[0x88]));
        out.extend(frame(TYPE_DATA, 0x0, 5, &[b'x'; 40]));
        out.extend(frame(TYPE_RST_STREAM, 0, 3, &[0, 0, 0, 8]));
        for chunk in out.chunks(7) {
            streams.server_wrote(chunk, &watch);
        }
        assert_eq!(watch.open_streams(), 1);
        // The client resets the last one.
        streams.client_frame(
            header(&frame(TYPE_RST_STREAM, 0, 5, &[0; 4])),
            false,
            &watch,
        );
        assert_eq!(watch.open_streams(), 0);
    }

    #[test]
    fn the_ack_is_forced_once_and_read_once() {
        let watch = Http2Watch::default();
        assert!(!watch.ack_read() && !watch.ack_forced());
        watch.force_ack();
        assert!(watch.ack_forced());
        watch.set_ack_read();
        watch.force_ack();
        assert!(watch.ack_read());
    }
}
