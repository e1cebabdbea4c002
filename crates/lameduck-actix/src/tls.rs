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
use hyper_util::rt::TokioIo;
use lameduck::connection::CutKind;
use lameduck_hyper::{Alpn, ConnectionTracker, Runtime as _};
use lameduck_tokio::{TlsAcceptor as Rustls, TokioRuntime};

use crate::connection::TrackedConnection;
use crate::goaway::{Announced, GoawayBroadcast, GoawayIo};
use crate::io::{AgedIo, ConnectionIo, TlsIo};

/// The TLS handshake of one worker's connections of one TLS listener: lameduck-tokio's
/// (which answers a plaintext request 400, reads what the client sent and closes with a FIN,
/// and reports every failure), bounded here by the handshake timeout and the stop.
pub(crate) struct TlsAcceptor {
    pub(crate) rustls: Rustls,
    pub(crate) goaway: Arc<GoawayBroadcast>,
    pub(crate) connections: ConnectionTracker,
}

impl TlsAcceptor {
    /// One accepted TLS connection, run in the connection's own task: counted at once, its
    /// handshake bounded by the handshake timeout, its protocol chosen by ALPN. A failure is
    /// reported to the [`ServerTls`](lameduck_tls::ServerTls) and ends the connection (actix
    /// logs nothing about it).
    pub(crate) async fn accept(
        self: Rc<Self>,
        io: TcpStream,
    ) -> Result<(ConnectionIo, Protocol, Option<SocketAddr>), DispatchError> {
        // Counted from accept on: a termination waits for the handshake.
        let counted = TrackedConnection::new(self.connections.open(), self.goaway.lifecycle());
        let age = self.goaway.age_from_now();
        let peer = io.peer_addr().ok();
        let reported = peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        let timeout = self.rustls.server_tls().handshake_timeout();
        let aborted = || DispatchError::Io(io::ErrorKind::ConnectionAborted.into());
        let (stream, alpn) = {
            let shake = pin!(self.rustls.accept(TokioIo::new(io), reported));
            let timed_out = pin!(TokioRuntime.sleep_until(TokioRuntime.now() + timeout));
            let stopped = pin!(self.cut_after_stop());
            match select(shake, select(timed_out, stopped)).await {
                Either::Left((Some(shaken), _)) => shaken,
                // Failed, and reported.
                Either::Left((None, _)) => return Err(aborted()),
                Either::Right((Either::Left(_), _)) => {
                    self.rustls.timed_out(reported);
                    return Err(aborted());
                }
                // Still running a second after the server stopped accepting.
                Either::Right((Either::Right(_), _)) => {
                    if let Some((shared, _)) = self.goaway.lifecycle() {
                        shared
                            .counters()
                            .count_connection_cut(CutKind::TlsHandshake);
                    }
                    tracing::debug!(
                        ?peer,
                        "TLS handshake cut: not complete a second after the stop"
                    );
                    return Err(aborted());
                }
            }
        };
        let io = TlsIo::new(stream.into_inner(), counted);
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
}
