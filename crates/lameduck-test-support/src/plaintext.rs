//! A plaintext HTTP request sent to a TLS port, as the tests of every adapter's TLS accept
//! send it: the head, then a moment later a body, which reaches the server after its answer.
//! A server that closed without reading it would send a reset, which could destroy the
//! answer before the client reads it; one that reads it ends the connection with a FIN.
//! Blocking (std's sockets): run it on a thread of its own.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// What the client of [`plaintext_post`] saw.
#[derive(Debug)]
pub struct PlaintextExchange {
    /// Whether the body, sent after the server answered, could be sent.
    pub body_sent: io::Result<()>,
    /// What the server answered, up to the end of the connection.
    pub answer: Vec<u8>,
    /// How the connection ended: `Ok` is a FIN (a clean close), an error a reset.
    pub end: io::Result<usize>,
    /// The connection, still open on the client's side (drop it to close it).
    pub stream: TcpStream,
}

/// Sends `POST /` with a body of `body` bytes to `addr`: the head, then after 50 ms the body;
/// then reads until the server ends the connection (at most 5 s per read), without closing
/// the client's side.
///
/// # Panics
///
/// When `addr` cannot be reached or the head cannot be sent.
#[must_use]
pub fn plaintext_post(addr: SocketAddr, body: usize) -> PlaintextExchange {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let head = format!("POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {body}\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    std::thread::sleep(Duration::from_millis(50));
    let body_sent = stream.write_all(&vec![b'x'; body]);
    let mut answer = Vec::new();
    let end = stream.read_to_end(&mut answer);
    PlaintextExchange {
        body_sent,
        answer,
        end,
        stream,
    }
}
