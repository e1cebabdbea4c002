//! TLS listeners on tokio: [`TlsAcceptor`] runs each connection's handshake with
//! tokio-rustls, in the connection's own task (see [`Server::serve_tls`]).
//!
//! [`Server::serve_tls`]: lameduck_hyper::Server::serve_tls

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use lameduck_hyper::{Alpn, Handshake};
use lameduck_tls::{HandshakeError, ServerTls};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The TLS handshake of a [`TokioListener`](crate::TokioListener)'s connections, with the
/// certificate that [`ServerTls`] serves at that moment, for
/// [`Server::serve_tls`](lameduck_hyper::Server::serve_tls).
///
/// A connection whose first byte is not a TLS handshake (a plaintext HTTP request) is
/// answered `400 Bad Request` and closed; failures are counted and logged by the
/// [`ServerTls`] without flooding.
#[derive(Clone)]
pub struct TlsAcceptor {
    tls: ServerTls,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl TlsAcceptor {
    /// Handshakes with `tls`'s configuration (which follows its files).
    #[must_use]
    pub fn new(tls: &ServerTls) -> Self {
        TlsAcceptor {
            tls: tls.clone(),
            acceptor: tokio_rustls::TlsAcceptor::from(tls.rustls_config()),
        }
    }

    async fn accept(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, HandshakeError> {
        let mut first = [0u8; 1];
        if tcp.peek(&mut first).await? == 0 {
            return Err(HandshakeError::Closed);
        }
        if !lameduck_tls::starts_tls_handshake(first[0]) {
            let mut tcp = tcp;
            let _ = tcp.write_all(lameduck_tls::PLAINTEXT_HTTP_RESPONSE).await;
            let _ = tcp.shutdown().await;
            return Err(HandshakeError::PlaintextHttp);
        }
        Ok(self.acceptor.accept(tcp).await?)
    }
}

impl Handshake<TokioIo<TcpStream>> for TlsAcceptor {
    type Io = TokioIo<TlsStream<TcpStream>>;

    fn timeout(&self) -> Duration {
        self.tls.handshake_timeout()
    }

    async fn handshake(
        &self,
        io: TokioIo<TcpStream>,
        peer: SocketAddr,
    ) -> Option<(Self::Io, Option<Alpn>)> {
        match self.accept(io.into_inner()).await {
            Ok(stream) => {
                let alpn = Alpn::from_id(stream.get_ref().1.alpn_protocol());
                Some((TokioIo::new(stream), alpn))
            }
            Err(e) => {
                self.tls.handshake_failed(peer, &e);
                None
            }
        }
    }

    fn timed_out(&self, peer: SocketAddr) {
        let timeout = self.tls.handshake_timeout();
        self.tls
            .handshake_failed(peer, &HandshakeError::TimedOut(timeout));
    }
}
