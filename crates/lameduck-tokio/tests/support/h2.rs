//! Raw HTTP/2 for the driver's tests: a client that writes frames by hand (so that it can stay
//! silent where a real client would answer), and a reader of the server's frames.

use std::time::Duration;

use tokio::io::{AsyncReadExt, DuplexStream};

pub const GOAWAY: u8 = 0x7;
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PING: u8 = 0x6;
pub const WINDOW_UPDATE: u8 = 0x8;

/// The client preface and an empty SETTINGS frame.
pub const H2_START: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A HEADERS frame (END_STREAM, END_HEADERS) on `stream` for `GET http://x/`, HPACK-encoded
/// with the static table (`:method GET`, `:scheme http`, `:path /`) and a literal
/// `:authority x`.
pub fn get_frame(stream: u8) -> Vec<u8> {
    let block = [0x82, 0x86, 0x84, 0x01, 0x01, b'x'];
    let mut frame = vec![0, 0, block.len() as u8, HEADERS, 0x5, 0, 0, 0, stream];
    frame.extend_from_slice(&block);
    frame
}

/// The frames in `bytes` as (type, stream, payload).
pub fn frames(mut bytes: &[u8]) -> Vec<(u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        if bytes.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes([bytes[5] & 0x7f, bytes[6], bytes[7], bytes[8]]);
        out.push((bytes[3], stream, bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    out
}

/// Reads frames until `done` says so (bounded by 5 virtual seconds); all bytes read.
pub async fn read_frames_until(
    client: &mut DuplexStream,
    bytes: &mut Vec<u8>,
    done: impl Fn(&[(u8, u32, Vec<u8>)]) -> bool,
) {
    let mut buf = vec![0u8; 4096];
    while !done(&frames(bytes)) {
        let n = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the server sent nothing more")
            .unwrap();
        assert!(n > 0, "closed; frames {:?}", frames(bytes));
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// Whether stream `stream` was answered 200 with the body `ok` in `bytes`.
pub fn answered_ok(frames: &[(u8, u32, Vec<u8>)], stream: u32) -> bool {
    frames
        .iter()
        .any(|(t, s, p)| *t == DATA && *s == stream && p.as_slice() == b"ok")
}

/// The first byte of stream `stream`'s response header block (HPACK's static entry 8,
/// `0x88`, is `:status 200`).
pub fn status_byte(bytes: &[u8], stream: u32) -> Option<u8> {
    frames(bytes)
        .into_iter()
        .find(|(t, s, _)| *t == HEADERS && *s == stream)
        .map(|(_, _, p)| p[0])
}
