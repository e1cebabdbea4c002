//! Loading and reloading the serving files: every key form cert-manager and openssl write,
//! errors that name the file, rotation in place and by a Secret volume's `..data` swap, a bad
//! pair that keeps the current one, and a real handshake that gets the current pair.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lameduck_tls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use lameduck_tls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use lameduck_tls::rustls::{self, ClientConfig, ClientConnection, ServerConnection};
use lameduck_tls::{ServerTls, TlsError};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

/// A new directory under the target's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lameduck-tls-{name}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh self-signed pair for 127.0.0.1: (certificate PEM, key PEM, certificate DER).
fn new_pair() -> (String, String, Vec<u8>) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    (cert.pem(), signing_key.serialize_pem(), cert.der().to_vec())
}

fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::write(path, contents).unwrap();
}

/// Waits up to `within` for `done`.
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

fn served_der(tls: &ServerTls) -> Vec<u8> {
    tls.certificate_chain()[0].to_vec()
}

fn fast(cert: &Path, key: &Path) -> ServerTls {
    ServerTls::builder(cert, key)
        .reload_interval(Duration::from_millis(20))
        .build()
        .unwrap()
}

#[test]
fn every_key_form_loads() {
    for (cert, key) in [
        ("rsa.crt", "rsa-pkcs1.key"),
        ("rsa.crt", "rsa-pkcs8.key"),
        ("ec.crt", "ec-sec1.key"),
        ("ec.crt", "ec-pkcs8.key"),
    ] {
        let tls = ServerTls::from_files(fixture(cert), fixture(key));
        assert!(tls.is_ok(), "{cert} {key}: {:?}", tls.err());
    }
}

#[test]
fn bad_files_are_errors_that_name_the_file() {
    let dir = temp_dir("bad");
    let garbage = dir.join("garbage.pem");
    write(&garbage, "this is not PEM\n");
    let half = dir.join("half.crt");
    let cert = std::fs::read_to_string(fixture("rsa.crt")).unwrap();
    write(&half, &cert[..cert.len() / 2]);
    let empty = dir.join("empty.pem");
    write(&empty, "");
    let missing = dir.join("missing.pem");
    let cases: Vec<(PathBuf, PathBuf, &Path, &str)> = vec![
        (
            missing.clone(),
            fixture("rsa-pkcs1.key"),
            &missing,
            "cannot read",
        ),
        (fixture("rsa.crt"), missing.clone(), &missing, "cannot read"),
        (
            garbage.clone(),
            fixture("rsa-pkcs1.key"),
            &garbage,
            "no certificate",
        ),
        (
            fixture("rsa.crt"),
            garbage.clone(),
            &garbage,
            "no private key",
        ),
        (half.clone(), fixture("rsa-pkcs1.key"), &half, "PEM"),
        (
            empty.clone(),
            fixture("rsa-pkcs1.key"),
            &empty,
            "no certificate",
        ),
        (
            fixture("rsa.crt"),
            fixture("ec-sec1.key"),
            Path::new(""),
            "does not match",
        ),
        (dir.clone(), fixture("rsa-pkcs1.key"), &dir, "cannot read"),
    ];
    for (cert, key, named, words) in cases {
        let e = ServerTls::from_files(&cert, &key).unwrap_err();
        let message = e.to_string();
        assert!(message.contains(words), "{cert:?} {key:?}: {message}");
        if named.as_os_str().is_empty() {
            assert!(matches!(e, TlsError::KeyMismatch { .. }), "{message}");
            assert!(message.contains("ec-sec1.key") && message.contains("rsa.crt"));
        } else {
            assert!(message.contains(&named.display().to_string()), "{message}");
            assert_eq!(e.path(), Some(named));
        }
    }
    let e = ServerTls::builder(fixture("rsa.crt"), fixture("rsa-pkcs1.key"))
        .client_ca_file(&garbage)
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains(&garbage.display().to_string()),
        "{e}"
    );
    let e = ServerTls::builder(fixture("rsa.crt"), fixture("rsa-pkcs1.key"))
        .client_ca_file(&missing)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("missing.pem"), "{e}");
}

#[test]
fn a_pair_rewritten_in_place_is_served_to_new_handshakes() {
    let dir = temp_dir("in-place");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (c1, k1, der1) = new_pair();
    write(&cert, &c1);
    write(&key, &k1);
    let tls = fast(&cert, &key);
    assert_eq!(served_der(&tls), der1);
    assert_eq!(handshake_der(&tls), der1);

    let (c2, k2, der2) = new_pair();
    write(&cert, &c2);
    write(&key, &k2);
    assert!(eventually(Duration::from_secs(5), || served_der(&tls) == der2));
    assert_eq!(handshake_der(&tls), der2);
    assert_eq!(tls.reloads(), 1);
    assert_eq!(tls.reload_failures(), 0);
}

