//! The HTTP/2 frame layout both directions of a connection are watched for, without
//! decoding anything but frame headers and the few payloads that matter: where the server's
//! frames end (so that a GOAWAY is only ever written between two of them), the highest stream
//! id the client has opened, and the acknowledgement of the PING sent with a first GOAWAY.
//! Adapters whose HTTP/2 server says no GOAWAY of its own (actix-web) use it to say one; the
//! hyper connections use it to keep from h2 the frames it must not see after its final
//! GOAWAY.
//!
//! Every frame starts with a 9-byte header: a 24-bit payload length, the type, the flags and
//! a 31-bit stream id (RFC 9113 §4.1). The client's bytes start with the 24-byte connection
//! preface; the server's with its SETTINGS frame.

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const FRAME_HEADER_LEN: usize = 9;
/// Length of a GOAWAY or PING frame, header included.
pub const CONTROL_FRAME_LEN: usize = FRAME_HEADER_LEN + 8;
/// Frame type HEADERS: the client opens a stream with it.
pub const TYPE_HEADERS: u8 = 0x1;
/// Frame type PING.
pub const TYPE_PING: u8 = 0x6;
/// Frame type GOAWAY.
pub const TYPE_GOAWAY: u8 = 0x7;
/// Frame type WINDOW_UPDATE.
pub const TYPE_WINDOW_UPDATE: u8 = 0x8;
/// The ACK flag of a PING frame.
pub const FLAG_ACK: u8 = 0x1;
/// The highest stream id: a GOAWAY with it stops new streams and refuses none.
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;
/// The opaque data of the PING sent with the first GOAWAY (h2 itself uses other payloads,
/// and ignores the acknowledgement of a PING it did not send).
pub const GOAWAY_PING_PAYLOAD: [u8; 8] = *b"lameduck";

/// A GOAWAY frame with error code NO_ERROR: streams up to `last_stream_id` are processed,
/// later ones are not, and no new stream may be opened.
#[must_use]
pub fn goaway_frame(last_stream_id: u32) -> [u8; CONTROL_FRAME_LEN] {
    let mut frame = [0; CONTROL_FRAME_LEN];
    frame[2] = 8;
    frame[3] = TYPE_GOAWAY;
    frame[9..13].copy_from_slice(&(last_stream_id & MAX_STREAM_ID).to_be_bytes());
    frame
}

/// The PING sent right after the first GOAWAY: once the client acknowledges it, every stream
/// the client opened before it saw the GOAWAY has been read.
#[must_use]
pub fn goaway_ping_frame() -> [u8; CONTROL_FRAME_LEN] {
    let mut frame = [0; CONTROL_FRAME_LEN];
    frame[2] = 8;
    frame[3] = TYPE_PING;
    frame[9..].copy_from_slice(&GOAWAY_PING_PAYLOAD);
    frame
}

/// Where a byte stream of frames is: inside a frame header (and how much of it is known) or
/// inside a payload (and how much of it is left).
#[derive(Debug, Clone, Default)]
struct FrameCursor {
    header: [u8; FRAME_HEADER_LEN],
    header_filled: usize,
    payload_left: usize,
}

/// A frame header, once all of its 9 bytes are known.
#[derive(Debug, Clone, Copy)]
pub struct FrameHeader {
    /// Payload length.
    pub length: usize,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream id (the reserved bit cleared).
    pub stream_id: u32,
}

impl FrameHeader {
    /// The header these 9 bytes encode.
    #[must_use]
    pub fn parse(h: &[u8; FRAME_HEADER_LEN]) -> Self {
        FrameHeader {
            length: usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]),
            kind: h[3],
            flags: h[4],
            stream_id: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID,
        }
    }
}

/// What [`FrameCursor::advance`] found in the bytes it took.
enum Step {
    /// `n` bytes of a header, the header still incomplete.
    Header(usize),
    /// `n` bytes that completed the header.
    HeaderDone(usize, FrameHeader),
    /// `n` bytes of the payload, starting `offset` bytes into it.
    Payload { n: usize, offset: usize },
}

