//! The GOAWAY-watching I/O wrapper at the frame level, without sockets: a scripted server
//! writes HTTP/2 frames through it (concurrent streams with large DATA frames, SETTINGS,
//! WINDOW_UPDATE, PING, RST_STREAM) in arbitrary pieces into a socket that takes arbitrary
//! pieces and sometimes none, while a scripted client's frames are read in arbitrary pieces.
//! Whatever the splits: the GOAWAY, its PING and the final GOAWAY are each inserted whole
//! between two of the server's frames, every other byte is the server's, unchanged and in
//! order, and the final GOAWAY names the highest stream the client opened. With a lifecycle
//! (tokio's paused clock), a client that never acknowledges the PING gets the final GOAWAY a
//! second after the first, still between two frames, and, once the server ended its streams,
//! the connection is cut a second later and counted.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use lameduck::connection::{CutKind, SILENT_PEER_TIMEOUT};
use lameduck_actix::{GoawayBroadcast, GoawayIo};
use lameduck_hyper::adapter::h2_frames::{
    GOAWAY_PING_PAYLOAD, MAX_STREAM_ID, PREFACE, TYPE_GOAWAY,
};
use proptest::prelude::*;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

// Every case is reproducible from its seed.
use lameduck_test_support::h2::{
    exact_frames, frame, frames, Frame, ACK, DATA, HEADERS, PING, RST_STREAM, SETTINGS,
    WINDOW_UPDATE,
};
use lameduck_test_support::rng::Rng;

/// The server's output: SETTINGS first, then responses on `streams` interleaved with large
/// DATA frames, WINDOW_UPDATEs, PING ACKs, SETTINGS ACKs and RST_STREAMs.
fn server_frames(rng: &mut Rng, streams: u32) -> Vec<u8> {
    let mut out = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
    for stream in (1..=streams).map(|n| 2 * n - 1) {
        out.extend(frame(HEADERS, 0x4, stream, &[0x88]));
        for _ in 0..rng.below(3) {
            let len = [0, 1, 8, 16_384, 70_000][rng.below(5)];
            out.extend(frame(DATA, 0, stream, &vec![stream as u8; len]));
            match rng.below(5) {
                0 => out.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 1, 0, 0])),
                1 => out.extend(frame(PING, ACK, 0, &[9; 8])),
                2 => out.extend(frame(SETTINGS, ACK, 0, &[])),
                3 => out.extend(frame(RST_STREAM, 0, stream, &[0, 0, 0, 8])),
                _ => {}
            }
        }
        out.extend(frame(DATA, 0x1, stream, b"done"));
    }
    out
}

/// The client's frames: the preface, SETTINGS, then `streams` requests interleaved with
/// WINDOW_UPDATEs, PINGs (one with the wrapper's own payload but no ACK flag), DATA and
/// RST_STREAMs.
fn client_frames(rng: &mut Rng, streams: std::ops::Range<u32>) -> Vec<u8> {
    let mut out = Vec::new();
    for stream in streams.map(|n| 2 * n + 1) {
        out.extend(frame(HEADERS, 0x4, stream, &[0x82, 0x86, 0x84]));
        match rng.below(6) {
            0 => out.extend(frame(WINDOW_UPDATE, 0, stream, &[0, 0, 0x40, 0])),
            1 => out.extend(frame(PING, 0, 0, &GOAWAY_PING_PAYLOAD)),
            2 => out.extend(frame(DATA, 0x1, stream, &vec![1; 20_000])),
            3 => out.extend(frame(RST_STREAM, 0, stream, &[0, 0, 0, 8])),
            4 => out.extend(frame(SETTINGS, ACK, 0, &[])),
            _ => {}
        }
    }
    out
}

/// A socket in memory: writes take a random number of bytes (sometimes none: pending, after
/// waking the task), reads give what the client has sent, in random pieces.
struct MemorySocket {
    rng: Rng,
    written: Vec<u8>,
    from_client: VecDeque<u8>,
}

impl AsyncWrite for MemorySocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.rng.below(4) == 0 {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // Mostly a few bytes (partial frame headers), sometimes a lot.
        let most = if self.rng.below(3) == 0 { 20_000 } else { 40 };
        let n = buf.len().min(1 + self.rng.below(most));
        self.written.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for MemorySocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.from_client.is_empty() {
            return Poll::Pending;
        }
        let n = buf
            .remaining()
            .min(self.from_client.len())
            .min(1 + self.rng.below(30));
        let bytes: Vec<u8> = self.from_client.drain(..n).collect();
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}

