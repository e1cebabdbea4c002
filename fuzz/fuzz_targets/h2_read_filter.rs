//! Feeds arbitrary client bytes to the HTTP/2 read filter (`IgnoredStreamFilter`) and to the
//! I/O around it (`Http2Io`), in arbitrary reads, and checks both against a reference model.
//!
//! The model reads the whole stream at once: the first 24 bytes (the preface, or whatever
//! came) pass as they are, then each frame passes whole except each WINDOW_UPDATE (type 0x8)
//! on a stream id above the final GOAWAY's last-stream-id. That id is known once the client
//! acknowledges h2's shutdown PING (a PING with the ACK flag, length 8 and payload
//! `H2_SHUTDOWN_PING_PAYLOAD`; only the first such acknowledgement counts): the highest odd
//! stream id the client opened with HEADERS before it. A frame cut short by the end of the
//! stream is kept or left out as a whole one would be; an incomplete header at the end passes.
//!
//! Checked: for any split of the bytes into reads, the filter's output is the model's, and
//! what it gives back unread is never more than an incomplete frame header. `Http2Io`, over a
//! reader that gives the same bytes in the same arbitrary reads (and `Pending` in between),
//! read through buffers of arbitrary sizes, gives the model's output, then the end of the
//! stream, again at every read after it. When the connection's task asks it (at an arbitrary
//! read) to acknowledge the PING in the client's stead, it hands on that acknowledgement at
//! the first frame boundary of the client's bytes where a read (or the stream) ended from
//! then on, unless the client's own came first: its output is then the model's for the
//! client's bytes with the acknowledgement inserted there, and the task is told it was read
//! exactly when one was. Neither panics nor loops.
#![no_main]

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use arbitrary::Arbitrary;
use hyper::rt::{Read, ReadBuf, ReadBufCursor};
use lameduck_hyper::adapter::h2_frames::PREFACE;
use lameduck_hyper::fuzzing::{Http2Io, Http2Watch, IgnoredStreamFilter, H2_SHUTDOWN_PING_PAYLOAD};
use libfuzzer_sys::fuzz_target;

const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const WINDOW_UPDATE: u8 = 0x8;
const ACK: u8 = 0x1;

/// A stream id: mostly small ones (so that they meet), sometimes any 32 bits (the reserved
/// bit included).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Id {
    Small(u8),
    Any(u32),
}

impl Id {
    fn get(self) -> u32 {
        match self {
            Id::Small(n) => u32::from(n % 16),
            Id::Any(n) => n,
        }
    }
}

/// One frame of the client's, or bytes that are no frame.
#[derive(Arbitrary, Debug)]
enum Frame {
    /// The acknowledgement of h2's shutdown PING.
    ShutdownAck {
        stream: Id,
    },
    /// Another PING: an acknowledgement with another payload, or a PING with h2's payload
    /// that is no acknowledgement.
    Ping {
        flags: u8,
        payload: [u8; 8],
    },
    /// h2's payload in a PING acknowledgement of another length.
    AckOfLength {
        len: u8,
    },
    Headers {
        stream: Id,
        flags: u8,
        len: u8,
    },
    WindowUpdate {
        stream: Id,
        increment: u32,
    },
    Data {
        stream: Id,
        len: u16,
    },
    /// Any frame.
    Other {
        kind: u8,
        flags: u8,
        stream: Id,
        payload: Vec<u8>,
    },
    /// A header whose length is more than what follows (up to the end of the stream).
    Oversized {
        kind: u8,
        stream: Id,
        len: u32,
        payload: Vec<u8>,
    },
    /// Bytes that need not be a frame.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Structured {
    preface: bool,
    frames: Vec<Frame>,
}

#[derive(Arbitrary, Debug)]
enum Bytes {
    Structured(Structured),
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    bytes: Bytes,
    /// The sizes of the reads, in turn (again from the first when they run out).
    reads: Vec<u16>,
    /// The sizes of the buffers `Http2Io` is read through, in turn.
    buffers: Vec<u16>,
    /// After this many reads through `Http2Io`, the connection's task asks it to acknowledge
    /// the shutdown PING in the client's stead.
    force_after: Option<u8>,
}