impl FrameCursor {
    /// Takes the first bytes of `bytes` (never beyond the current header or payload).
    fn advance(&mut self, bytes: &[u8]) -> Step {
        if self.header_filled == 0 && self.payload_left > 0 {
            let n = bytes.len().min(self.payload_left);
            let length = self.current_length();
            let offset = length - self.payload_left;
            self.payload_left -= n;
            return Step::Payload { n, offset };
        }
        let n = bytes.len().min(FRAME_HEADER_LEN - self.header_filled);
        self.header[self.header_filled..self.header_filled + n].copy_from_slice(&bytes[..n]);
        self.header_filled += n;
        if self.header_filled < FRAME_HEADER_LEN {
            return Step::Header(n);
        }
        self.header_filled = 0;
        let header = FrameHeader::parse(&self.header);
        self.payload_left = header.length;
        Step::HeaderDone(n, header)
    }

    /// The payload length of the frame whose header was last completed.
    fn current_length(&self) -> usize {
        let h = &self.header;
        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2])
    }

    fn at_boundary(&self) -> bool {
        self.header_filled == 0 && self.payload_left == 0
    }

    /// How many bytes may pass before the next frame boundary is reached or becomes known:
    /// the rest of the payload, or the rest of the header (whose length field then tells).
    fn bytes_to_next_boundary(&self) -> usize {
        if self.header_filled == 0 {
            self.payload_left
        } else {
            FRAME_HEADER_LEN - self.header_filled
        }
    }
}

/// The server's outgoing frames: where the next frame boundary is. The server's first frame
/// (its SETTINGS, the server's connection preface) must come first: before it has been
/// written, there is no boundary to insert at.
#[derive(Debug, Clone, Default)]
pub struct OutgoingFrames {
    cursor: FrameCursor,
    wrote_any: bool,
}

impl OutgoingFrames {
    /// Accounts for `bytes`, just written by the server.
    pub fn wrote(&mut self, mut bytes: &[u8]) {
        self.wrote_any |= !bytes.is_empty();
        while !bytes.is_empty() {
            let n = match self.cursor.advance(bytes) {
                Step::Header(n) | Step::HeaderDone(n, _) | Step::Payload { n, .. } => n,
            };
            bytes = &bytes[n..];
        }
    }

    /// Whether the bytes written so far end exactly at the end of a frame (never before the
    /// first frame).
    #[must_use]
    pub fn at_boundary(&self) -> bool {
        self.wrote_any && self.cursor.at_boundary()
    }

    /// How many more bytes may be written before the next frame boundary, or before the
    /// current header is complete and the boundary known (0 at a boundary).
    #[must_use]
    pub fn bytes_to_next_boundary(&self) -> usize {
        if self.wrote_any {
            self.cursor.bytes_to_next_boundary()
        } else {
            FRAME_HEADER_LEN
        }
    }
}

impl OutgoingFrames {
    /// [`OutgoingFrames::wrote`], handing `on_header` each frame header completed in
    /// `bytes`.
    pub fn wrote_headers(&mut self, mut bytes: &[u8], mut on_header: impl FnMut(FrameHeader)) {
        self.wrote_any |= !bytes.is_empty();
        while !bytes.is_empty() {
            let n = match self.cursor.advance(bytes) {
                Step::HeaderDone(n, header) => {
                    on_header(header);
                    n
                }
                Step::Header(n) | Step::Payload { n, .. } => n,
            };
            bytes = &bytes[n..];
        }
    }
}

/// Frame type RST_STREAM.
pub const TYPE_RST_STREAM: u8 = 0x3;
/// Frame type DATA.
pub const TYPE_DATA: u8 = 0x0;
/// The END_STREAM flag of a DATA or HEADERS frame.
pub const FLAG_END_STREAM: u8 = 0x1;

/// The streams of a connection the server has not ended yet: a stream opens with the
/// client's HEADERS (a new stream the server serves) and ends with the server's END_STREAM
/// (on DATA or HEADERS), or with a RST_STREAM either way. A response the server's HTTP/2
/// implementation still holds for a client that stopped reading keeps its stream open here,
/// although the handler is long done.
#[derive(Debug, Clone, Default)]
pub struct OpenStreams {
    /// Their ids (few: at most the connection's concurrent streams).
    ids: Vec<u32>,
}

