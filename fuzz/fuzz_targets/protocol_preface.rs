//! Tells the protocol of a connection from arbitrary first bytes, read in arbitrary pieces
//! (`ConnIo::poll_protocol`), then reads the connection through the same I/O, as hyper does.
//!
//! Checked: the protocol is HTTP/2 if and only if the stream starts with the whole 24-byte
//! client preface, HTTP/1 otherwise (a stream that ends before the preface is complete
//! included); what is then read through the I/O (the first bytes replayed, then the rest of
//! the stream, through buffers of arbitrary sizes) is exactly the stream, then its end, again
//! at every read after it. An error of the socket reaches the caller. Never panics or loops.
#![no_main]

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use arbitrary::Arbitrary;
use hyper::rt::{Read, ReadBuf, ReadBufCursor};
use lameduck_hyper::adapter::h2_frames::PREFACE;
use lameduck_hyper::fuzzing::{ConnIo, Protocol};
use libfuzzer_sys::fuzz_target;

/// How the stream starts.
#[derive(Arbitrary, Debug)]
enum Start {
    /// The whole preface.
    Preface,
    /// The first bytes of the preface only.
    PrefacePart(u8),
    /// The preface with one byte changed.
    PrefaceChanged { at: u8, byte: u8 },
    /// An HTTP/1 request line.
    Http1,
    /// Nothing in particular.
    Nothing,
}

#[derive(Arbitrary, Debug)]
struct Input {
    start: Start,
    rest: Vec<u8>,
    /// The sizes of the socket's reads, in turn (0: `Pending`).
    reads: Vec<u16>,
    /// The sizes of the buffers hyper reads through, in turn.
    buffers: Vec<u16>,
    /// The socket fails at this read.
    error_at: Option<u8>,
}

/// The stream, read in pieces of the given sizes; a size of 0 is a `Pending` read (never two
/// in a row), and the read `error_at` fails.
struct Socket<'a> {
    bytes: &'a [u8],
    sizes: &'a [u16],
    next: usize,
    pending: bool,
    error_at: Option<usize>,
}

impl Read for Socket<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let i = this.next;
        this.next += 1;
        if this.error_at == Some(i) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        let size = size(this.sizes, i, 4096);
        if size == 0 && !this.pending {
            this.pending = true;
            return Poll::Pending;
        }
        this.pending = false;
        let n = size.max(1).min(buf.remaining()).min(this.bytes.len());
        buf.put_slice(&this.bytes[..n]);
        this.bytes = &this.bytes[n..];
        Poll::Ready(Ok(()))
    }
}

fn size(sizes: &[u16], i: usize, default: usize) -> usize {
    if sizes.is_empty() {
        default
    } else {
        usize::from(sizes[i % sizes.len()])
    }
}

fn stream(input: &Input) -> Vec<u8> {
    let mut bytes = match input.start {
        Start::Preface => PREFACE.to_vec(),
        Start::PrefacePart(n) => PREFACE[..usize::from(n) % PREFACE.len()].to_vec(),
        Start::PrefaceChanged { at, byte } => {
            let mut preface = PREFACE.to_vec();
            preface[usize::from(at) % PREFACE.len()] = byte;
            preface
        }
        Start::Http1 => b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec(),
        Start::Nothing => Vec::new(),
    };
    bytes.extend_from_slice(&input.rest);
    bytes
}

fuzz_target!(|input: Input| {
    let bytes = stream(&input);
    let mut io = ConnIo::new(Socket {
        bytes: &bytes,
        sizes: &input.reads,
        next: 0,
        pending: false,
        error_at: input.error_at.map(usize::from),
    });
    let mut cx = Context::from_waker(Waker::noop());
    let mut budget = 4 * (bytes.len() + input.reads.len() + 10);
    let protocol = loop {
        budget = budget.checked_sub(1).expect("the protocol is never told");
        match io.poll_protocol(&mut cx) {
            Poll::Pending => continue,
            Poll::Ready(Ok(protocol)) => break protocol,
            // The socket failed (only where it was told to).
            Poll::Ready(Err(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
                assert!(input.error_at.is_some());
                return;
            }
        }
    };
    let http2 = bytes.starts_with(PREFACE);
    assert_eq!(protocol == Protocol::Http2, http2, "{protocol:?}");
    let mut out = Vec::new();
    let mut raw = vec![0u8; 1 << 16];
    let mut ended = false;
    for i in 0.. {
        budget = budget.checked_sub(1).expect("the stream never ends");
        let cap = size(&input.buffers, i, 1000).max(1);
        let mut buf = ReadBuf::new(&mut raw[..cap]);
        match Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) {
            Poll::Pending => continue,
            Poll::Ready(Err(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
                assert!(
                    bytes.starts_with(&out),
                    "bytes read before an error are the stream's"
                );
                return;
            }
            Poll::Ready(Ok(())) => {}
        }
        let got = buf.filled();
        if ended {
            assert!(got.is_empty(), "bytes after the end of the stream");
            break;
        }
        ended = got.is_empty();
        out.extend_from_slice(got);
    }
    assert_eq!(out, bytes, "the bytes read through the I/O");
});
