//! With a client CA, a client certificate of that CA is required, over HTTP/1.1 and HTTP/2.

use hyper::Version;

use super::{assert_ok, terminate, PairFiles};
use crate::support::h2::runtime;
use crate::support::tls::*;

pub fn tls_client_ca_requires_client_certificates(bin: &'static str) {
    let ca = Ca::new("serving CA");
    let client_ca = Ca::new("client CA");
    let stranger_ca = Ca::new("some other CA");
    let files = PairFiles::new("client-ca", &ca.server("server", KeyForm::EcPkcs8));
    let cas = files.dir.file("client-ca.crt");
    write(&cas, client_ca.pem());
    let flags = files.flags(&["--client-ca-file", &cas]);
    let server = start_tls(bin, &flags);
    let addr = server.addr;
    let good = client_ca.client("good client");
    let stranger = stranger_ca.client("stranger");

    runtime().block_on(async {
        for (alpn, version) in [("http/1.1", Version::HTTP_11), ("h2", Version::HTTP_2)] {
            let refused = [
                ("no client certificate", client_config(&ca, &[alpn], None)),
                (
                    "a client certificate of another CA",
                    client_config(&ca, &[alpn], Some(&stranger)),
                ),
            ];
            for (who, config) in refused {
                // TLS 1.3: the client's side of the handshake may end before the server
                // checked the certificate; the refusal then fails the first read.
                let attempt = if alpn == "h2" {
                    match h2_connect(addr, &config).await {
                        Ok(mut h2) => try_h2_get(&mut h2, "/").await.map(|r| r.status),
                        Err(e) => Err(e),
                    }
                } else {
                    get_once(addr, &config, "/").await.map(|(r, _)| r.status)
                };
                assert!(
                    attempt.is_err(),
                    "{alpn} with {who}: expected a failed handshake, got {attempt:?}\n{}",
                    server.describe()
                );
            }
            let config = client_config(&ca, &[alpn], Some(&good));
            let resp = if alpn == "h2" {
                match h2_connect(addr, &config).await {
                    Ok(mut h2) => h2.get("/").await,
                    Err(e) => Err(e),
                }
            } else {
                get_once(addr, &config, "/").await.map(|(r, _)| r)
            };
            assert_ok(
                &resp,
                version,
                &format!("{alpn} with a certificate of the client CA"),
            );
        }
    });
    terminate(server, &flags);
}
