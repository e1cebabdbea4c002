//! An HTTP/2 server written frame by frame on 127.0.0.1, for what hyper's server does not do
//! on demand: a GOAWAY whose last-stream-id is below a stream the client opened, a
//! `REFUSED_STREAM`, a response that begins and then fails.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lameduck_test_support::h2::{frame, DATA, GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with the streams of its first connection (later connections answer
/// every stream with 200).
#[derive(Clone, Copy, Debug)]
pub enum Script {
    /// Holds stream 1; when stream 3 opens, sends GOAWAY with last-stream-id 1 (`NO_ERROR`),
    /// answers stream 1, and never processes stream 3.
    GoawayBelow,
    /// Resets stream 1 with `REFUSED_STREAM` and answers the streams after it.
    RefusedStream,
    /// Answers every stream with a 200 head and part of a body, then resets the stream with
    /// `INTERNAL_ERROR`: a response that began, then failed.
    BeganThenReset,
}

/// What the server did: streams processed (answered, or begun), connections accepted.
#[derive(Clone, Default)]
pub struct RawSeen {
    pub processed: Arc<AtomicUsize>,
    pub connections: Arc<AtomicUsize>,
}

impl RawSeen {
    pub fn processed(&self) -> usize {
        self.processed.load(Ordering::SeqCst)
    }
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

const STATUS_200: &[u8] = &[0x88];
const END_HEADERS: u8 = 0x4;
const END_STREAM: u8 = 0x1;

/// Starts the server with `script`.
pub async fn raw_h2_server(script: Script) -> (SocketAddr, RawSeen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = RawSeen::default();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let index = s.connections.fetch_add(1, Ordering::SeqCst);
            let s = s.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    connection(stream, if index == 0 { Some(script) } else { None }, s),
                )
                .await;
            });
        }
    });
    (addr, seen)
}

async fn read_frame(stream: &mut TcpStream) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.ok()?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], id, payload))
}

fn answer(id: u32) -> Vec<u8> {
    frame(HEADERS, END_HEADERS | END_STREAM, id, STATUS_200)
}

fn goaway(last: u32, code: u32) -> Vec<u8> {
    let mut payload = last.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &payload)
}

async fn connection(mut stream: TcpStream, script: Option<Script>, seen: RawSeen) {
    let mut preface = [0u8; 24];
    if stream.read_exact(&mut preface).await.is_err() {
        return;
    }
    if stream.write_all(&frame(SETTINGS, 0, 0, &[])).await.is_err() {
        return;
    }
    let mut held = None;
    while let Some((kind, flags, id, payload)) = read_frame(&mut stream).await {
        let mut out = Vec::new();
        match kind {
            SETTINGS if flags & 0x1 == 0 => out.extend(frame(SETTINGS, 0x1, 0, &[])),
            PING if flags & 0x1 == 0 => out.extend(frame(PING, 0x1, 0, &payload)),
            GOAWAY => return,
            HEADERS => match script {
                None => {
                    seen.processed.fetch_add(1, Ordering::SeqCst);
                    out.extend(answer(id));
                }
                Some(Script::GoawayBelow) if held.is_none() => held = Some(id),
                Some(Script::GoawayBelow) => {
                    // The stream above the last-stream-id is never processed.
                    let first = held.take().unwrap_or(1);
                    out.extend(goaway(first, 0));
                    seen.processed.fetch_add(1, Ordering::SeqCst);
                    out.extend(answer(first));
                    let _ = stream.write_all(&out).await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return;
                }
                Some(Script::RefusedStream) if id == 1 => {
                    out.extend(frame(RST_STREAM, 0, id, &7u32.to_be_bytes()));
                }
                Some(Script::RefusedStream) => {
                    seen.processed.fetch_add(1, Ordering::SeqCst);
                    out.extend(answer(id));
                }
                Some(Script::BeganThenReset) => {
                    seen.processed.fetch_add(1, Ordering::SeqCst);
                    out.extend(frame(HEADERS, END_HEADERS, id, STATUS_200));
                    out.extend(frame(DATA, 0, id, b"partial"));
                    out.extend(frame(RST_STREAM, 0, id, &2u32.to_be_bytes()));
                }
            },
            _ => {}
        }
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            return;
        }
    }
}
