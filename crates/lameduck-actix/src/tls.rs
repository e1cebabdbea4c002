//! TLS for [`AutoH2cServer`](crate::AutoH2cServer)'s TLS listeners: each connection's
//! handshake, run in the connection's own task on its worker and bounded by the handshake
//! timeout, below the HTTP/2 GOAWAY watcher, and the TLS stream a connection then speaks.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use actix_http::error::DispatchError;
use actix_http::Protocol;
use actix_rt::net::TcpStream;
use lameduck_hyper::{Alpn, ConnectionTracker};
use lameduck_tls::{HandshakeError, ServerTls};
use tokio::io::AsyncWriteExt as _;
use tokio_rustls::server::TlsStream;

use crate::goaway::{GoawayBroadcast, GoawayIo};
use crate::io::{ConnectionIo, TlsIo};

/// The TLS handshake of one worker's connections of one TLS listener.
pub(crate) struct TlsAcceptor {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) tls: ServerTls,
    pub(crate) goaway: Arc<GoawayBroadcast>,
    pub(crate) connections: ConnectionTracker,
    /// The handshakes in progress, which a termination waits for.
    pub(crate) handshakes: ConnectionTracker,
}

/// The most bytes of a plaintext request read (and discarded) before its connection is closed.
const PLAINTEXT_DISCARD_LIMIT: usize = 64 * 1024;

impl TlsAcceptor {
    /// One accepted TLS connection, run in the connection's own task: counted at once, its
    /// handshake bounded by the handshake timeout, its protocol chosen by ALPN. A failure is
    /// reported to the [`ServerTls`] and ends the connection (actix logs nothing about it).
    pub(crate) async fn accept(
        self: Rc<Self>,
        io: TcpStream,
    ) -> Result<(ConnectionIo, Protocol, Option<SocketAddr>), DispatchError> {
        // Counted from accept on: a termination waits for the handshake.
        let counted = self.connections.open();
        let handshaking = self.handshakes.open();
        let peer = io.peer_addr().ok();
        let timeout = self.tls.handshake_timeout();
        let shaken = match tokio::time::timeout(timeout, self.handshake(io)).await {
            Ok(shaken) => shaken,
            Err(_elapsed) => Err(HandshakeError::TimedOut(timeout)),
        };
        drop(handshaking);
        let stream = match shaken {
            Ok(stream) => stream,
            Err(e) => {
                let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
                self.tls.handshake_failed(peer.unwrap_or(unknown), &e);
                return Err(DispatchError::Io(io::ErrorKind::ConnectionAborted.into()));
            }
        };
        let alpn = Alpn::from_id(stream.get_ref().1.alpn_protocol());
        let io = TlsIo::new(stream, counted);
        Ok(match alpn {
            Some(Alpn::Http2) => {
                let io = GoawayIo::new(io, Arc::clone(&self.goaway));
                (ConnectionIo::TlsHttp2(Box::new(io)), Protocol::Http2, peer)
            }
            Some(Alpn::Http1) | None => {
                (ConnectionIo::TlsHttp1(Box::new(io)), Protocol::Http1, peer)
            }
        })
    }

    /// The handshake: a plaintext request is answered 400 and closed, anything else that is
    /// not TLS fails in rustls.
    async fn handshake(&self, mut tcp: TcpStream) -> Result<TlsStream<TcpStream>, HandshakeError> {
        let mut first = [0u8; 1];
        if tcp.peek(&mut first).await? == 0 {
            return Err(HandshakeError::Closed);
        }
        if !lameduck_tls::starts_tls_handshake(first[0]) {
            let _ = tcp.write_all(lameduck_tls::PLAINTEXT_HTTP_RESPONSE).await;
            let _ = tcp.shutdown().await;
            discard_received(&tcp);
            return Err(HandshakeError::PlaintextHttp);
        }
        Ok(self.acceptor.accept(tcp).await?)
    }
}

/// Reads and discards what the client has sent so far (without waiting), so that closing the
/// socket sends FIN after the response rather than a reset that could destroy it unread.
fn discard_received(tcp: &TcpStream) {
    let mut buf = [0u8; 4096];
    let mut read = 0;
    while read < PLAINTEXT_DISCARD_LIMIT {
        match tcp.try_read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
}
