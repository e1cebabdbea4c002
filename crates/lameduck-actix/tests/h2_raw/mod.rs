//! Raw HTTP/2 over a loopback socket, for the tests whose client must stay silent where a real
//! one would answer (never acknowledge the GOAWAY's PING, never read again), and an
//! `AutoH2cServer` answering `GET /` with `ok` and `GET /slow` with `slow` after 2 s.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_web::{web, App};
use lameduck::Config;
use lameduck_actix::{AutoH2cServer, Handle};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const END_STREAM: u8 = 0x1;

/// How long `/slow` takes to answer.
pub const SLOW: Duration = Duration::from_secs(2);

/// The client preface and an empty SETTINGS frame.
pub const H2_START: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A running lifecycle on one loopback listener (one worker), and its `run` task's exit code.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: Handle,
    pub run: tokio::task::JoinHandle<u8>,
}

/// Starts an `AutoH2cServer` for `config` (no OS signals), `GET /` answered `ok` and
/// `GET /slow` answered `slow` after [`SLOW`].
pub fn start(config: Config) -> Running {
    let mut builder = lameduck_actix::builder(config);
    builder.without_signals();
    let mut server = builder.prepare();
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    let http = AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(|| async { "ok" }))
            .route(
                "/slow",
                web::get().to(|| async {
                    tokio::time::sleep(SLOW).await;
                    "slow"
                }),
            )
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    lameduck_actix::serve(&mut server, "api", http, |http| {
        http.workers(1).listen(listener)
    })
    .unwrap();
    let handle = server.handle();
    let run = actix_rt::spawn(async move { server.run().await.unwrap() });
    Running { addr, handle, run }
}

/// A HEADERS frame (END_STREAM, END_HEADERS) on `stream` for `GET http://x{path}`,
/// HPACK-encoded with the static table (`:method GET`, `:scheme http`) and literals for
/// `:path` and `:authority`.
pub fn get_frame(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 0x01, b'x']);
    let mut frame = vec![0, 0, block.len() as u8, HEADERS, 0x5];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(&block);
    frame
}

/// A PING acknowledgement of `payload`.
pub fn ping_ack(payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0, 0, 8, PING, 0x1, 0, 0, 0, 0];
    frame.extend_from_slice(payload);
    frame
}

/// One frame of the server's.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// The whole frames in `bytes`.
pub fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        if bytes.len() < 9 + len {
            break;
        }
        out.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5] & 0x7f, bytes[6], bytes[7], bytes[8]]),
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
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

/// Whether the server ended its response on `stream` among `frames`.
pub fn answered(frames: &[Frame], stream: u32) -> bool {
    frames.iter().any(|f| {
        f.stream == stream && (f.kind == DATA || f.kind == HEADERS) && f.flags & END_STREAM != 0
    })
}

/// Reads the server's bytes into `bytes` until `done` says so (`true`), or the server closes
/// the connection (`false`); bounded by `within`.
pub async fn read_until(
    conn: &mut TcpStream,
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

/// Reads until the server closes the connection, within `within`; what came meanwhile.
pub async fn read_to_close(conn: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut rest = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    tokio::time::timeout(within, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => rest.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closed the connection in time");
    rest
}