impl OpenStreams {
    /// A frame of the client's began; `opens`: it is HEADERS opening a new stream the
    /// server serves (not trailers, not one ignored after a final GOAWAY). Whether the count
    /// changed.
    pub fn client_frame(&mut self, header: &FrameHeader, opens: bool) -> bool {
        match header.kind {
            TYPE_HEADERS if opens => {
                self.ids.push(header.stream_id);
                true
            }
            TYPE_RST_STREAM => self.end(header.stream_id),
            _ => false,
        }
    }

    /// A frame of the server's began. Whether the count changed.
    pub fn server_frame(&mut self, header: &FrameHeader) -> bool {
        let ends = match header.kind {
            TYPE_DATA | TYPE_HEADERS => header.flags & FLAG_END_STREAM != 0,
            TYPE_RST_STREAM => true,
            _ => false,
        };
        ends && self.end(header.stream_id)
    }

    /// How many streams are open.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no stream is open.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn end(&mut self, stream: u32) -> bool {
        let Some(i) = self.ids.iter().position(|id| *id == stream) else {
            return false;
        };
        self.ids.swap_remove(i);
        true
    }
}

/// The client's incoming bytes: the preface, then frames.
#[derive(Debug, Clone)]
pub struct IncomingFrames {
    preface_left: usize,
    cursor: FrameCursor,
    /// Type and flags of the frame whose payload is being read.
    current: Option<FrameHeader>,
    ping_payload: [u8; 8],
    highest_stream_id: u32,
    goaway_ping_acked: bool,
}

impl Default for IncomingFrames {
    fn default() -> Self {
        IncomingFrames {
            preface_left: PREFACE.len(),
            cursor: FrameCursor::default(),
            current: None,
            ping_payload: [0; 8],
            highest_stream_id: 0,
            goaway_ping_acked: false,
        }
    }
}

impl IncomingFrames {
    /// Accounts for `bytes`, just read by the server. Returns where, in `bytes`, the
    /// acknowledgement of [`goaway_ping_frame`] lies when all of it is there and it is the
    /// first one: the server never sent that PING, so the caller can leave it out.
    pub fn read(&mut self, bytes: &[u8]) -> Option<std::ops::Range<usize>> {
        self.read_each(bytes, |_, _| {})
    }

    /// [`IncomingFrames::read`], handing `on_header` each frame header completed in `bytes`
    /// and whether it opens a new stream (HEADERS on an odd id above every earlier one).
    pub fn read_each(
        &mut self,
        bytes: &[u8],
        mut on_header: impl FnMut(&FrameHeader, bool),
    ) -> Option<std::ops::Range<usize>> {
        let mut at = bytes.len().min(self.preface_left);
        self.preface_left -= at;
        let mut ack = None;
        // Where the current frame started, if it started in `bytes`.
        let mut frame_start = None;
        while at < bytes.len() {
            if self.cursor.at_boundary() {
                frame_start = Some(at);
            }
            let rest = &bytes[at..];
            let n = match self.cursor.advance(rest) {
                Step::Header(n) => n,
                Step::HeaderDone(n, header) => {
                    let opens = header.kind == TYPE_HEADERS
                        && header.stream_id % 2 == 1
                        && header.stream_id > self.highest_stream_id;
                    self.frame_started(header);
                    on_header(&header, opens);
                    n
                }
                Step::Payload { n, offset } => {
                    if self.payload(&rest[..n], offset) {
                        ack = frame_start.map(|start| start..at + n);
                    }
                    n
                }
            };
            at += n;
        }
        ack
    }

    fn frame_started(&mut self, header: FrameHeader) {
        // Client-initiated streams have odd ids; HEADERS on an open stream (trailers) leaves
        // the maximum as it is.
        if header.kind == TYPE_HEADERS && header.stream_id % 2 == 1 {
            self.highest_stream_id = self.highest_stream_id.max(header.stream_id);
        }
        let is_ack = header.kind == TYPE_PING && header.flags & FLAG_ACK != 0;
        self.current = (is_ack && header.length == 8).then_some(header);
    }