#[test]
fn a_secret_volume_data_swap_is_followed() {
    // The layout kubelet writes: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>, and a
    // rotation writes a new timestamped directory and renames a new ..data link over the old.
    let dir = temp_dir("secret");
    let (c1, k1, der1) = new_pair();
    let first = dir.join("..2026_11_26_13_00_00.1");
    std::fs::create_dir(&first).unwrap();
    write(&first.join("tls.crt"), &c1);
    write(&first.join("tls.key"), &k1);
    std::os::unix::fs::symlink("..2026_11_26_13_00_00.1", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/tls.crt", dir.join("tls.crt")).unwrap();
    std::os::unix::fs::symlink("..data/tls.key", dir.join("tls.key")).unwrap();
    let tls = fast(&dir.join("tls.crt"), &dir.join("tls.key"));
    assert_eq!(served_der(&tls), der1);

    let (c2, k2, der2) = new_pair();
    let second = dir.join("..2026_11_26_14_00_00.2");
    std::fs::create_dir(&second).unwrap();
    write(&second.join("tls.crt"), &c2);
    write(&second.join("tls.key"), &k2);
    std::os::unix::fs::symlink("..2026_11_26_14_00_00.2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();
    assert!(eventually(Duration::from_secs(5), || served_der(&tls) == der2));
    assert_eq!(handshake_der(&tls), der2);
    assert_eq!(tls.reload_failures(), 0);
}

#[test]
fn a_bad_pair_keeps_the_current_one_and_is_reported_once() {
    let dir = temp_dir("bad-pair");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (c1, k1, der1) = new_pair();
    write(&cert, &c1);
    write(&key, &k1);
    let tls = fast(&cert, &key);

    // A new certificate whose key has not been written yet: the keys do not match.
    let (c2, k2, der2) = new_pair();
    write(&cert, &c2);
    assert!(eventually(Duration::from_secs(5), || tls.reload_failures() == 1));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        tls.reload_failures(),
        1,
        "the same failure is reported once"
    );
    assert_eq!(served_der(&tls), der1);
    assert_eq!(handshake_der(&tls), der1);

    // A half-written key: still the old pair.
    write(&key, &k2[..k2.len() / 2]);
    assert!(eventually(Duration::from_secs(5), || tls.reload_failures() == 2));
    assert_eq!(served_der(&tls), der1);

    // The whole key: the new pair.
    write(&key, &k2);
    assert!(eventually(Duration::from_secs(5), || served_der(&tls) == der2));
    assert_eq!(tls.reloads(), 1);

    // A deleted file keeps the pair too.
    std::fs::remove_file(&cert).unwrap();
    assert!(eventually(Duration::from_secs(5), || tls.reload_failures() == 3));
    assert_eq!(handshake_der(&tls), der2);
}

#[test]
fn client_certificates_are_required_with_a_client_ca() {
    let tls = ServerTls::builder(fixture("rsa.crt"), fixture("rsa-pkcs1.key"))
        .client_ca_file(fixture("ec.crt"))
        .build()
        .unwrap();
    // A client without a certificate is refused at the handshake.
    let e = handshake(&tls).unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
}

#[test]
fn alpn_offers_h2_then_http11() {
    let tls = ServerTls::from_files(fixture("ec.crt"), fixture("ec-pkcs8.key")).unwrap();
    assert_eq!(
        tls.rustls_config().alpn_protocols,
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    );
}

/// The end-entity certificate a client gets in a handshake with `tls`.
fn handshake_der(tls: &ServerTls) -> Vec<u8> {
    handshake(tls).unwrap()
}

/// An in-memory handshake with `tls`: the certificate the client got.
fn handshake(tls: &ServerTls) -> Result<Vec<u8>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_config = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut client = ClientConnection::new(Arc::new(client_config), name)?;
    let mut server = ServerConnection::new(tls.rustls_config())?;
    for _ in 0..10 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            server.read_tls(&mut &buf[..]).unwrap();
            server.process_new_packets()?;
        }
        let mut buf = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            client.read_tls(&mut &buf[..]).unwrap();
            client.process_new_packets()?;
        }
        if !client.is_handshaking() && !server.is_handshaking() {
            break;
        }
    }
    let certs = client
        .peer_certificates()
        .ok_or(rustls::Error::NoCertificatesPresented)?;
    Ok(certs[0].to_vec())
}

/// Accepts any server certificate: the tests look at which one was served.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
