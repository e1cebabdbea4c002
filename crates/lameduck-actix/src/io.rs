//! The I/O of an [`AutoH2cServer`](crate::AutoH2cServer) connection: the socket, or the TLS
//! stream over it, with the HTTP/2 GOAWAY watcher on top for HTTP/2, and, for an HTTP/1
//! connection with a [maximum age](lameduck::Config::max_connection_age), the age on top
//! ([`AgedIo`]).

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use actix_rt::net::TcpStream;
use lameduck::connection::CutKind;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::server::TlsStream;

use crate::connection::TrackedConnection;
use crate::goaway::{ConnectionCut, GoawayBroadcast, GoawayIo};

/// The I/O of one connection: the plain socket for HTTP/1 (passed through untouched), the
/// GOAWAY-watching wrapper for HTTP/2; over TLS the same, above the TLS stream.
#[derive(Debug)]
pub enum ConnectionIo {
    /// An HTTP/1 connection.
    Http1(TcpStream),
    /// An h2c connection.
    Http2(Box<GoawayIo<TcpStream>>),
    /// An HTTP/1 connection over TLS (ALPN `http/1.1`, or none).
    TlsHttp1(Box<TlsIo>),
    /// An HTTP/2 connection over TLS (ALPN `h2`), watched for GOAWAY above the TLS stream.
    TlsHttp2(Box<GoawayIo<TlsIo>>),
    /// An HTTP/1 connection ([`ConnectionIo::Http1`] or [`ConnectionIo::TlsHttp1`]) with a
    /// maximum age.
    AgedHttp1(Box<AgedIo<ConnectionIo>>),
}

impl AsyncRead for ConnectionIo {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_read(cx, buf),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_read(cx, buf),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_read(cx, buf),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_read(cx, buf),
            ConnectionIo::AgedHttp1(io) => Pin::new(&mut **io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnectionIo {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_write(cx, buf),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_write(cx, buf),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_write(cx, buf),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_write(cx, buf),
            ConnectionIo::AgedHttp1(io) => Pin::new(&mut **io).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
            ConnectionIo::AgedHttp1(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            ConnectionIo::Http1(io) => io.is_write_vectored(),
            ConnectionIo::Http2(io) => io.is_write_vectored(),
            ConnectionIo::TlsHttp1(io) => io.is_write_vectored(),
            ConnectionIo::TlsHttp2(io) => io.is_write_vectored(),
            ConnectionIo::AgedHttp1(io) => io.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_flush(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_flush(cx),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_flush(cx),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_flush(cx),
            ConnectionIo::AgedHttp1(io) => Pin::new(&mut **io).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_shutdown(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_shutdown(cx),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_shutdown(cx),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_shutdown(cx),
            ConnectionIo::AgedHttp1(io) => Pin::new(&mut **io).poll_shutdown(cx),
        }
    }
}

/// A TLS connection once its handshake is done: the TLS stream over the socket, holding the
/// connection's place in the server's connection count (taken at accept, before the
/// handshake) until the connection is dropped.
pub struct TlsIo {
    stream: TlsStream<TcpStream>,
    _counted: TrackedConnection,
}

impl std::fmt::Debug for TlsIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIo")
            .field("tcp", self.tcp_stream())
            .field("alpn", &self.connection().alpn_protocol())
            .finish_non_exhaustive()
    }
}

impl TlsIo {
    /// A connection over `stream`, counted by `counted` until it is dropped.
    pub(crate) fn new(stream: TlsStream<TcpStream>, counted: TrackedConnection) -> Self {
        TlsIo {
            stream,
            _counted: counted,
        }
    }

    /// The socket.
    #[must_use]
    pub fn tcp_stream(&self) -> &TcpStream {
        self.stream.get_ref().0
    }

    /// The rustls connection: the negotiated ALPN protocol and TLS version, the SNI name, the
    /// client's certificates (with a client CA).
    #[must_use]
    pub fn connection(&self) -> &lameduck_tls::rustls::ServerConnection {
        self.stream.get_ref().1
    }
}

impl AsyncRead for TlsIo {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsIo {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// An HTTP/1 connection with a [maximum age](lameduck::Config::max_connection_age): when it
/// reaches it (actix's graceful-shutdown signal then closes it after its response, or at once
/// when idle), and, with a [grace](lameduck::Config::max_connection_age_grace), the cut of a
/// response that outlasts the grace: every read and write fails from then on, so that actix
/// drops the connection, counted as [`CutKind::MaxConnectionAge`].
pub struct AgedIo<T> {
    inner: T,
    aged_at: Instant,
    /// The end of the grace, armed on the first read or write (inside the worker's runtime).
    cut_at: Option<Instant>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Where the cut is counted.
    broadcast: Arc<GoawayBroadcast>,
    cut: bool,
}

impl<T> std::fmt::Debug for AgedIo<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgedIo")
            .field("aged_at", &self.aged_at)
            .field("cut_at", &self.cut_at)
            .field("cut", &self.cut)
            .finish_non_exhaustive()
    }
}

impl<T> AgedIo<T> {
    /// `inner`, which reaches its maximum age at `aged_at`, in the server of `broadcast`.
    pub(crate) fn new(inner: T, aged_at: Instant, broadcast: Arc<GoawayBroadcast>) -> Self {
        let grace = broadcast
            .lifecycle()
            .map(|(shared, _)| shared.config().max_connection_age_grace())
            .filter(|grace| !grace.is_zero());
        AgedIo {
            inner,
            aged_at,
            cut_at: grace.and_then(|grace| aged_at.checked_add(grace)),
            timer: None,
            broadcast,
            cut: false,
        }
    }

    /// When the connection reaches its maximum age.
    #[must_use]
    pub fn aged_at(&self) -> Instant {
        self.aged_at
    }

    /// The connection's I/O.
    #[must_use]
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Whether the connection is cut (now, or before): the error to return.
    fn poll_cut(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if !self.cut {
            let at = self.cut_at?;
            if self.timer.is_none() {
                if tokio::runtime::Handle::try_current().is_err() {
                    return None;
                }
                self.timer = Some(Box::pin(tokio::time::sleep_until(at.into())));
            }
            let timer = self.timer.as_mut()?;
            if timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            self.cut = true;
            self.timer = None;
            if let Some((shared, _)) = self.broadcast.lifecycle() {
                shared
                    .counters()
                    .count_connection_cut(CutKind::MaxConnectionAge);
            }
            tracing::debug!("HTTP/1 connection: cut at the end of its maximum age's grace");
        }
        Some(ConnectionCut(CutKind::MaxConnectionAge).into())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for AgedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.poll_cut(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for AgedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.poll_cut(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.poll_cut(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.poll_cut(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