fn is_inserted(f: &Frame) -> bool {
    f.kind == TYPE_GOAWAY || (f.kind == PING && f.flags == 0 && f.payload == GOAWAY_PING_PAYLOAD)
}

fn goaway_last_stream_id(f: &Frame) -> u32 {
    u32::from_be_bytes([f.payload[0], f.payload[1], f.payload[2], f.payload[3]])
}

/// How the GOAWAY is asked for.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// The listener stops (every connection).
    Broadcast,
    /// One of the connection's responses closes it.
    Request,
}

/// Runs one connection: the server writes its frames in random pieces, the GOAWAY is asked
/// for after `trigger_after` server writes; the client acknowledges the PING once it has
/// seen it, after opening `late_streams` more streams. Checks the output.
/// Returns whether the PING's acknowledgement was left out of what the server read.
fn run_case(
    seed: u64,
    streams: u32,
    late_streams: u32,
    trigger_after: usize,
    trigger: Trigger,
) -> bool {
    let mut rng = Rng(seed | 1);
    let server_bytes = server_frames(&mut rng, streams);
    let mut client = PREFACE.to_vec();
    client.extend(frame(SETTINGS, 0, 0, &[]));
    client.extend(client_frames(&mut rng, 0..streams));
    let socket = MemorySocket {
        rng: Rng(rng.next_u64() | 1),
        written: Vec::new(),
        from_client: client.clone().into(),
    };
    let broadcast = Arc::new(GoawayBroadcast::default());
    let mut io = GoawayIo::new(socket, Arc::clone(&broadcast));
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let (mut sent, mut writes, mut acked, mut searched) = (0, 0, false, 0);
    let ping = frame(PING, 0, 0, &GOAWAY_PING_PAYLOAD);
    // How much of the server's output had passed when the GOAWAY was asked for.
    let mut requested_at = None::<usize>;
    // What the server read, and where in the client's bytes the PING's acknowledgement is.
    let (mut server_read, mut ack_at) = (Vec::new(), 0);
    let mut read_buf = [0u8; 64];
    // Bounded: every round either writes, reads or (one in four) meets a pending socket.
    for _ in 0..1_000_000 {
        if writes == trigger_after {
            requested_at.get_or_insert(sent);
            match trigger {
                Trigger::Broadcast => broadcast.announce(),
                Trigger::Request => io.request().request(),
            }
        }
        if sent < server_bytes.len() {
            let piece = (sent + 1 + rng.below(20_000)).min(server_bytes.len());
            let piece = &server_bytes[sent..piece];
            if let Poll::Ready(n) = Pin::new(&mut io).poll_write(&mut cx, piece) {
                sent += n.expect("write");
                writes += 1;
                // h2 flushes after a batch of writes; some batches here are left unflushed.
                if rng.below(2) == 0 {
                    let _ = Pin::new(&mut io).poll_flush(&mut cx);
                }
            }
        } else {
            // Idle: only reads poll the connection from now on.
            writes += 1;
        }
        let mut buf = ReadBuf::new(&mut read_buf[..1 + rng.below(64)]);
        if let Poll::Ready(result) = Pin::new(&mut io).poll_read(&mut cx, &mut buf) {
            result.expect("read");
            server_read.extend_from_slice(buf.filled());
        }
        // The client acknowledges the PING once it has been written whole, after opening the
        // streams it had under way.
        let written = &io.get_ref().written;
        let from = searched;
        searched = written.len().saturating_sub(ping.len());
        if !acked && windows_contain(&written[from..], &ping) {
            acked = true;
            let late = client_frames(&mut rng, streams..streams + late_streams);
            let mut reply = late;
            ack_at = client.len() + reply.len();
            reply.extend(frame(PING, ACK, 0, &GOAWAY_PING_PAYLOAD));
            client.extend_from_slice(&reply);
            io_client_send(&mut io, &reply);
        }
        let done = sent == server_bytes.len() && io.get_ref().from_client.is_empty();
        if done && acked && count_goaways(&io.get_ref().written) == 2 {
            break;
        }
    }
    let written = &io.get_ref().written;
    let frames = exact_frames(written).expect("the output is whole frames");
    let inserted: Vec<&Frame> = frames.iter().filter(|f| is_inserted(f)).collect();
    assert_eq!(
        inserted.len(),
        3,
        "GOAWAY, PING, final GOAWAY: {inserted:?}"
    );
    assert_eq!(frames[0].kind, SETTINGS, "the server's SETTINGS come first");
    assert!(
        inserted[0].at > 0,
        "nothing goes before the server's SETTINGS"
    );
    // Not only on a boundary: on the first one after the request (the first frame's end at
    // the earliest).
    let requested_at = requested_at.expect("the GOAWAY was asked for");
    let boundaries = exact_frames(&server_bytes).expect("whole frames");
    let first_boundary_after = boundaries
        .iter()
        .map(|f| f.end())
        .find(|&end| end >= requested_at)
        .expect("a boundary at the end of the output");
    assert_eq!(
        inserted[0].at, first_boundary_after,
        "GOAWAY asked for after {requested_at} bytes of the server's output"
    );
    assert_eq!(inserted[0].kind, TYPE_GOAWAY);
    assert_eq!(goaway_last_stream_id(inserted[0]), MAX_STREAM_ID);
    assert_eq!(inserted[1].kind, PING);
    assert_eq!(
        inserted[1].at,
        inserted[0].at + 17,
        "the PING follows the GOAWAY"
    );
    assert_eq!(inserted[2].kind, TYPE_GOAWAY);
    let highest = 2 * (streams + late_streams) - 1;
    assert_eq!(goaway_last_stream_id(inserted[2]), highest);
    assert!(inserted
        .iter()
        .all(|g| g.kind != TYPE_GOAWAY || g.payload[4..] == [0; 4]));
    // The server reads the client's bytes, unchanged, but for the acknowledgement of the
    // PING it did not send, left out when it came in one read.
    let mut without_ack = client.clone();
    without_ack.drain(ack_at..ack_at + 17);
    assert!(
        server_read == client || server_read == without_ack,
        "the client's bytes were changed"
    );
    // Without the inserted frames, the server's bytes, unchanged.
    let mut rest = Vec::new();
    for f in frames.iter().filter(|f| !is_inserted(f)) {
        rest.extend_from_slice(&written[f.at..f.end()]);
    }
    assert!(rest == server_bytes, "the server's bytes were changed");
    server_read == without_ack
}

