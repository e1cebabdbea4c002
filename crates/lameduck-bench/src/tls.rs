//! TLS for the per-request cost over TLS (`bare_hyper_tls`, `bench_tls_load`): a throwaway
//! self-signed certificate, and the client side of a connection.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lameduck_tls::rustls::pki_types::pem::PemObject;
use lameduck_tls::rustls::pki_types::{CertificateDer, ServerName};
use lameduck_tls::rustls::{self, ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// ALPN `h2`.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN `http/1.1`.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Writes a self-signed certificate for `127.0.0.1` and `localhost` (rcgen's default key,
/// ECDSA P-256) and its key to `dir/cert.pem` and `dir/key.pem`; returns both paths.
///
/// # Errors
///
/// The files cannot be written.
pub fn write_certificate(dir: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(io::Error::other)?;
    std::fs::create_dir_all(dir)?;
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, signing_key.serialize_pem())?;
    Ok((cert_path, key_path))
}

/// A client configuration (ring, TLS 1.2 and 1.3 as rustls defaults) trusting the
/// certificates in the PEM file `ca`, offering `alpn`; without `resume`, every connection
/// makes a full handshake (no session resumption).
///
/// # Errors
///
/// `ca` cannot be read or holds no certificate.
pub fn client_config(ca: &Path, alpn: &[u8], resume: bool) -> io::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(io::Error::other)? {
        roots
            .add(cert.map_err(io::Error::other)?)
            .map_err(io::Error::other)?;
    }
    if roots.is_empty() {
        return Err(io::Error::other(format!(
            "no certificate in {}",
            ca.display()
        )));
    }
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(config))
}

/// Connects to `addr` (with `TCP_NODELAY`) and makes the handshake; fails unless the server
/// chose the protocol the configuration offers.
///
/// # Errors
///
/// Connecting or the handshake failed, or the server chose another protocol.
pub async fn connect(
    connector: &TlsConnector,
    addr: SocketAddr,
    alpn: &[u8],
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::IpAddress(addr.ip().into());
    let stream = connector.connect(name, tcp).await?;
    let chosen = stream.get_ref().1.alpn_protocol();
    if chosen != Some(alpn) {
        return Err(io::Error::other(format!(
            "the server chose ALPN {:?}, not {:?}",
            chosen.map(String::from_utf8_lossy),
            String::from_utf8_lossy(alpn)
        )));
    }
    Ok(stream)
}