fn push_frame(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = len.min(0xff_ffff);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

fn encode(input: &Structured) -> Vec<u8> {
    let mut out = Vec::new();
    if input.preface {
        out.extend_from_slice(PREFACE);
    }
    for frame in &input.frames {
        match frame {
            Frame::ShutdownAck { stream } => {
                let stream = if stream.get() % 4 == 0 {
                    0
                } else {
                    stream.get()
                };
                push_frame(&mut out, 8, PING, ACK, stream, &H2_SHUTDOWN_PING_PAYLOAD);
            }
            Frame::Ping { flags, payload } => push_frame(&mut out, 8, PING, *flags, 0, payload),
            Frame::AckOfLength { len } => {
                let len = usize::from(*len % 24);
                let payload: Vec<u8> = H2_SHUTDOWN_PING_PAYLOAD
                    .iter()
                    .copied()
                    .cycle()
                    .take(len)
                    .collect();
                push_frame(&mut out, len, PING, ACK, 0, &payload);
            }
            Frame::Headers { stream, flags, len } => {
                let payload = vec![0x82; usize::from(*len)];
                push_frame(
                    &mut out,
                    payload.len(),
                    HEADERS,
                    *flags,
                    stream.get(),
                    &payload,
                );
            }
            Frame::WindowUpdate { stream, increment } => {
                let payload = increment.to_be_bytes();
                push_frame(&mut out, 4, WINDOW_UPDATE, 0, stream.get(), &payload);
            }
            Frame::Data { stream, len } => {
                let payload = vec![0xd; usize::from(*len % 20_000)];
                push_frame(&mut out, payload.len(), 0x0, 0, stream.get(), &payload);
            }
            Frame::Other {
                kind,
                flags,
                stream,
                payload,
            } => {
                push_frame(
                    &mut out,
                    payload.len(),
                    *kind,
                    *flags,
                    stream.get(),
                    payload,
                );
            }
            Frame::Oversized {
                kind,
                stream,
                len,
                payload,
            } => {
                let len = (*len as usize & 0xff_ffff).max(payload.len() + 1);
                push_frame(&mut out, len, *kind, 0, stream.get(), payload);
            }
            Frame::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
    out
}

/// The reference model: the whole stream at once.
fn reference(bytes: &[u8]) -> Vec<u8> {
    let preface = bytes.len().min(PREFACE.len());
    let mut out = bytes[..preface].to_vec();
    let mut at = preface;
    let mut highest_opened = 0u32;
    let mut last_stream_id: Option<u32> = None;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < 9 {
            out.extend_from_slice(rest);
            break;
        }
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let frame = &rest[..rest.len().min(9 + len)];
        if kind == HEADERS && stream % 2 == 1 {
            highest_opened = highest_opened.max(stream);
        }
        let is_shutdown_ack = kind == PING
            && flags & ACK != 0
            && len == 8
            && frame.len() == 17
            && frame[9..] == H2_SHUTDOWN_PING_PAYLOAD;
        if is_shutdown_ack && last_stream_id.is_none() {
            last_stream_id = Some(highest_opened);
        }
        let left_out = kind == WINDOW_UPDATE && last_stream_id.is_some_and(|last| stream > last);
        if !left_out {
            out.extend_from_slice(frame);
        }
        at += frame.len();
    }
    out
}

fn size(sizes: &[u16], i: usize, default: usize) -> usize {
    if sizes.is_empty() {
        default
    } else {
        usize::from(sizes[i % sizes.len()])
    }
}

/// The filter driven as `Http2Io` drives it, the bytes split by `reads`.
fn filtered(bytes: &[u8], reads: &[u16]) -> Vec<u8> {
    let mut filter = IgnoredStreamFilter::default();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let (mut at, mut i, mut empty) = (0, 0, false);
    while at < bytes.len() {
        // An empty read is followed by one that is not, so that the bytes run out.
        let n = size(reads, i, 4096)
            .max(usize::from(empty))
            .min(bytes.len() - at);
        empty = n == 0;
        i += 1;
        pending.extend_from_slice(&bytes[at..at + n]);
        at += n;
        let (kept, unread) = filter.filter(&mut pending);
        assert!(
            kept <= unread && unread <= pending.len(),
            "{kept} kept, {unread} unread of {}",
            pending.len()
        );
        assert!(
            pending.len() - unread < 9,
            "more than a frame header left unread"
        );
        out.extend_from_slice(&pending[..kept]);
        pending.drain(..unread);
    }
    out.extend_from_slice(&pending);
    out
}

/// Gives its bytes in reads of the given sizes; a size of 0 is a `Pending` read. Notes where
/// each read ended.
struct Reads<'a> {
    bytes: &'a [u8],
    given: usize,
    sizes: &'a [u16],
    next: usize,
    /// The last read was `Pending`: this one is not.
    pending: bool,
    ends: Rc<RefCell<Vec<usize>>>,
}

impl Read for Reads<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let size = size(this.sizes, this.next, 4096);
        this.next += 1;
        let rest = &this.bytes[this.given..];
        if size == 0 && !this.pending && !rest.is_empty() {
            this.pending = true;
            return Poll::Pending;
        }
        this.pending = false;
        let n = size.max(1).min(buf.remaining()).min(rest.len());
        buf.put_slice(&rest[..n]);
        this.given += n;
        this.ends.borrow_mut().push(this.given);
        Poll::Ready(Ok(()))
    }
}

