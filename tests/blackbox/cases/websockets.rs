//! WebSockets at shutdown: `/ws` echoes through the shutdown delay and until each socket's
//! turn in the paced long-running drain, then the server sends Close 1001 ("server shutting
//! down") and waits for the client's Close. A client that never answers is cut before the
//! grace period ends and counted (`websocket_unanswered`); one that breaks the protocol gets
//! Close 1002 (1007 for text that is not UTF-8), and the server goes on serving the others.
//! The clients are tungstenite's blocking client and raw sockets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode, Message};

use crate::support::*;

const SOCKETS: usize = 10;
const SILENT: usize = 2;
/// Every read gives up this long after the socket opened.
const READ_DEADLINE: Duration = Duration::from_secs(30);

/// What an answering client saw: when its Close came, and the Close.
#[derive(Debug)]
struct Closed {
    at: Instant,
    code: CloseCode,
    reason: String,
    echoes_after_signal: usize,
}

fn answering_client(
    addr: SocketAddr,
    i: usize,
    opened: mpsc::Sender<Result<(), String>>,
    signalled: mpsc::Receiver<Instant>,
) -> Result<Closed, String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("socket {i}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let url = format!("ws://{addr}/ws");
    let (mut ws, _) = match tungstenite::client::client(url.as_str(), stream) {
        Ok(ok) => ok,
        Err(e) => {
            let e = format!("socket {i}: handshake: {e}");
            let _ = opened.send(Err(e.clone()));
            return Err(e);
        }
    };
    let _ = opened.send(Ok(()));
    let started = Instant::now();
    let mut signal_at = None;
    let mut echoes_after_signal = 0;
    let mut sent = 0u32;
    let mut close = None;
    loop {
        if started.elapsed() > READ_DEADLINE {
            return Err(format!("socket {i}: still open after {READ_DEADLINE:?}"));
        }
        if signal_at.is_none() {
            signal_at = signalled.try_recv().ok();
        }
        if close.is_none() && sent < 1000 {
            // One message at a time: send, then read its echo (or the Close).
            sent += 1;
            if let Err(e) = ws.send(Message::text(format!("{i}-{sent}"))) {
                return Err(format!("socket {i}: send: {e}"));
            }
        }
        match ws.read() {
            Ok(Message::Text(text)) => {
                if text.as_str() != format!("{i}-{sent}") {
                    return Err(format!("socket {i}: echo {text:?}, sent {i}-{sent}"));
                }
                if signal_at.is_some() {
                    echoes_after_signal += 1;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(Message::Close(frame)) => {
                let frame = frame.ok_or_else(|| format!("socket {i}: a Close without status"))?;
                close = Some((Instant::now(), frame.code, frame.reason.to_string()));
                // tungstenite answers the Close on the next read or flush.
            }
            Ok(other) => return Err(format!("socket {i}: unexpected {other:?}")),
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("socket {i}: read: {e} (close {close:?})")),
        }
    }
    let (at, code, reason) = close.ok_or_else(|| format!("socket {i}: closed without Close"))?;
    Ok(Closed {
        at,
        code,
        reason,
        echoes_after_signal,
    })
}

/// A raw socket after the opening handshake (the key of RFC 6455's example).
fn raw_socket(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET /ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .expect("write the handshake");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("read the 101");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    s
}

/// Reads until the server's Close frame; its status code.
fn read_close_code(s: &mut TcpStream) -> Option<u16> {
    let mut header = [0u8; 2];
    loop {
        s.read_exact(&mut header).ok()?;
        let len = usize::from(header[1] & 0x7f);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).ok()?;
        if header[0] & 0x0f == 0x8 {
            return payload
                .get(..2)
                .map(|code| u16::from_be_bytes([code[0], code[1]]));
        }
    }
}

/// A masked client frame: `opcode` with `payload` (FIN set).
fn masked_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![first, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

pub fn websockets_close_1001_at_their_turn(bin: &'static str) {
    let mut server = ServerProcess::start(
        bin,
        &[
            "--shutdown-delay",
            "500ms",
            "--shutdown-watch-termination-grace-period",
            "3s",
        ],
    );
    let addr = server.addr;
    // Bad input first: a frame with a reserved opcode gets Close 1002, and so does a Close
    // with a status no endpoint may send (1005); a text frame that is not UTF-8 gets 1007
    // (invalid payload data). None harms the server.
    for (what, frame, status) in [
        ("a reserved opcode", masked_frame(0x83, b"x"), 1002),
        (
            "Close 1005",
            masked_frame(0x88, &1005u16.to_be_bytes()),
            1002,
        ),
        (
            "text that is not UTF-8",
            masked_frame(0x81, b"\xff\xfe"),
            1007,
        ),
    ] {
        let mut bad = raw_socket(addr);
        bad.write_all(&frame).expect("write the bad frame");
        assert_eq!(
            read_close_code(&mut bad),
            Some(status),
            "{what}: the protocol's error close\n{}",
            server.describe()
        );
    }
    let (opened_tx, opened_rx) = mpsc::channel();
    let mut signal_txs = Vec::new();
    let threads: Vec<_> = (0..SOCKETS)
        .map(|i| {
            let opened = opened_tx.clone();
            let (signal_tx, signal_rx) = mpsc::channel();
            signal_txs.push(signal_tx);
            std::thread::Builder::new()
                .name(format!("ws-{i}"))
                .stack_size(256 * 1024)
                .spawn(move || answering_client(addr, i, opened, signal_rx))
                .expect("spawn a client")
        })
        .collect();
    drop(opened_tx);
    for n in 0..SOCKETS {
        match opened_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(e) => panic!("only {n} of {SOCKETS} open: {e}\n{}", server.describe()),
        }
    }
    // Silent clients: open, then never answer the Close (nor read it).
    let silent: Vec<TcpStream> = (0..SILENT).map(|_| raw_socket(addr)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let sent = server.signal("TERM");
    for tx in &signal_txs {
        let _ = tx.send(sent.after);
    }
    let mut closed = Vec::new();
    for thread in threads {
        match thread.join() {
            Ok(Ok(c)) => closed.push(c),
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(_) => panic!("a client panicked\n{}", server.describe()),
        }
    }
    server.assert_exit(0, Duration::from_secs(10));
    let exited = sent.before.elapsed();
    for (i, c) in closed.iter().enumerate() {
        assert_eq!(c.code, CloseCode::Away, "socket {i}: {c:?}");
        assert_eq!(c.reason, "server shutting down", "socket {i}");
        let at = c.at.duration_since(sent.before);
        assert!(
            at >= Duration::from_millis(450) && at <= Duration::from_millis(3500),
            "socket {i}: Close {at:?} after the signal (delay 500 ms, grace 3 s)"
        );
        assert!(
            c.echoes_after_signal >= 3,
            "socket {i}: the echo went on through the delay: {c:?}"
        );
    }
    // The silent ones are cut 100 ms before the grace period ends: the exit is within it.
    assert!(
        exited <= Duration::from_millis(500 + 3000 + 1500),
        "exited {exited:?} after the signal\n{}",
        server.describe()
    );
    drop(silent);
    let log = server.stderr_text();
    let want = format!(
        "websocket_closes={} websocket_unanswered={SILENT}",
        SOCKETS + SILENT
    );
    assert!(
        log.contains(&want),
        "the summary counts the goodbyes ({want})\n{}",
        server.describe()
    );
}
