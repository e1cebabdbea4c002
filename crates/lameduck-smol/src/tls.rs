//! TLS listeners on smol: [`TlsAcceptor`] runs each connection's handshake with
//! futures-rustls, in the connection's own task (see [`Server::serve_tls`]). The accept
//! itself (the first-byte check, the plaintext answer, the failures reported) is
//! [`lameduck_tls::acceptor`]'s; this is smol's I/O for it.
//!
//! [`Server::serve_tls`]: lameduck_hyper::Server::serve_tls

use std::future::Future;
use std::io;
use std::sync::Arc;

use async_net::TcpStream;
use futures_rustls::server::TlsStream;
use lameduck_tls::acceptor::RustlsRuntime;
use lameduck_tls::rustls::ServerConfig;
use smol_hyper::rt::FuturesIo;

use crate::SmolRuntime;

/// The TLS handshake of a [`SmolListener`](crate::SmolListener)'s connections, with the
/// certificate that [`ServerTls`](lameduck_tls::ServerTls) serves at that moment, for
/// [`Server::serve_tls`](lameduck_hyper::Server::serve_tls): see
/// [`lameduck_tls::acceptor::TlsAcceptor`].
pub type TlsAcceptor = lameduck_tls::acceptor::TlsAcceptor<SmolRustls>;

/// async-net's TCP streams (futures-io already) and futures-rustls, for a [`TlsAcceptor`].
#[derive(Clone, Copy, Debug)]
pub struct SmolRustls;

impl RustlsRuntime for SmolRustls {
    type Runtime = SmolRuntime;
    type Tcp = FuturesIo<TcpStream>;
    type Plain = TcpStream;
    type Acceptor = futures_rustls::TlsAcceptor;
    type Tls = FuturesIo<TlsStream<TcpStream>>;

    fn acceptor(config: Arc<ServerConfig>) -> Self::Acceptor {
        config.into()
    }

    fn peek(tcp: &Self::Tcp, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>> + Send {
        tcp.get_ref().peek(buf)
    }

    fn plain(tcp: Self::Tcp) -> Self::Plain {
        tcp.into_inner()
    }

    async fn handshake(acceptor: &Self::Acceptor, tcp: Self::Tcp) -> io::Result<Self::Tls> {
        Ok(FuturesIo::new(acceptor.accept(tcp.into_inner()).await?))
    }

    fn alpn(tls: &Self::Tls) -> Option<&[u8]> {
        tls.get_ref().get_ref().1.alpn_protocol()
    }
}

#[cfg(test)]
mod tests {
    use lameduck_test_support::plaintext::plaintext_post;
    use lameduck_tls::{ServerTls, PLAINTEXT_HTTP_RESPONSE};

    use super::*;

    /// The served pair: a certificate for 127.0.0.1 made on the spot.
    fn server_tls() -> ServerTls {
        let dir = std::env::temp_dir().join(format!("lameduck-smol-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
        ServerTls::from_files(cert, key).unwrap()
    }

    #[test]
    fn plaintext_is_answered_400_read_to_its_end_and_closed_with_a_fin() {
        let tls = server_tls();
        let acceptor = TlsAcceptor::new(&tls);
        smol::block_on(async {
            let listener = async_net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = smol::unblock(move || plaintext_post(addr, 32 * 1024));
            let (tcp, peer) = listener.accept().await.unwrap();
            let server = async { acceptor.accept(FuturesIo::new(tcp), peer).await.is_none() };
            let (failed, exchange) = futures_lite::future::zip(server, client).await;
            assert!(failed);
            assert!(exchange.body_sent.is_ok(), "{:?}", exchange.body_sent);
            assert_eq!(exchange.answer, PLAINTEXT_HTTP_RESPONSE);
            assert!(
                exchange.end.is_ok(),
                "a FIN, not a reset: {:?}",
                exchange.end
            );
        });
        assert_eq!(tls.handshake_failures(), 1);
    }
}