/// What came out of `Http2Io`.
struct Output {
    out: Vec<u8>,
    ack_read: bool,
    /// Where the reads ended, and how many bytes had been read when the task forced the
    /// acknowledgement, if it did.
    ends: Vec<usize>,
    forced_at: Option<usize>,
}

fn through_io(bytes: &[u8], input: &Input) -> Output {
    let ends = Rc::new(RefCell::new(Vec::new()));
    let reads = Reads {
        bytes,
        given: 0,
        sizes: &input.reads,
        next: 0,
        pending: false,
        ends: Rc::clone(&ends),
    };
    let watch = Http2Watch::default();
    let mut io = Http2Io::new(reads, &watch);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    let mut raw = vec![0u8; 1 << 16];
    let mut forced_at = None;
    let budget = 4 * (bytes.len() + input.reads.len() + 10);
    let mut ended = false;
    for i in 0..budget {
        // (Not after the end of the stream: h2 reads no more then.)
        if !ended && input.force_after.map(usize::from) == Some(i) {
            watch.force_ack();
            forced_at = Some(ends.borrow().last().copied().unwrap_or(0));
        }
        let cap = size(&input.buffers, i, 1000).max(1);
        let mut buf = ReadBuf::new(&mut raw[..cap]);
        match Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) {
            Poll::Pending => continue,
            Poll::Ready(Err(e)) => panic!("read error: {e}"),
            Poll::Ready(Ok(())) => {}
        }
        let got = buf.filled();
        if ended {
            assert!(got.is_empty(), "bytes after the end of the stream");
            let ends = ends.borrow().clone();
            return Output {
                out,
                ack_read: watch.ack_read(),
                ends,
                forced_at,
            };
        }
        ended = got.is_empty();
        out.extend_from_slice(got);
    }
    panic!(
        "no end of the stream after {budget} reads ({} bytes given)",
        out.len()
    );
}

/// The acknowledgement of h2's shutdown PING.
fn shutdown_ack() -> Vec<u8> {
    let mut ack = Vec::new();
    push_frame(&mut ack, 8, PING, ACK, 0, &H2_SHUTDOWN_PING_PAYLOAD);
    ack
}

/// Where frames end in `bytes` (the end of the preface included), and where the first
/// acknowledgement of h2's shutdown PING ends, if one does.
fn boundaries(bytes: &[u8]) -> (Vec<usize>, Option<usize>) {
    let mut at = PREFACE.len();
    let mut ends = Vec::new();
    let mut ack = None;
    while at <= bytes.len() {
        ends.push(at);
        let Some(h) = bytes.get(at..at + 9) else {
            break;
        };
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let frame = &bytes[at..bytes.len().min(at + 9 + len)];
        if h[3] == PING
            && h[4] & ACK != 0
            && len == 8
            && frame.get(9..) == Some(&H2_SHUTDOWN_PING_PAYLOAD[..])
        {
            ack = ack.or(Some(at + 17));
        }
        at += 9 + len;
    }
    (ends, ack)
}

fuzz_target!(|input: Input| {
    let bytes = match &input.bytes {
        Bytes::Structured(s) => encode(s),
        Bytes::Raw(raw) => raw.clone(),
    };
    let expected = reference(&bytes);
    assert_eq!(filtered(&bytes, &input.reads), expected, "filter");
    // `Http2Io` sees what it reads, whatever a frame says.
    let read = through_io(&bytes, &input);
    let (frame_ends, client_ack) = boundaries(&bytes);
    // Forced, the I/O acknowledges at the first frame boundary where a read ended (or the
    // stream did) once the task asked, unless the client's own acknowledgement came first.
    let inserted = read.forced_at.and_then(|forced| {
        let at = read
            .ends
            .iter()
            .chain([&bytes.len()])
            .copied()
            .filter(|&end| end >= forced && frame_ends.contains(&end))
            .min()?;
        client_ack.is_none_or(|ack| ack > at).then_some(at)
    });
    let expected = match inserted {
        None => expected,
        Some(at) => reference(&[&bytes[..at], &shutdown_ack(), &bytes[at..]].concat()),
    };
    assert_eq!(
        read.out, expected,
        "Http2Io (acknowledgement inserted at {inserted:?})"
    );
    assert_eq!(
        read.ack_read,
        inserted.is_some() || client_ack.is_some(),
        "the acknowledgement read"
    );
});
