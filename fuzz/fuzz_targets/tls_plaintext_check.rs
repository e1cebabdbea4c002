//! Checks the TLS port's first-byte test (`lameduck_tls::starts_tls_handshake`, which the
//! tokio, smol and actix TLS listeners all call on the first byte they peek) against arbitrary
//! first bytes, against rustls, and checks the plaintext answer once.
//!
//! Checked: the test is true if and only if the first byte is a TLS handshake record (0x16);
//! a byte that starts an HTTP method (an ASCII uppercase letter) is never taken for TLS; a
//! real ClientHello (made by rustls once) passes, and rustls' own acceptor never finds a
//! ClientHello in bytes whose first byte fails (so the 400 never turns away a TLS client).
//! `PLAINTEXT_HTTP_RESPONSE` is, by a small parser, a well-formed HTTP/1.0 400 response with
//! `Connection: close`, a `text/plain` content type, and a body ending the response.
#![no_main]

use std::sync::{Arc, Once, OnceLock};

use arbitrary::Arbitrary;
use lameduck_tls::rustls;
use lameduck_tls::{starts_tls_handshake, PLAINTEXT_HTTP_RESPONSE};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Start {
    /// A real ClientHello, then the rest.
    ClientHello,
    /// An HTTP request line's method.
    Method(u8),
    /// Anything.
    Bytes,
}

#[derive(Arbitrary, Debug)]
struct Input {
    start: Start,
    rest: Vec<u8>,
}

/// The first bytes a rustls client sends: its ClientHello.
fn client_hello() -> &'static [u8] {
    static HELLO: OnceLock<Vec<u8>> = OnceLock::new();
    HELLO.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("example.com").expect("a name");
        let mut client = rustls::ClientConnection::new(Arc::new(config), name).expect("a client");
        let mut hello = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut hello).expect("write to a Vec");
        }
        hello
    })
}

/// Whether rustls' server side finds a ClientHello in `bytes`.
fn rustls_accepts(bytes: &[u8]) -> bool {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        match acceptor.read_tls(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match acceptor.accept() {
            Ok(Some(_)) => return true,
            Ok(None) => {}
            Err(_) => return false,
        }
    }
    false
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses the plaintext answer as a client would, checking every line.
fn check_response() {
    let response = std::str::from_utf8(PLAINTEXT_HTTP_RESPONSE).expect("ASCII");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .expect("a head ending in CRLF CRLF");
    let mut lines = head.split("\r\n");
    let status = lines.next().expect("a status line");
    let mut parts = status.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.0"), "{status}");
    assert_eq!(parts.next(), Some("400"), "{status}");
    let reason = parts.next().expect("a reason phrase");
    assert!(!reason.is_empty() && reason.bytes().all(|b| b == b' ' || b.is_ascii_graphic()));
    let mut connection = Vec::new();
    let mut content_type = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').expect("a header line is name: value");
        assert!(
            !name.is_empty() && name.bytes().all(is_tchar),
            "header name {name:?}"
        );
        let value = value.trim_matches([' ', '\t']);
        assert!(
            value
                .bytes()
                .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic()),
            "{line:?}"
        );
        match name.to_ascii_lowercase().as_str() {
            "connection" => connection.push(value),
            "content-type" => content_type.push(value),
            "content-length" => {
                assert_eq!(value.parse::<usize>().ok(), Some(body.len()), "{line:?}")
            }
            "transfer-encoding" => panic!("HTTP/1.0 has no transfer coding"),
            _ => {}
        }
    }
    assert_eq!(connection.len(), 1, "one Connection header");
    assert!(
        connection[0].eq_ignore_ascii_case("close"),
        "Connection: {}",
        connection[0]
    );
    assert_eq!(content_type.len(), 1, "one Content-Type header");
    assert!(
        content_type[0].starts_with("text/plain"),
        "Content-Type: {}",
        content_type[0]
    );
    assert!(
        !body.is_empty()
            && body
                .bytes()
                .all(|b| b == b'\n' || b == b' ' || b.is_ascii_graphic())
    );
    assert!(body.ends_with('\n'));
}

fuzz_target!(|input: Input| {
    static RESPONSE: Once = Once::new();
    RESPONSE.call_once(|| {
        check_response();
        assert!(
            rustls_accepts(client_hello()),
            "rustls finds no ClientHello in its own"
        );
    });

    let mut bytes = match input.start {
        Start::ClientHello => client_hello().to_vec(),
        Start::Method(i) => {
            const METHODS: [&[u8]; 9] = [
                b"GET", b"POST", b"PUT", b"HEAD", b"DELETE", b"OPTIONS", b"PATCH", b"CONNECT",
                b"PRI",
            ];
            METHODS[usize::from(i) % METHODS.len()].to_vec()
        }
        Start::Bytes => Vec::new(),
    };
    bytes.extend_from_slice(&input.rest);
    let Some(&first) = bytes.first() else {
        return;
    };
    let tls = starts_tls_handshake(first);
    assert_eq!(tls, first == 0x16, "first byte {first:#04x}");
    if first.is_ascii_uppercase() {
        assert!(!tls, "an HTTP method's first letter taken for TLS");
    }
    if matches!(input.start, Start::ClientHello) {
        assert!(tls, "a ClientHello taken for plaintext");
    }
    if !tls {
        assert!(
            !rustls_accepts(&bytes),
            "rustls accepts what is answered 400: {bytes:02x?}"
        );
    }
});
