//! HTTP/2 by hand: frames written byte by byte (so that a client can stay silent where a real
//! one would answer: never acknowledge a PING, never read again) and the server's frames read
//! back.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The DATA frame type.
pub const DATA: u8 = 0x0;
/// The HEADERS frame type.
pub const HEADERS: u8 = 0x1;
/// The RST_STREAM frame type.
pub const RST_STREAM: u8 = 0x3;
/// The SETTINGS frame type.
pub const SETTINGS: u8 = 0x4;
/// The PING frame type.
pub const PING: u8 = 0x6;
/// The GOAWAY frame type.
pub const GOAWAY: u8 = 0x7;
/// The WINDOW_UPDATE frame type.
pub const WINDOW_UPDATE: u8 = 0x8;
/// The END_STREAM flag of DATA and HEADERS frames.
pub const END_STREAM: u8 = 0x1;
/// The ACK flag of PING and SETTINGS frames.
pub const ACK: u8 = 0x1;

/// The length of a frame's header.
const HEADER: usize = 9;

/// The client preface and an empty SETTINGS frame.
pub const H2_START: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A frame of type `kind` with `flags` on `stream`, carrying `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HEADERS frame (END_STREAM, END_HEADERS) on `stream` for `GET http://x{path}`,
/// HPACK-encoded with the static table (`:method GET`, `:scheme http`, and `:path /` when
/// `path` is `/`) and literals for the other `:path`s and for `:authority x`.
pub fn get_frame(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    if path == "/" {
        block.push(0x84);
    } else {
        block.extend_from_slice(&[0x04, path.len() as u8]);
        block.extend_from_slice(path.as_bytes());
    }
    block.extend_from_slice(&[0x01, 0x01, b'x']);
    frame(HEADERS, 0x5, stream, &block)
}

/// A PING acknowledgement of `payload`.
pub fn ping_ack(payload: &[u8]) -> Vec<u8> {
    frame(PING, ACK, 0, payload)
}

/// One frame read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Where the frame starts in the bytes it was read from.
    pub at: usize,
    /// Its type.
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// Its stream (the reserved bit cleared).
    pub stream: u32,
    /// Its payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// Where the next frame starts.
    pub fn end(&self) -> usize {
        self.at + HEADER + self.payload.len()
    }
}

/// The whole frames at the start of `bytes` (an incomplete one at the end left out).
pub fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(h) = bytes.get(at..at + HEADER) {
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let Some(payload) = bytes.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        out.push(Frame {
            at,
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]),
            payload: payload.to_vec(),
        });
        at += HEADER + len;
    }
    out
}

/// The frames of `bytes`; `None` unless `bytes` ends at a frame boundary.
pub fn exact_frames(bytes: &[u8]) -> Option<Vec<Frame>> {
    let frames = frames(bytes);
    let end = frames.last().map_or(0, Frame::end);
    (end == bytes.len()).then_some(frames)
}

/// The last-stream-ids of the GOAWAY frames among `frames`, in order.
pub fn goaway_ids(frames: &[Frame]) -> Vec<u32> {
    frames
        .iter()
        .filter(|f| f.kind == GOAWAY)
        .map(|f| {
            u32::from_be_bytes([
                f.payload[0] & 0x7f,
                f.payload[1],
                f.payload[2],
                f.payload[3],
            ])
        })
        .collect()
}

/// Whether the server ended its response on `stream` among `frames` (a DATA or HEADERS frame
/// with END_STREAM).
pub fn answered(frames: &[Frame], stream: u32) -> bool {
    frames.iter().any(|f| {
        f.stream == stream && (f.kind == DATA || f.kind == HEADERS) && f.flags & END_STREAM != 0
    })
}

/// Whether `stream` got the body `ok` among `frames` (in one DATA frame).
pub fn answered_ok(frames: &[Frame], stream: u32) -> bool {
    frames
        .iter()
        .any(|f| f.kind == DATA && f.stream == stream && f.payload.as_slice() == b"ok")
}

/// The first byte of stream `stream`'s response header block in `bytes` (HPACK's static
/// entry 8, `0x88`, is `:status 200`).
pub fn status_byte(bytes: &[u8], stream: u32) -> Option<u8> {
    frames(bytes)
        .into_iter()
        .find(|f| f.kind == HEADERS && f.stream == stream)
        .map(|f| f.payload[0])
}

/// Reads the server's bytes into `bytes` until `done` says so (`true`), or the server closes
/// the connection (`false`); panics if that takes longer than `within`.
pub async fn read_until(
    conn: &mut (impl AsyncRead + Unpin),
    bytes: &mut Vec<u8>,
    within: Duration,
    done: impl Fn(&[Frame]) -> bool,
) -> bool {
    let mut buf = vec![0u8; 16 * 1024];
    tokio::time::timeout(within, async {
        while !done(&frames(bytes)) {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await
    .expect("the server answered in time")
}

/// Reads the server's bytes into `bytes` until `done` says so; panics if the server closes
/// the connection first, or sends nothing for 5 seconds of tokio's clock.
pub async fn read_frames_until(
    conn: &mut (impl AsyncRead + Unpin),
    bytes: &mut Vec<u8>,
    done: impl Fn(&[Frame]) -> bool,
) {
    let mut buf = vec![0u8; 4096];
    while !done(&frames(bytes)) {
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("the server sent nothing more")
            .unwrap();
        assert!(n > 0, "closed; frames {:?}", frames(bytes));
        bytes.extend_from_slice(&buf[..n]);
    }
}
