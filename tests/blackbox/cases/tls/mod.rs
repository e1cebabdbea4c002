//! TLS serving (`--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file`,
//! `--tls-handshake-timeout`), one module per behaviour: ALPN picks HTTP/2 or HTTP/1.1, keys
//! load in every PEM form, a plaintext request is answered 400, client certificates are
//! required with a client CA, bad files stop the server before it listens, silent clients do
//! not hold up others or the termination, the files rotate without a failed request (in
//! place, and as a Secret volume's `..data` swap), a bad pair keeps the old one, and an h2
//! connection gets GOAWAY.

use std::time::Duration;

use hyper::{StatusCode, Version};

use crate::support::tls::*;
use crate::support::*;

mod alpn;
mod bad_files;
mod client_ca;
mod http2_goaway;
mod plaintext;
mod rotation;
mod silent_clients;

pub use alpn::*;
pub use bad_files::*;
pub use client_ca::*;
pub use http2_goaway::*;
pub use plaintext::*;
pub use rotation::*;
pub use silent_clients::*;

#[track_caller]
fn assert_ok(resp: &Result<H2Resp, String>, version: Version, what: &str) {
    let resp = resp
        .as_ref()
        .unwrap_or_else(|e| panic!("{what}: no reply: {e}"));
    assert_eq!(
        (resp.status, resp.version, &resp.body[..]),
        (StatusCode::OK, version, &b"ok"[..]),
        "{what}: {resp:?}"
    );
}

type H2Resp = crate::support::h2::H2Response;

/// A server's `tls.crt` and `tls.key`, in a directory of their own (removed on drop).
struct PairFiles {
    dir: TempDir,
    cert: String,
    key: String,
}

impl PairFiles {
    /// `tls.crt` and `tls.key` of `pair`, in a new directory named after `label`.
    fn new(label: &str, pair: &Pair) -> PairFiles {
        let dir = TempDir::new(label);
        let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
        pair.write(&cert, &key);
        PairFiles { dir, cert, key }
    }

    /// `--tls-cert-file` and `--tls-private-key-file` naming these files, then `more`.
    fn flags<'a>(&'a self, more: &[&'a str]) -> Vec<&'a str> {
        let mut flags = vec![
            "--tls-cert-file",
            self.cert.as_str(),
            "--tls-private-key-file",
            self.key.as_str(),
        ];
        flags.extend_from_slice(more);
        flags
    }
}

/// Ends a case: SIGTERM, exit 0, a legal trace.
fn terminate(mut server: ServerProcess, flags: &[&str]) {
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(flags);
}
