//! ALPN picks HTTP/2 or HTTP/1.1, with a key in every PEM form.

use std::time::Duration;

use hyper::{StatusCode, Version};

use super::assert_ok;
use crate::support::h2::runtime;
use crate::support::tls::*;
use crate::support::*;

pub fn tls_serves_http1_and_http2_by_alpn(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("alpn");
    let rt = runtime();
    for form in [
        KeyForm::EcPkcs8,
        KeyForm::EcSec1,
        KeyForm::RsaPkcs8,
        KeyForm::RsaPkcs1,
    ] {
        let pair = ca.server("server", form);
        let (cert, key) = (
            dir.file(&format!("{form:?}.crt")),
            dir.file(&format!("{form:?}.key")),
        );
        pair.write(&cert, &key);
        let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
        let mut server = start_tls(bin, &flags);
        let addr = server.addr;
        let what = format!("{bin} with a {form:?} key");
        rt.block_on(async {
            let mut h2 = h2_connect(addr, &client_config(&ca, &["h2"], None))
                .await
                .unwrap_or_else(|e| panic!("{what}: h2 over TLS: {e}\n{}", server.describe()));
            assert_ok(
                &h2.get("/").await,
                Version::HTTP_2,
                &format!("{what}: h2 GET /"),
            );
            assert_ok(
                &h2.get("/readyz").await,
                Version::HTTP_2,
                &format!("{what}: h2 GET /readyz"),
            );

            let config = client_config(&ca, &["http/1.1"], None);
            let mut h1 = H1Tls::connect(addr, &config).await.unwrap_or_else(|e| {
                panic!("{what}: HTTP/1.1 over TLS: {e}\n{}", server.describe())
            });
            assert_eq!(h1.alpn.as_deref(), Some("http/1.1"), "{what}: ALPN");
            assert!(
                h1.peer.as_ref() == Some(&pair.cert_der),
                "{what}: the server presented another certificate"
            );
            assert_ok(
                &h1.get("/").await,
                Version::HTTP_11,
                &format!("{what}: GET /"),
            );
            assert_ok(
                &h1.get("/readyz").await,
                Version::HTTP_11,
                &format!("{what}: GET /readyz (same connection)"),
            );
            let verbose = h1
                .get("/readyz?verbose")
                .await
                .expect("GET /readyz?verbose");
            assert_eq!(
                (verbose.status, &verbose.body[..]),
                (StatusCode::OK, READYZ_VERBOSE_OK.as_bytes()),
                "{what}: /readyz?verbose"
            );
        });
        server.signal("TERM");
        server.assert_exit(0, Duration::from_secs(15));
        server.signals().assert_common_dag_order();
        server.assert_trace_legal(&flags);
    }
}