    /// Whether these payload bytes end the first acknowledgement of the GOAWAY's PING.
    fn payload(&mut self, bytes: &[u8], offset: usize) -> bool {
        if self.current.is_none() {
            return false;
        }
        self.ping_payload[offset..offset + bytes.len()].copy_from_slice(bytes);
        if offset + bytes.len() < 8 {
            return false;
        }
        self.current = None;
        let first = self.ping_payload == GOAWAY_PING_PAYLOAD && !self.goaway_ping_acked;
        self.goaway_ping_acked |= first;
        first
    }

    /// The highest id of a stream the client has opened (0 before the first).
    #[must_use]
    pub fn highest_stream_id(&self) -> u32 {
        self.highest_stream_id
    }

    /// Whether the client has acknowledged the PING of [`goaway_ping_frame`].
    #[must_use]
    pub fn goaway_ping_acked(&self) -> bool {
        self.goaway_ping_acked
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A frame: its header, then `payload`.
    pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn incoming_tracks_highest_client_stream_and_ping_ack_in_any_split() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[0; 6]));
        bytes.extend(frame(TYPE_HEADERS, 0x4, 5, &[1, 2, 3]));
        bytes.extend(frame(0x0, 0, 5, &[7; 70_000]));
        bytes.extend(frame(TYPE_HEADERS, 0x5, 3, &[1]));
        bytes.extend(frame(TYPE_PING, FLAG_ACK, 0, &GOAWAY_PING_PAYLOAD));
        for split in [1, 2, 7, 9, 10, 17, 4096] {
            let mut incoming = IncomingFrames::default();
            for chunk in bytes.chunks(split) {
                incoming.read(chunk);
            }
            assert_eq!(incoming.highest_stream_id(), 5, "split {split}");
            assert!(incoming.goaway_ping_acked(), "split {split}");
        }
    }

    #[test]
    fn a_whole_ack_in_one_read_is_located() {
        let mut incoming = IncomingFrames::default();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(TYPE_HEADERS, 0x5, 1, &[1]));
        let start = bytes.len();
        bytes.extend(frame(TYPE_PING, FLAG_ACK, 0, &GOAWAY_PING_PAYLOAD));
        bytes.extend(frame(TYPE_HEADERS, 0x5, 3, &[1]));
        assert_eq!(
            incoming.read(&bytes),
            Some(start..start + CONTROL_FRAME_LEN)
        );
        // Split over two reads: acknowledged, but not located.
        let mut split = IncomingFrames::default();
        assert_eq!(split.read(&bytes[..start + 4]), None);
        assert_eq!(split.read(&bytes[start + 4..]), None);
        assert!(split.goaway_ping_acked());
    }

    #[test]
    fn a_ping_from_the_client_or_another_ack_is_not_the_goaway_ack() {
        let mut incoming = IncomingFrames::default();
        incoming.read(PREFACE);
        incoming.read(&frame(TYPE_PING, 0, 0, &GOAWAY_PING_PAYLOAD));
        incoming.read(&frame(TYPE_PING, FLAG_ACK, 0, &[0; 8]));
        assert!(!incoming.goaway_ping_acked());
    }

    #[test]
    fn outgoing_knows_the_boundary() {
        let mut out = OutgoingFrames::default();
        assert!(
            !out.at_boundary(),
            "nothing goes before the server's first frame"
        );
        assert_eq!(out.bytes_to_next_boundary(), 9);
        let f = frame(0x0, 0, 1, &[0; 20]);
        out.wrote(&f[..4]);
        assert_eq!(out.bytes_to_next_boundary(), 5);
        out.wrote(&f[4..9]);
        assert_eq!(out.bytes_to_next_boundary(), 20);
        out.wrote(&f[9..]);
        assert!(out.at_boundary());
        assert_eq!(goaway_frame(81)[9..13], 81u32.to_be_bytes());
    }
}
