//! Drives actix's GOAWAY writer (`GoawayIo`) through arbitrary server writes, client reads,
//! flushes, GOAWAY requests and broadcast announcements, over an inner I/O that takes
//! arbitrary parts of each write and gives the client's bytes in arbitrary reads (`Pending`
//! now and then).
//!
//! The server's bytes are frames (well-formed or not) and raw bytes, offered in arbitrary
//! pieces; the client's are the preface (or not), then frames, among them acknowledgements of
//! the GOAWAY's PING (payload `GOAWAY_PING_PAYLOAD`) and of other PINGs. At the end the inner
//! I/O takes everything and the server flushes twice. Checked:
//!
//! - every write's result is at most what was offered, never 0 for something offered, and is
//!   exactly the number of the server's bytes that reached the inner I/O during it;
//! - what reaches the inner I/O is the server's bytes with 17-byte control frames inserted:
//!   removing them gives back exactly what the writes accepted;
//! - the inserted frames are GOAWAY with last-stream-id `0x7fffffff` and the PING, together,
//!   then at most one final GOAWAY; each written whole at one frame boundary of the server's
//!   bytes (never inside a frame, never before the server's first frame is complete);
//! - the first GOAWAY comes after the first request or announcement, at the first frame
//!   boundary the server's bytes reached from there (once they reach it); the final one only
//!   once the client's acknowledgement was read, at the first boundary after it when the
//!   PING had been sent by then; its last-stream-id is the highest odd stream id the client
//!   opened with HEADERS before the acknowledgement, or one opened after it and read by then
//!   (a client that opens streams after acknowledging misbehaves);
//! - what the server reads is the client's bytes, less, at most, that acknowledgement (only
//!   the server's own PING's, which the server never sent); a `Pending` read gives nothing,
//!   and the end of the stream comes only when the client's bytes have all been read.
#![no_main]

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use arbitrary::Arbitrary;
use lameduck_actix::{GoawayBroadcast, GoawayIo};
use lameduck_hyper::adapter::h2_frames::{
    goaway_frame, goaway_ping_frame, CONTROL_FRAME_LEN, GOAWAY_PING_PAYLOAD, MAX_STREAM_ID, PREFACE,
};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const MAX_OPS: usize = 400;

#[derive(Arbitrary, Debug)]
enum Frame {
    Settings {
        len: u8,
    },
    Headers {
        stream: u8,
        len: u8,
    },
    Data {
        stream: u8,
        len: u16,
    },
    WindowUpdate {
        stream: u8,
    },
    Goaway {
        last: u32,
    },
    Ping {
        flags: u8,
        payload: [u8; 8],
    },
    /// The acknowledgement of the GOAWAY's PING.
    GoawayAck {
        stream: u8,
    },
    Any {
        kind: u8,
        flags: u8,
        stream: u32,
        payload: Vec<u8>,
    },
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// The server writes up to this many of its next bytes.
    Write(u16),
    /// The server reads into a buffer of this size.
    Read(u16),
    Flush,
    /// The connection's own GOAWAY request (a response asked to close it).
    Request,
    /// The server's broadcast.
    Announce,
}

#[derive(Arbitrary, Debug)]
struct Input {
    client_preface: bool,
    client: Vec<Frame>,
    server: Vec<Frame>,
    ops: Vec<Op>,
    /// How much of each write the inner I/O takes, in turn (0: `Pending`).
    accepts: Vec<u16>,
    /// The sizes of the inner I/O's reads, in turn (0: `Pending`).
    reads: Vec<u16>,
}

fn push_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len().min(0xff_ffff);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(&payload[..len]);
}

