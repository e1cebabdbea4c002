//! TLS for [`AutoH2cServer`](crate::AutoH2cServer)'s TLS listeners: each connection's
//! handshake, run in the connection's own task on its worker and bounded by the handshake
//! timeout, below the HTTP/2 GOAWAY watcher, and the TLS stream a connection then speaks.
//!
//! A handshake still running when the server stops accepting gets at most
//! [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) more (from the
//! lifecycle's stop), not the rest of the handshake timeout: then it is cut and counted
//! ([`CutKind::TlsHandshake`]). One that completes by then has its connection ended
//! gracefully (HTTP/2 GOAWAY, HTTP/1 closed before its first request).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;

use actix_http::error::DispatchError;
use actix_http::Protocol;
use actix_rt::net::TcpStream;
use futures_util::future::{select, Either};
use lameduck::connection::CutKind;
use lameduck_hyper::{Alpn, ConnectionTracker, Runtime as _};
use lameduck_tls::{HandshakeError, ServerTls};
use lameduck_tokio::TokioRuntime;
use tokio::io::AsyncWriteExt as _;
use tokio_rustls::server::TlsStream;

use crate::connection::TrackedConnection;
use crate::goaway::{Announced, GoawayBroadcast, GoawayIo};
use crate::io::{AgedIo, ConnectionIo, TlsIo};

/// The TLS handshake of one worker's connections of one TLS listener.
pub(crate) struct TlsAcceptor {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) tls: ServerTls,
    pub(crate) goaway: Arc<GoawayBroadcast>,
    pub(crate) connections: ConnectionTracker,
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
        let counted = TrackedConnection::new(self.connections.open(), self.goaway.lifecycle());
        let age = self.goaway.age_from_now();
        let peer = io.peer_addr().ok();
        let timeout = self.tls.handshake_timeout();
        let shaken = {
            let shake = pin!(self.handshake(io));
            let timed_out = pin!(TokioRuntime.sleep_until(TokioRuntime.now() + timeout));
            let stopped = pin!(self.cut_after_stop());
            match select(shake, select(timed_out, stopped)).await {
                Either::Left((shaken, _)) => Some(shaken),
                Either::Right((Either::Left(_), _)) => Some(Err(HandshakeError::TimedOut(timeout))),
                // Still running a second after the server stopped accepting.
                Either::Right((Either::Right(_), _)) => None,
            }
        };
        let stream = match shaken {
            Some(Ok(stream)) => stream,
            Some(Err(e)) => {
                let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
                self.tls.handshake_failed(peer.unwrap_or(unknown), &e);
                return Err(DispatchError::Io(io::ErrorKind::ConnectionAborted.into()));
            }
            None => {
                if let Some((shared, _)) = self.goaway.lifecycle() {
                    shared
                        .counters()
                        .count_connection_cut(CutKind::TlsHandshake);
                }
                tracing::debug!(
                    ?peer,
                    "TLS handshake cut: not complete a second after the stop"
                );
                return Err(DispatchError::Io(io::ErrorKind::ConnectionAborted.into()));
            }
        };
        let alpn = Alpn::from_id(stream.get_ref().1.alpn_protocol());
        let io = TlsIo::new(stream, counted);
        Ok(match alpn {
            Some(Alpn::Http2) => {
                let io = GoawayIo::new(io, Arc::clone(&self.goaway)).with_age(age);
                (ConnectionIo::TlsHttp2(Box::new(io)), Protocol::Http2, peer)
            }
            Some(Alpn::Http1) | None => {
                let io = ConnectionIo::TlsHttp1(Box::new(io));
                let io = match age {
                    Some(at) => {
                        let aged = AgedIo::new(io, at, Arc::clone(&self.goaway));
                        ConnectionIo::AgedHttp1(Box::new(aged))
                    }
                    None => io,
                };
                (io, Protocol::Http1, peer)
            }
        })
    }

    /// Resolves when a handshake still running is cut: [`SILENT_PEER_TIMEOUT`] after the
    /// server stopped accepting (never without a lifecycle).
    ///
    /// [`SILENT_PEER_TIMEOUT`]: lameduck::connection::SILENT_PEER_TIMEOUT
    fn cut_after_stop(&self) -> impl Future<Output = ()> + 'static {
        let goaway = Arc::clone(&self.goaway);
        async move {
            Announced::new(Arc::clone(&goaway)).await;
            match goaway.handshake_cut_at() {
                Some(at) => TokioRuntime.sleep_until(at).await,
                None => std::future::pending().await,
            }
        }
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
