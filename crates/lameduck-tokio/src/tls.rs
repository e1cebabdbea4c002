//! TLS listeners on tokio: [`TlsAcceptor`] runs each connection's handshake with
//! tokio-rustls, in the connection's own task (see [`Server::serve_tls`]). The accept itself
//! (the first-byte check, the plaintext answer, the failures reported) is
//! [`lameduck_tls::acceptor`]'s; this is tokio's I/O for it.
//!
//! [`Server::serve_tls`]: lameduck_hyper::Server::serve_tls

use std::future::Future;
use std::io;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use lameduck_tls::acceptor::RustlsRuntime;
use lameduck_tls::rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt as _};

use crate::TokioRuntime;

/// The TLS handshake of a [`TokioListener`](crate::TokioListener)'s connections, with the
/// certificate that [`ServerTls`](lameduck_tls::ServerTls) serves at that moment, for
/// [`Server::serve_tls`](lameduck_hyper::Server::serve_tls): see
/// [`lameduck_tls::acceptor::TlsAcceptor`].
pub type TlsAcceptor = lameduck_tls::acceptor::TlsAcceptor<TokioRustls>;

/// tokio's TCP streams and tokio-rustls, for a [`TlsAcceptor`]: the TLS stream is
/// tokio-rustls' own; only a plaintext request's answer goes through tokio-util's compat.
#[derive(Clone, Copy, Debug)]
pub struct TokioRustls;

impl RustlsRuntime for TokioRustls {
    type Runtime = TokioRuntime;
    type Tcp = TokioIo<TcpStream>;
    type Plain = Compat<TcpStream>;
    type Acceptor = tokio_rustls::TlsAcceptor;
    type Tls = TokioIo<TlsStream<TcpStream>>;

    fn acceptor(config: Arc<ServerConfig>) -> Self::Acceptor {
        config.into()
    }

    fn peek(tcp: &Self::Tcp, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>> + Send {
        tcp.inner().peek(buf)
    }

    fn plain(tcp: Self::Tcp) -> Self::Plain {
        tcp.into_inner().compat()
    }

    async fn handshake(acceptor: &Self::Acceptor, tcp: Self::Tcp) -> io::Result<Self::Tls> {
        Ok(TokioIo::new(acceptor.accept(tcp.into_inner()).await?))
    }

    fn alpn(tls: &Self::Tls) -> Option<&[u8]> {
        tls.inner().get_ref().1.alpn_protocol()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use lameduck_hyper::Alpn;
    use lameduck_test_support::plaintext::plaintext_post;
    use lameduck_tls::acceptor::PLAINTEXT_DISCARD_TIMEOUT;
    use lameduck_tls::rustls::pki_types::ServerName;
    use lameduck_tls::rustls::{self, ClientConfig, RootCertStore};
    use lameduck_tls::{ServerTls, PLAINTEXT_HTTP_RESPONSE};
    use tokio::net::TcpListener;

    use super::*;

    /// A self-signed certificate for 127.0.0.1 in `name`'s directory: the served pair, and a
    /// client that trusts it offering `alpn`.
    fn certificate(name: &str, alpn: &[u8]) -> (ServerTls, Arc<ClientConfig>) {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("lameduck-tokio-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), signing_key.serialize_pem()).unwrap();
        let tls = ServerTls::from_files(dir.join("tls.crt"), dir.join("tls.key")).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![alpn.to_vec()];
        (tls, Arc::new(client))
    }

    /// How one accept ended (`None`: failed; else the protocol ALPN chose), and when.
    type Accepted = tokio::task::JoinHandle<(Option<Option<Alpn>>, Instant)>;

    /// One connection to a listener of `acceptor`'s.
    async fn listen(acceptor: TlsAcceptor) -> (SocketAddr, Accepted) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = tokio::spawn(async move {
            let (tcp, peer) = listener.accept().await.unwrap();
            let shaken = acceptor.accept(TokioIo::new(tcp), peer).await;
            (shaken.map(|(_, alpn)| alpn), Instant::now())
        });
        (addr, accepted)
    }

    #[tokio::test]
    async fn plaintext_is_answered_400_read_to_its_end_and_closed_with_a_fin() {
        let (tls, _) = certificate("plaintext", b"h2");
        let (addr, accepted) = listen(TlsAcceptor::new(&tls)).await;
        let client = tokio::task::spawn_blocking(move || plaintext_post(addr, 32 * 1024));
        let exchange = client.await.unwrap();
        assert!(exchange.body_sent.is_ok(), "{:?}", exchange.body_sent);
        assert_eq!(exchange.answer, PLAINTEXT_HTTP_RESPONSE);
        assert!(
            exchange.end.is_ok(),
            "a FIN, not a reset: {:?}",
            exchange.end
        );
        // The client keeps its side open: the server stops reading at the discard bound.
        let held = Instant::now();
        let (shaken, at) = accepted.await.unwrap();
        assert_eq!(shaken, None);
        assert!(at - held < PLAINTEXT_DISCARD_TIMEOUT + Duration::from_secs(1));
        assert_eq!(tls.handshake_failures(), 1);
        drop(exchange.stream);
    }

    #[tokio::test]
    async fn tls_is_shaken_and_alpn_says_the_protocol() {
        let (tls, client) = certificate("alpn", b"h2");
        let (addr, accepted) = listen(TlsAcceptor::new(&tls)).await;
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let connector = tokio_rustls::TlsConnector::from(client);
        let _io = connector.connect(name, tcp).await.unwrap();
        assert_eq!(accepted.await.unwrap().0, Some(Some(Alpn::Http2)));
        assert_eq!(tls.handshake_failures(), 0);
    }
}