fn encode(frames: &[Frame], out: &mut Vec<u8>) {
    for frame in frames {
        match frame {
            Frame::Settings { len } => {
                push_frame(out, 0x4, 0, 0, &vec![0; usize::from(*len % 8) * 6])
            }
            Frame::Headers { stream, len } => {
                push_frame(
                    out,
                    0x1,
                    0x4,
                    u32::from(*stream % 32),
                    &vec![0x82; usize::from(*len)],
                );
            }
            Frame::Data { stream, len } => {
                push_frame(
                    out,
                    0x0,
                    0,
                    u32::from(*stream % 32),
                    &vec![7; usize::from(*len % 20_000)],
                );
            }
            Frame::WindowUpdate { stream } => {
                push_frame(out, 0x8, 0, u32::from(*stream % 32), &[0, 1, 0, 0])
            }
            Frame::Goaway { last } => out.extend_from_slice(&goaway_frame(*last)),
            Frame::Ping { flags, payload } => push_frame(out, 0x6, *flags, 0, payload),
            Frame::GoawayAck { stream } => {
                let stream = if stream % 4 == 0 {
                    u32::from(*stream)
                } else {
                    0
                };
                push_frame(out, 0x6, 0x1, stream, &GOAWAY_PING_PAYLOAD);
            }
            Frame::Any {
                kind,
                flags,
                stream,
                payload,
            } => push_frame(out, *kind, *flags, *stream, payload),
            Frame::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
}

fn header(bytes: &[u8]) -> (usize, u8, u8, u32) {
    let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
    let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & MAX_STREAM_ID;
    (len, bytes[3], bytes[4], stream)
}

/// Where the server's frames end (the boundaries a frame may be inserted at).
fn frame_ends(bytes: &[u8]) -> Vec<usize> {
    let (mut at, mut ends) = (0, Vec::new());
    while let Some(h) = bytes.get(at..at + 9) {
        at += 9 + header(h).0;
        if at > bytes.len() {
            break;
        }
        ends.push(at);
    }
    ends
}

/// The client's frames: where each header ends and the odd stream id a HEADERS opens; and
/// where the first acknowledgement of the GOAWAY's PING lies.
struct Client {
    opened: Vec<(usize, u32)>,
    ack: Option<Range<usize>>,
}

impl Client {
    fn parse(bytes: &[u8]) -> Client {
        let mut at = bytes.len().min(PREFACE.len());
        let (mut opened, mut ack) = (Vec::new(), None);
        while let Some(h) = bytes.get(at..at + 9) {
            let (len, kind, flags, stream) = header(h);
            if kind == 0x1 && stream % 2 == 1 {
                opened.push((at + 9, stream));
            }
            let payload = bytes.get(at + 9..at + 9 + len);
            if ack.is_none()
                && kind == 0x6
                && flags & 0x1 != 0
                && payload == Some(&GOAWAY_PING_PAYLOAD[..])
            {
                ack = Some(at..at + 9 + len);
            }
            at += 9 + len;
        }
        Client { opened, ack }
    }

    /// The highest stream opened in the first `read` bytes.
    fn highest(&self, read: usize) -> u32 {
        self.opened
            .iter()
            .filter(|(end, _)| *end <= read)
            .map(|&(_, id)| id)
            .max()
            .unwrap_or(0)
    }
}

/// A piece of a write the inner I/O took: inserted (not from the server's buffer) or not, at
/// which position of the server's bytes, during which op.
struct Piece {
    inserted: bool,
    at: usize,
    op: usize,
    /// The client's bytes read by then.
    given: usize,
    bytes: Vec<u8>,
}

/// The inner I/O.
struct Inner {
    client: Vec<u8>,
    given: usize,
    reads: Vec<u16>,
    accepts: Vec<u16>,
    next_read: usize,
    next_accept: usize,
    /// The last read (write) was `Pending`: the next one is not.
    read_pending: bool,
    write_pending: bool,
    /// At the end: takes everything.
    take_all: bool,
    /// The addresses of the server's buffer in the current write.
    server_buf: Range<usize>,
    server_written: usize,
    op: usize,
    pieces: Vec<Piece>,
}

fn size(sizes: &[u16], i: &mut usize) -> usize {
    *i += 1;
    if sizes.is_empty() {
        4096
    } else {
        usize::from(sizes[(*i - 1) % sizes.len()])
    }
}

impl AsyncRead for Inner {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let size = size(&this.reads, &mut this.next_read);
        if size == 0 && !this.read_pending {
            this.read_pending = true;
            return Poll::Pending;
        }
        this.read_pending = false;
        let n = size
            .max(1)
            .min(buf.remaining())
            .min(this.client.len() - this.given);
        buf.put_slice(&this.client[this.given..this.given + n]);
        this.given += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Inner {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        assert!(!data.is_empty(), "an empty write");
        let size = if this.take_all {
            data.len()
        } else {
            size(&this.accepts, &mut this.next_accept)
        };
        if size == 0 && !this.write_pending {
            this.write_pending = true;
            return Poll::Pending;
        }
        this.write_pending = false;
        let n = size.max(1).min(data.len());
        let address = data.as_ptr() as usize;
        let inserted = !this.server_buf.contains(&address);
        if !inserted {
            assert_eq!(
                address,
                this.server_buf.start + this.server_written_now(),
                "server bytes out of order"
            );
        }
        let at = this.server_written;
        this.pieces.push(Piece {
            inserted,
            at,
            op: this.op,
            given: this.given,
            bytes: data[..n].to_vec(),
        });
        if !inserted {
            this.server_written += n;
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Inner {
    /// The server's bytes taken during the current write.
    fn server_written_now(&self) -> usize {
        self.pieces
            .iter()
            .rev()
            .take_while(|p| p.op == self.op)
            .filter(|p| !p.inserted)
            .map(|p| p.bytes.len())
            .sum()
    }
}

fuzz_target!(|input: Input| {
    let mut client = if input.client_preface {
        PREFACE.to_vec()
    } else {
        Vec::new()
    };
    encode(&input.client, &mut client);
    let mut server = Vec::new();
    encode(&input.server, &mut server);
    let parsed = Client::parse(&client);
    let inner = Inner {
        client: client.clone(),
        given: 0,
        reads: input.reads.clone(),
        accepts: input.accepts.clone(),
        next_read: 0,
        next_accept: 0,
        read_pending: false,
        write_pending: false,
        take_all: false,
        server_buf: 0..0,
        server_written: 0,
        op: 0,
        pieces: Vec::new(),
    };
    let broadcast = Arc::new(GoawayBroadcast::default());
    let mut io = GoawayIo::new(inner, Arc::clone(&broadcast));
    let mut cx = Context::from_waker(Waker::noop());
    let (mut pos, mut read) = (0, Vec::new());
    // The first request's op and the server's position then; the op that read the ack.
    let mut requested: Option<(usize, usize)> = None;
    let mut ack_read: Option<(usize, usize)> = None;
    let mut ended = false;
    let mut raw = vec![0u8; 1 << 16];
    let ops = input
        .ops
        .iter()
        .take(MAX_OPS)
        .chain([&Op::Flush, &Op::Flush]);
    for (i, op) in ops.enumerate() {
        let last_flushes = i >= input.ops.len().min(MAX_OPS);
        let inner = io.get_mut();
        inner.op = i;
        inner.take_all = last_flushes;
        match *op {
            Op::Write(len) if pos < server.len() => {
                let offered = &server[pos..server.len().min(pos + usize::from(len).max(1))];
                let start = offered.as_ptr() as usize;
                io.get_mut().server_buf = start..start + offered.len();
                let result = Pin::new(&mut io).poll_write(&mut cx, offered);
                let taken = io.get_ref().server_written_now();
                match result {
                    Poll::Pending => assert_eq!(taken, 0, "Pending after taking server bytes"),
                    Poll::Ready(Ok(n)) => {
                        assert!(
                            n > 0 && n <= offered.len(),
                            "wrote {n} of {}",
                            offered.len()
                        );
                        assert_eq!(n, taken, "the result is not what reached the inner I/O");
                        pos += n;
                    }
                    Poll::Ready(Err(e)) => panic!("write error: {e}"),
                }
                io.get_mut().server_buf = 0..0;
            }
            Op::Write(_) => {}
            Op::Read(cap) => {
                let mut buf = ReadBuf::new(&mut raw[..usize::from(cap).max(1)]);
                match Pin::new(&mut io).poll_read(&mut cx, &mut buf) {
                    Poll::Pending => assert!(buf.filled().is_empty(), "Pending after reading"),
                    Poll::Ready(Ok(())) => {
                        assert!(
                            !ended || buf.filled().is_empty(),
                            "bytes after the end of the stream"
                        );
                        ended |= buf.filled().is_empty();
                        read.extend_from_slice(buf.filled());
                    }
                    Poll::Ready(Err(e)) => panic!("read error: {e}"),
                }
                let given = io.get_ref().given;
                assert!(
                    !ended || given == client.len(),
                    "the end of the stream before its end"
                );
                if ack_read.is_none() && parsed.ack.as_ref().is_some_and(|ack| ack.end <= given) {
                    ack_read = Some((i, pos));
                }
            }
            Op::Flush => match Pin::new(&mut io).poll_flush(&mut cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Pending => assert!(!last_flushes, "the last flushes are ready"),
                Poll::Ready(Err(e)) => panic!("flush error: {e}"),
            },
            Op::Request => {
                io.request().request();
                requested.get_or_insert((i, pos));
            }
            Op::Announce => {
                broadcast.announce();
                requested.get_or_insert((i, pos));
            }
        }
    }

    // What the server read: the client's bytes, less at most the acknowledgement.
    let given = io.get_ref().given;
    let mut less = client[..given].to_vec();
    if let Some(ack) = parsed.ack.clone().filter(|ack| ack.end <= given) {
        less.drain(ack);
    }
    assert!(read == client[..given] || read == less, "the bytes read");

    let pieces = &io.get_ref().pieces;
    let written: Vec<u8> = pieces
        .iter()
        .filter(|p| !p.inserted)
        .flat_map(|p| p.bytes.clone())
        .collect();
    assert_eq!(
        written,
        server[..pos],
        "the server's bytes that reached the inner I/O"
    );
    // The inserted bytes, each with the position, op and client bytes read when written.
    let inserted: Vec<(u8, usize, usize, usize)> = pieces
        .iter()
        .filter(|p| p.inserted)
        .flat_map(|p| p.bytes.iter().map(|&b| (b, p.at, p.op, p.given)))
        .collect();
    assert_eq!(
        inserted.len() % CONTROL_FRAME_LEN,
        0,
        "a control frame left incomplete"
    );
    let frames: Vec<(Vec<u8>, usize, usize, usize)> = inserted
        .chunks(CONTROL_FRAME_LEN)
        .map(|f| {
            assert!(
                f.iter().all(|&(_, at, _, _)| at == f[0].1),
                "server bytes inside an inserted frame"
            );
            (f.iter().map(|&(b, ..)| b).collect(), f[0].1, f[0].2, f[0].3)
        })
        .collect();
    assert!(frames.len() <= 3, "{} frames inserted", frames.len());
    let ends = frame_ends(&server);
    let next_end = |from: usize| ends.iter().copied().find(|&end| end >= from);
    for (_, at, ..) in &frames {
        assert!(
            ends.contains(at),
            "a frame inserted at {at}, no frame boundary"
        );
    }

    // The first GOAWAY and its PING, together, at the first boundary after the request.
    let first_due = requested
        .and_then(|(_, at)| next_end(at))
        .filter(|&end| end <= pos);
    match (frames.first(), first_due) {
        (None, None) => {}
        (Some((goaway, at, op, _)), Some(due)) => {
            assert_eq!(goaway[..], goaway_frame(MAX_STREAM_ID), "the first GOAWAY");
            assert_eq!(*at, due, "the first GOAWAY is not at the first boundary");
            assert!(*op > requested.unwrap().0, "GOAWAY before its request");
            let (ping, ping_at, ..) = frames.get(1).expect("the PING after the first GOAWAY");
            assert_eq!(ping[..], goaway_ping_frame(), "the PING");
            assert_eq!(
                ping_at, at,
                "server bytes between the first GOAWAY and its PING"
            );
        }
        (first, due) => panic!("first GOAWAY {first:?}, due at {due:?} (requested {requested:?})"),
    }

    // The final GOAWAY, once the acknowledgement is read.
    let sent_before_ack = frames
        .first()
        .is_some_and(|(_, _, op, _)| ack_read.is_some_and(|(read_op, _)| *op < read_op));
    let final_due = match ack_read {
        Some((_, read_at)) if sent_before_ack => next_end(read_at).filter(|&end| end <= pos),
        _ => None,
    };
    if let Some((goaway, at, op, read_by)) = frames.get(2) {
        let (read_op, _) = ack_read.expect("a final GOAWAY before the acknowledgement");
        assert!(
            *op >= read_op,
            "a final GOAWAY before the acknowledgement was read"
        );
        assert!(*at >= frames[1].1);
        assert_eq!(
            goaway[..9],
            goaway_frame(0)[..9],
            "the final GOAWAY's header"
        );
        assert_eq!(goaway[13..], [0; 4], "the final GOAWAY's error code");
        let last = u32::from_be_bytes([goaway[9], goaway[10], goaway[11], goaway[12]]);
        let ack_end = parsed.ack.as_ref().unwrap().end;
        let before = parsed.highest(ack_end);
        // At most the highest opened in what was read by the time it was written.
        assert!(
            last >= before && last <= parsed.highest(*read_by),
            "last-stream-id {last}, {before} opened before the ack"
        );
        assert!(
            last == 0 || parsed.opened.iter().any(|&(_, id)| id == last),
            "last-stream-id {last} never opened"
        );
        if parsed.highest(client.len()) == before {
            assert_eq!(last, before, "the final GOAWAY's last-stream-id");
        }
        if let Some(due) = final_due {
            assert_eq!(
                *at, due,
                "the final GOAWAY is not at the first boundary after the ack"
            );
        }
    } else {
        assert!(final_due.is_none(), "no final GOAWAY, due at {final_due:?}");
        // Acknowledged and the PING sent: the last flushes say it, at a boundary.
        let acked = ack_read.is_some() && frames.len() == 2;
        assert!(
            !acked || !ends.contains(&pos),
            "no final GOAWAY at the end, at a boundary"
        );
    }
});
