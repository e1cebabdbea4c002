//! The TLS accept of every runtime adapter, written once (the `acceptor` feature): the
//! tokio and smol adapters' `TlsAcceptor` is a [`TlsAcceptor`] over their [`RustlsRuntime`],
//! and lameduck-actix's TLS listeners run the tokio one.
//!
//! A connection's first byte is peeked. None (the client left) fails with
//! [`HandshakeError::Closed`]. A byte that starts no TLS handshake is most likely a
//! plaintext HTTP request: it is answered [`PLAINTEXT_HTTP_RESPONSE`], the writing side is
//! shut down (a FIN after the answer), and what the client sent is read and discarded (at
//! most [`PLAINTEXT_DISCARD_LIMIT`] bytes, for at most [`PLAINTEXT_DISCARD_TIMEOUT`]) before
//! the connection closes: a socket closed with unread bytes sends a reset, which can destroy
//! the answer before the client reads it. Anything else goes to rustls' handshake, and the
//! protocol the client chose by ALPN is what the connection speaks ([`Alpn`]). Every
//! failure, and a handshake cut at its timeout ([`TlsAcceptor::timed_out`]), is reported to
//! [`ServerTls::handshake_failed`].
//!
//! Only the plaintext answer goes through futures-io ([`RustlsRuntime::Plain`]); the TLS
//! stream is the runtime's own rustls stream, with nothing between it and the socket.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select;
use futures_util::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use lameduck_hyper::{Alpn, Handshake, Runtime};
use rustls::ServerConfig;

use crate::{starts_tls_handshake, HandshakeError, ServerTls, PLAINTEXT_HTTP_RESPONSE};

/// The most bytes of a plaintext request read (and discarded) before its connection closes.
pub const PLAINTEXT_DISCARD_LIMIT: usize = 64 * 1024;

/// How long a plaintext request's connection is read (and what arrives discarded) after the
/// answer, at the most: until then a client that reads the answer and closes is closed with
/// a FIN; one that stays silent holds the connection no longer (Go's servers wait as long
/// before a close that could send a reset).
pub const PLAINTEXT_DISCARD_TIMEOUT: Duration = Duration::from_millis(500);

/// How a runtime runs rustls over its TCP connections: the types, and the steps that touch
/// them, for a [`TlsAcceptor`]. An adapter implements it on a type of its own (plumbing only).
pub trait RustlsRuntime: Send + Sync + 'static {
    /// The runtime whose clock bounds the plaintext discard.
    type Runtime: Runtime + Default;
    /// An accepted TCP connection, as the listener gives it ([`Handshake`]'s input).
    type Tcp: Send + Sync + 'static;
    /// The TCP connection as futures-io, to answer a plaintext request on.
    type Plain: AsyncRead + AsyncWrite + Unpin + Send;
    /// The runtime's rustls acceptor.
    type Acceptor: Clone + Send + Sync + 'static;
    /// A connection after its handshake, as hyper reads it.
    type Tls: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// The acceptor of `config`.
    fn acceptor(config: Arc<ServerConfig>) -> Self::Acceptor;
    /// Peeks at the connection's first bytes, waiting for one.
    fn peek(tcp: &Self::Tcp, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>> + Send;
    /// The connection as futures-io.
    fn plain(tcp: Self::Tcp) -> Self::Plain;
    /// rustls' handshake on the connection.
    fn handshake(
        acceptor: &Self::Acceptor,
        tcp: Self::Tcp,
    ) -> impl Future<Output = io::Result<Self::Tls>> + Send;
    /// The protocol the client chose by ALPN.
    fn alpn(tls: &Self::Tls) -> Option<&[u8]>;
}

/// The TLS handshake of a listener's connections, with the certificate that [`ServerTls`]
/// serves at that moment, for [`Server::serve_tls`](lameduck_hyper::Server::serve_tls).
///
/// A connection whose first byte is not a TLS handshake (a plaintext HTTP request) is
/// answered `400 Bad Request`, read until the client closes (bounded), and closed; failures
/// are counted and logged by the [`ServerTls`] without flooding.
pub struct TlsAcceptor<T: RustlsRuntime> {
    tls: ServerTls,
    acceptor: T::Acceptor,
    runtime: T::Runtime,
    _runtime: PhantomData<fn() -> T>,
}

impl<T: RustlsRuntime> Clone for TlsAcceptor<T> {
    fn clone(&self) -> Self {
        TlsAcceptor {
            tls: self.tls.clone(),
            acceptor: self.acceptor.clone(),
            runtime: self.runtime.clone(),
            _runtime: PhantomData,
        }
    }
}

impl<T: RustlsRuntime> std::fmt::Debug for TlsAcceptor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl<T: RustlsRuntime> TlsAcceptor<T> {
    /// Handshakes with `tls`'s configuration (which follows its files).
    #[must_use]
    pub fn new(tls: &ServerTls) -> Self {
        TlsAcceptor {
            tls: tls.clone(),
            acceptor: T::acceptor(tls.rustls_config()),
            runtime: T::Runtime::default(),
            _runtime: PhantomData,
        }
    }

    /// The configuration handshakes are made with.
    #[must_use]
    pub fn server_tls(&self) -> &ServerTls {
        &self.tls
    }

