//! A plaintext request on the TLS port is answered 400, read to its end and the connection
//! closed cleanly (a FIN, never a reset that could destroy the answer); a flood of failing
//! handshakes is logged once per window.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hyper::Version;

use super::{assert_ok, terminate, PairFiles};
use crate::support::h2::runtime;
use crate::support::tls::*;

/// How many failing handshakes `tls_plaintext_request_is_refused` sends in a burst.
const FLOOD: usize = 300;

/// The body of each plaintext request, sent after the server has answered.
const PLAINTEXT_BODY: usize = 16 * 1024;

/// The answer to a plaintext request on the TLS port (the words Go's servers use).
const PLAINTEXT_HTTP_RESPONSE: &[u8] = b"HTTP/1.0 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
Client sent an HTTP request to an HTTPS server.\n";

pub fn tls_plaintext_request_is_refused(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let files = PairFiles::new("plaintext", &ca.server("server", KeyForm::EcPkcs8));
    let flags = files.flags(&[]);
    let server = start_tls(bin, &flags);
    let addr = server.addr;

    for attempt in 0..2 {
        let mut plain = TcpStream::connect(addr).expect("connect");
        plain
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        // The head, then a moment later a body: the server answers after the first byte, so
        // the body arrives after the answer. A server that closed without reading it would
        // send a reset, which may destroy the answer before it is read.
        let head = format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: lameduck-blackbox\r\n\
             Content-Length: {PLAINTEXT_BODY}\r\n\r\n"
        );
        plain
            .write_all(head.as_bytes())
            .expect("send a plaintext request's head");
        std::thread::sleep(Duration::from_millis(50));
        // The server still reads: this write meets no reset.
        let sent = plain.write_all(&[b'x'; PLAINTEXT_BODY]);
        let mut answer = Vec::new();
        let read = plain.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(
            sent.is_ok() && read.is_ok() && answer == PLAINTEXT_HTTP_RESPONSE,
            "plaintext request #{attempt} on the TLS port: want the body sent, the whole 400 \
             answer, then the end of the connection (a FIN, no reset); sending the body: \
             {sent:?}, got {text:?} ({read:?})\n{}",
            server.describe()
        );
    }

    // A flood of failing handshakes (a TLS record that is no ClientHello) within the 10 s
    // log window: counted, logged at info level once per window, never once per failure.
    let started = Instant::now();
    for _ in 0..FLOOD {
        let mut bad = TcpStream::connect(addr).expect("connect");
        bad.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let _ = bad.write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef]);
        let _ = bad.read_to_end(&mut Vec::new());
    }
    let flood_took = started.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let lines = server
        .stderr_text()
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .count();
    // One line for the plaintext requests' window, one more for each 10 s the flood took.
    let allowed = 2 + flood_took.as_secs() as usize / 10;
    assert!(
        lines <= allowed,
        "{FLOOD} failed handshakes in {flood_took:?} (after 2 plaintext requests) wrote {lines} \
         info lines (want at most {allowed}: one per 10 s)\n{}",
        server.describe()
    );

    runtime().block_on(async {
        let config = client_config(&ca, &["http/1.1"], None);
        let (resp, _) = get_once(addr, &config, "/")
            .await
            .unwrap_or_else(|e| panic!("TLS after plaintext: {e}\n{}", server.describe()));
        assert_ok(
            &Ok(resp),
            Version::HTTP_11,
            "TLS GET / after plaintext requests",
        );
    });
    terminate(server, &flags);
}