fn windows_contain(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn count_goaways(written: &[u8]) -> usize {
    exact_frames(written).map_or(0, |frames| {
        frames.iter().filter(|f| f.kind == TYPE_GOAWAY).count()
    })
}

/// More bytes from the client.
fn io_client_send(io: &mut GoawayIo<MemorySocket>, bytes: &[u8]) {
    io.get_mut().from_client.extend(bytes.iter().copied());
}

#[test]
fn goaway_on_broadcast_under_concurrent_streams() {
    let stripped = (1..40)
        .filter(|&seed| run_case(seed, 20, 3, seed as usize % 7, Trigger::Broadcast))
        .count();
    assert!(
        (1..39).contains(&stripped),
        "acknowledgements read whole ({stripped} of 39) and split should both occur"
    );
}

#[test]
fn goaway_on_the_connections_own_request() {
    for seed in 1..40 {
        run_case(seed * 7919, 10, 0, seed as usize % 5, Trigger::Request);
    }
}

#[test]
fn goaway_on_an_idle_connection_is_written_from_a_read() {
    // Nothing more to write from the server: the read that wakes the connection inserts it.
    run_case(5, 1, 0, 10_000, Trigger::Broadcast);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random write and read splits never corrupt the frame stream.
    #[test]
    fn random_splits_keep_the_frame_stream_whole(
        seed in any::<u64>(),
        streams in 1u32..12,
        late in 0u32..4,
        trigger_after in 0usize..30,
        broadcast in any::<bool>(),
    ) {
        let trigger = if broadcast { Trigger::Broadcast } else { Trigger::Request };
        run_case(seed, streams, late, trigger_after, trigger);
    }
}

/// Reads all the client has sent (bounded).
fn read_all(io: &mut GoawayIo<MemorySocket>, cx: &mut Context<'_>) -> Vec<u8> {
    let mut read = Vec::new();
    let mut buf = [0u8; 64];
    for _ in 0..100_000 {
        if io.get_ref().from_client.is_empty() {
            break;
        }
        let mut buf = ReadBuf::new(&mut buf);
        if let Poll::Ready(result) = Pin::new(&mut *io).poll_read(cx, &mut buf) {
            result.expect("read");
            read.extend_from_slice(buf.filled());
        }
    }
    read
}

/// Writes the server's bytes up to `upto` in random pieces, then flushes what was inserted
/// (bounded).
fn write_up_to(
    io: &mut GoawayIo<MemorySocket>,
    cx: &mut Context<'_>,
    (server_bytes, sent): (&[u8], &mut usize),
    upto: usize,
    rng: &mut Rng,
) {
    for _ in 0..1_000_000 {
        if *sent >= upto {
            break;
        }
        let end = (*sent + 1 + rng.below(20_000)).min(upto);
        if let Poll::Ready(n) = Pin::new(&mut *io).poll_write(cx, &server_bytes[*sent..end]) {
            *sent += n.expect("write");
        }
    }
    for _ in 0..1_000 {
        if let Poll::Ready(result) = Pin::new(&mut *io).poll_flush(cx) {
            result.expect("flush");
            break;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_client_gets_the_final_goaway_a_second_later_at_a_boundary_then_the_cut() {
    for seed in 1..20u64 {
        let mut rng = Rng((seed * 104_729) | 1);
        let streams = 6;
        let server_bytes = server_frames(&mut rng, streams);
        let mut client = PREFACE.to_vec();
        client.extend(frame(SETTINGS, 0, 0, &[]));
        client.extend(client_frames(&mut rng, 0..streams));
        let mut builder = lameduck_actix::builder(lameduck::Config::default());
        builder.without_os_signals();
        let lifecycle = builder.prepare();
        let shared = Arc::clone(lifecycle.shared());
        let broadcast = Arc::new(GoawayBroadcast::for_lifecycle(
            Arc::clone(&shared),
            lifecycle.clock(),
        ));
        let socket = MemorySocket {
            rng: Rng(rng.next_u64() | 1),
            written: Vec::new(),
            from_client: client.clone().into(),
        };
        let mut io = GoawayIo::new(socket, Arc::clone(&broadcast));
        let mut cx = Context::from_waker(Waker::noop());
        // Every stream is opened before the server answers any.
        assert_eq!(read_all(&mut io, &mut cx), client, "seed {seed}");
        let mut sent = 0;
        let half = server_bytes.len() / 2;
        write_up_to(&mut io, &mut cx, (&server_bytes, &mut sent), half, &mut rng);
        broadcast.announce();
        // Up to the first frame boundary after the stop: the GOAWAY goes in there.
        let boundary = exact_frames(&server_bytes)
            .expect("whole frames")
            .iter()
            .map(|f| f.end())
            .find(|end| *end > half)
            .expect("a boundary at the end");
        write_up_to(
            &mut io,
            &mut cx,
            (&server_bytes, &mut sent),
            boundary,
            &mut rng,
        );
        let so_far = frames(&io.get_ref().written);
        let goaways: Vec<u32> = so_far
            .iter()
            .filter(|f| f.kind == TYPE_GOAWAY)
            .map(goaway_last_stream_id)
            .collect();
        assert_eq!(goaways, [MAX_STREAM_ID], "seed {seed}");
        // The client never acknowledges: a second later the final GOAWAY is due.
        tokio::time::advance(SILENT_PEER_TIMEOUT).await;
        let all = server_bytes.len();
        write_up_to(&mut io, &mut cx, (&server_bytes, &mut sent), all, &mut rng);
        let written = &io.get_ref().written;
        let frames = exact_frames(written).expect("the output is whole frames");
        let inserted: Vec<&Frame> = frames.iter().filter(|f| is_inserted(f)).collect();
        assert_eq!(inserted.len(), 3, "seed {seed}: {inserted:?}");
        assert_eq!(goaway_last_stream_id(inserted[0]), MAX_STREAM_ID);
        assert_eq!(inserted[1].kind, PING);
        assert_eq!(goaway_last_stream_id(inserted[2]), 2 * streams - 1);
        let mut rest = Vec::new();
        for f in frames.iter().filter(|f| !is_inserted(f)) {
            rest.extend_from_slice(&written[f.at..f.end()]);
        }
        assert!(
            rest == server_bytes,
            "seed {seed}: the server's bytes were changed"
        );
        // Every stream ended: a second later the connection is cut, whatever the client does.
        assert_eq!(io.open_streams(), 0, "seed {seed}");
        let mut buf = [0u8; 8];
        let mut read = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut io).poll_read(&mut cx, &mut read).is_pending());
        tokio::time::advance(SILENT_PEER_TIMEOUT).await;
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut io).poll_read(&mut cx, &mut read) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted),
            other => panic!("seed {seed}: not cut: {other:?}"),
        }
        let write = Pin::new(&mut io).poll_write(&mut cx, b"more");
        assert!(
            matches!(write, Poll::Ready(Err(_))),
            "seed {seed}: {write:?}"
        );
        let peers = shared.counters().peer_counts();
        assert_eq!(
            peers.cut_since_start[CutKind::Http2Goaway.index()],
            1,
            "seed {seed}"
        );
    }
}
