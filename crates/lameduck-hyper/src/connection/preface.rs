//! Which protocol a connection speaks, told by its first bytes: the HTTP/2 client preface
//! (HTTP/2 with prior knowledge, "h2c"), or anything else (HTTP/1). The bytes read to tell
//! are given back to hyper, which reads them first.
//!
//! hyper-util's `auto` connection does the same, but keeps a layer of its own around the
//! connection and its I/O for the connection's whole life; here the protocol is told once and
//! the connection is hyper's HTTP/1 or HTTP/2 connection itself, over an I/O whose read costs
//! one comparison more than the socket's.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use hyper::rt::{Read, ReadBuf, ReadBufCursor};

/// The client preface every HTTP/2 connection starts with.
const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.0 or HTTP/1.1 (also what a connection closed before its first byte is taken
    /// for: hyper then sees the end of the stream and ends the connection quietly).
    Http1,
    /// HTTP/2 with prior knowledge: the connection started with the client preface.
    Http2,
}

/// A connection's I/O: the first bytes, read by [`ConnIo::poll_protocol`], are read again by
/// hyper before the rest of the stream.
pub(crate) struct ConnIo<I> {
    inner: I,
    /// The first bytes of the connection.
    first: [u8; HTTP2_PREFACE.len()],
    /// How many bytes of `first` were read from the connection.
    filled: usize,
    /// How many bytes of `first` hyper has read.
    replayed: usize,
}

impl<I> ConnIo<I> {
    /// `inner`, nothing read yet.
    pub(crate) fn new(inner: I) -> Self {
        ConnIo {
            inner,
            first: [0; HTTP2_PREFACE.len()],
            filled: 0,
            replayed: 0,
        }
    }
}

impl<I: Read + Unpin> ConnIo<I> {
    /// Reads the connection's first bytes until its protocol is known: HTTP/2 once the whole
    /// preface has arrived, HTTP/1 as soon as a byte differs from it or the stream ends.
    pub(crate) fn poll_protocol(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Protocol>> {
        loop {
            let start = self.filled;
            if start == HTTP2_PREFACE.len() {
                return Poll::Ready(Ok(Protocol::Http2));
            }
            let mut buf = ReadBuf::new(&mut self.first[start..]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, buf.unfilled()))?;
            let got = buf.filled().len();
            self.filled = start + got;
            if got == 0 || self.first[start..self.filled] != HTTP2_PREFACE[start..self.filled] {
                return Poll::Ready(Ok(Protocol::Http1));
            }
        }
    }

    /// Gives hyper the first bytes it has not read yet (as many as `buf` takes).
    #[cold]
    #[inline(never)]
    fn replay(&mut self, mut buf: ReadBufCursor<'_>) {
        let rest = &self.first[self.replayed..self.filled];
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.replayed += n;
    }
}

impl<I: Read + Unpin> Read for ConnIo<I> {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replayed < this.filled {
            this.replay(buf);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

/// Implements hyper's `Write` for the I/O wrapper `$wrapper<I>` by passing every call to its
/// `inner` field: this wrapper looks at what is read, never at what is written.
macro_rules! write_through_inner {
    ($wrapper:ident) => {
        impl<I: hyper::rt::Write + Unpin> hyper::rt::Write for $wrapper<I> {
            #[inline]
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            #[inline]
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }

            #[inline]
            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            #[inline]
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }
        }
    };
}
write_through_inner!(ConnIo);

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// An I/O that yields its chunks one read at a time, then the end of the stream.
    struct Chunks(Vec<&'static [u8]>);

    impl Read for Chunks {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            mut buf: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if !this.0.is_empty() {
                let chunk = this.0.remove(0);
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                if n < chunk.len() {
                    this.0.insert(0, &chunk[n..]);
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    fn protocol_and_bytes(chunks: Vec<&'static [u8]>) -> (Protocol, Vec<u8>) {
        let mut io = ConnIo::new(Chunks(chunks));
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(protocol)) = io.poll_protocol(&mut cx) else {
            panic!("the protocol is known once the chunks are read");
        };
        let mut out = Vec::new();
        for _ in 0..100 {
            let mut raw = [0u8; 7];
            let mut buf = ReadBuf::new(&mut raw);
            let Poll::Ready(Ok(())) = Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) else {
                panic!("reads are ready");
            };
            if buf.filled().is_empty() {
                return (protocol, out);
            }
            out.extend_from_slice(buf.filled());
        }
        panic!("the stream does not end");
    }

    #[test]
    fn an_http1_request_is_told_at_its_first_byte_and_read_whole() {
        let (protocol, bytes) = protocol_and_bytes(vec![b"GET / HTTP/1.1\r\n\r\n"]);
        assert_eq!(protocol, Protocol::Http1);
        assert_eq!(bytes, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn a_request_that_starts_like_the_preface_is_http1_at_the_first_byte_that_differs() {
        let (protocol, bytes) = protocol_and_bytes(vec![b"P", b"OST / HTTP/1.1\r\n\r\n"]);
        assert_eq!(protocol, Protocol::Http1);
        assert_eq!(bytes, b"POST / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn the_whole_preface_in_pieces_is_http2_and_read_again_with_what_follows() {
        let (protocol, bytes) =
            protocol_and_bytes(vec![b"PRI * HTTP", b"/2.0\r\n\r\nSM\r\n\r\nFRAMES"]);
        assert_eq!(protocol, Protocol::Http2);
        assert_eq!(bytes, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nFRAMES");
    }

    #[test]
    fn a_stream_that_ends_before_its_first_byte_is_http1_and_empty() {
        let (protocol, bytes) = protocol_and_bytes(vec![]);
        assert_eq!(protocol, Protocol::Http1);
        assert!(bytes.is_empty());
    }

    #[test]
    fn a_stream_that_ends_inside_the_preface_is_http1_with_what_came() {
        let (protocol, bytes) = protocol_and_bytes(vec![b"PRI * "]);
        assert_eq!(protocol, Protocol::Http1);
        assert_eq!(bytes, b"PRI * ");
    }
}
