//! The I/O of an [`AutoH2cServer`](crate::AutoH2cServer) connection: the socket, or the TLS
//! stream over it, with the HTTP/2 GOAWAY watcher on top for HTTP/2.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_rt::net::TcpStream;
use lameduck_hyper::ConnectionGuard;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::server::TlsStream;

use crate::goaway::GoawayIo;

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
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            ConnectionIo::Http1(io) => io.is_write_vectored(),
            ConnectionIo::Http2(io) => io.is_write_vectored(),
            ConnectionIo::TlsHttp1(io) => io.is_write_vectored(),
            ConnectionIo::TlsHttp2(io) => io.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_flush(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_flush(cx),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_flush(cx),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectionIo::Http1(io) => Pin::new(io).poll_shutdown(cx),
            ConnectionIo::Http2(io) => Pin::new(&mut **io).poll_shutdown(cx),
            ConnectionIo::TlsHttp1(io) => Pin::new(&mut **io).poll_shutdown(cx),
            ConnectionIo::TlsHttp2(io) => Pin::new(&mut **io).poll_shutdown(cx),
        }
    }
}

/// A TLS connection once its handshake is done: the TLS stream over the socket, holding the
/// connection's place in the server's connection count (taken at accept, before the
/// handshake) until the connection is dropped.
pub struct TlsIo {
    stream: TlsStream<TcpStream>,
    _counted: ConnectionGuard,
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
    pub(crate) fn new(stream: TlsStream<TcpStream>, counted: ConnectionGuard) -> Self {
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