    /// The handshake of `tcp`, accepted from `peer`: the TLS connection and the protocol it
    /// speaks, or `None` when it failed (reported to the [`ServerTls`]). Unbounded: the
    /// caller bounds it by [`ServerTls::handshake_timeout`] and reports a cut with
    /// [`TlsAcceptor::timed_out`].
    pub async fn accept(&self, tcp: T::Tcp, peer: SocketAddr) -> Option<(T::Tls, Option<Alpn>)> {
        match self.try_accept(tcp).await {
            Ok(tls) => {
                let alpn = Alpn::from_id(T::alpn(&tls));
                Some((tls, alpn))
            }
            Err(e) => {
                self.tls.handshake_failed(peer, &e);
                None
            }
        }
    }

    /// Reports a handshake from `peer` cut at the handshake timeout.
    pub fn timed_out(&self, peer: SocketAddr) {
        let timeout = self.tls.handshake_timeout();
        self.tls
            .handshake_failed(peer, &HandshakeError::TimedOut(timeout));
    }

    async fn try_accept(&self, tcp: T::Tcp) -> Result<T::Tls, HandshakeError> {
        let mut first = [0u8; 1];
        if T::peek(&tcp, &mut first).await? == 0 {
            return Err(HandshakeError::Closed);
        }
        if !starts_tls_handshake(first[0]) {
            let bound = self.runtime.now() + PLAINTEXT_DISCARD_TIMEOUT;
            refuse_plaintext(T::plain(tcp), self.runtime.sleep_until(bound)).await;
            return Err(HandshakeError::PlaintextHttp);
        }
        Ok(T::handshake(&self.acceptor, tcp).await?)
    }
}

impl<T: RustlsRuntime> Handshake<T::Tcp> for TlsAcceptor<T> {
    type Io = T::Tls;

    fn timeout(&self) -> Duration {
        self.tls.handshake_timeout()
    }

    async fn handshake(&self, io: T::Tcp, peer: SocketAddr) -> Option<(T::Tls, Option<Alpn>)> {
        self.accept(io, peer).await
    }

    fn timed_out(&self, peer: SocketAddr) {
        TlsAcceptor::timed_out(self, peer);
    }
}

/// Answers a plaintext request: [`PLAINTEXT_HTTP_RESPONSE`], a FIN, then what the client sent
/// read and dropped until it closes (at most [`PLAINTEXT_DISCARD_LIMIT`] bytes, until `bound`),
/// so that the close that follows is no reset.
async fn refuse_plaintext<P>(mut plain: P, bound: impl Future<Output = ()>)
where
    P: AsyncRead + AsyncWrite + Unpin,
{
    if plain.write_all(PLAINTEXT_HTTP_RESPONSE).await.is_err() || plain.close().await.is_err() {
        return;
    }
    select(
        pin!(discard(&mut plain, PLAINTEXT_DISCARD_LIMIT)),
        pin!(bound),
    )
    .await;
}

/// Reads and drops up to `limit` bytes (a few more at most), until the end or an error.
async fn discard<P: AsyncRead + Unpin>(plain: &mut P, limit: usize) {
    // On the heap: a plaintext request is rare, and a connection's task stays small.
    let mut buf = vec![0u8; 4096];
    let mut read = 0;
    while read < limit {
        match plain.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => read += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures_util::io::Cursor;
    use futures_util::FutureExt as _;

    /// Runs a future that never waits (its I/O is in memory).
    fn run(future: impl Future<Output = ()>) {
        future.now_or_never().expect("in-memory I/O never waits");
    }

    /// A peer that sent `sent`, then closed; records what it is written and whether it was
    /// shut down.
    struct Peer {
        sent: Cursor<Vec<u8>>,
        written: Vec<u8>,
        closed: bool,
    }

    impl AsyncRead for Peer {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::pin::Pin::new(&mut self.sent).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Peer {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            assert!(!self.closed, "written after the shutdown");
            self.written.extend_from_slice(buf);
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            self.closed = true;
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn discard_reads_to_the_end_or_the_limit() {
        let mut peer = Cursor::new(vec![7u8; 10_000]);
        run(discard(&mut peer, 100_000));
        assert_eq!(peer.position(), 10_000, "read to the end");
        let mut peer = Cursor::new(vec![7u8; 100_000]);
        run(discard(&mut peer, 8192));
        assert_eq!(peer.position(), 8192, "stopped at the limit");
    }

    #[test]
    fn the_answer_is_written_then_shut_down_then_the_request_read() {
        let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut peer = Peer {
            sent: Cursor::new(request.clone()),
            written: Vec::new(),
            closed: false,
        };
        let never = std::future::pending();
        run(refuse_plaintext(&mut peer, never));
        assert_eq!(peer.written, PLAINTEXT_HTTP_RESPONSE);
        assert!(peer.closed, "shut down after the answer");
        assert_eq!(
            peer.sent.position() as usize,
            request.len(),
            "read to the end"
        );
    }

    /// A peer that never sends nor closes.
    struct Silent;

    impl AsyncRead for Silent {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut [u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::task::Poll::Pending
        }
    }

    impl AsyncWrite for Silent {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_silent_peer_is_held_until_the_bound_only() {
        run(refuse_plaintext(Silent, std::future::ready(())));
    }
}
