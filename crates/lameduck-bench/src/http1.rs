//! A small raw HTTP/1.1 client over tokio sockets (or any tokio stream: TLS in
//! `bench_tls_load`): enough to drive the servers under test with thousands of connections at
//! a low CPU cost, and to time when each response ends.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A GET request for `path` (keep-alive, HTTP/1.1).
#[must_use]
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").into_bytes()
}

/// How a response body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes.
    Eof,
}

/// A response head.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// The body framing.
    pub framing: Framing,
    /// Whether the server said `Connection: close`.
    pub close: bool,
}

/// Where a body read stands.
#[derive(Debug)]
pub struct Body {
    framing: Framing,
    /// Bytes left in the current chunk (chunked) or the body (length); `None` before a
    /// chunk-size line.
    left: Option<usize>,
    done: bool,
}

impl Body {
    /// Whether the whole body has been read.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// One client connection with its read buffer; `S` is the stream (a TCP socket unless said).
#[derive(Debug)]
pub struct Conn<S = TcpStream> {
    /// The socket.
    pub stream: S,
    buf: Vec<u8>,
    pos: usize,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Connects to `addr` (with `TCP_NODELAY`).
    pub async fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn::new(stream))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// A client on an open `stream`.
    pub fn new(stream: S) -> Conn<S> {
        Conn {
            stream,
            buf: Vec::with_capacity(1024),
            pos: 0,
        }
    }

    /// Writes `bytes`.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        // A TLS stream holds what it encrypted until flushed (a socket's flush does nothing).
        self.stream.flush().await
    }

    /// Reads more bytes into the buffer; `false` at end of stream.
    async fn fill(&mut self) -> io::Result<bool> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + 4096, 0);
        let n = self.stream.read(&mut self.buf[len..]).await;
        self.buf.truncate(len + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    fn unexpected_eof() -> io::Error {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-response",
        )
    }

    /// Reads one response head.
    pub async fn read_head(&mut self) -> io::Result<(Head, Body)> {
        let end = loop {
            if let Some(i) = find(&self.buf[self.pos..], b"\r\n\r\n") {
                break self.pos + i + 4;
            }
            if !self.fill().await? {
                return Err(Self::unexpected_eof());
            }
        };
        let text = std::str::from_utf8(&self.buf[self.pos..end])
            .map_err(|_| io::Error::other("response head is not UTF-8"))?;
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line in {text:?}")))?;
        let mut framing = Framing::Eof;
        let mut close = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                framing = Framing::Length(value.parse().map_err(io::Error::other)?);
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.eq_ignore_ascii_case("chunked")
            {
                framing = Framing::Chunked;
            } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close")
            {
                close = true;
            }
        }
        self.pos = end;
        let body = Body {
            framing,
            left: match framing {
                Framing::Length(n) => Some(n),
                _ => None,
            },
            done: framing == Framing::Length(0),
        };
        Ok((
            Head {
                status,
                framing,
                close,
            },
            body,
        ))
    }

    /// Reads the next part of `body`: the size of the next complete chunk (chunked), or of
    /// the bytes that arrived (`Content-Length`, until-close), `None` once the body has ended.
    pub async fn read_body_part(&mut self, body: &mut Body) -> io::Result<Option<usize>> {
        loop {
            if body.done {
                return Ok(None);
            }
            let avail = self.buf.len() - self.pos;
            match (body.framing, body.left) {
                (Framing::Length(_), Some(left)) => {
                    let take = left.min(avail);
                    self.pos += take;
                    body.left = Some(left - take);
                    body.done = left == take;
                    if take > 0 {
                        return Ok(Some(take));
                    }
                }
                (Framing::Chunked, None) => {
                    if let Some(i) = find(&self.buf[self.pos..], b"\r\n") {
                        let line = std::str::from_utf8(&self.buf[self.pos..self.pos + i])
                            .map_err(io::Error::other)?;
                        let hex = line.split(';').next().unwrap_or("").trim();
                        let size = usize::from_str_radix(hex, 16)
                            .map_err(|_| io::Error::other(format!("bad chunk size {line:?}")))?;
                        if size == 0 {
                            // Trailers end with an empty line.
                            if let Some(j) = find(&self.buf[self.pos..], b"\r\n\r\n") {
                                self.pos += j + 4;
                                body.done = true;
                                return Ok(None);
                            }
                        } else {
                            self.pos += i + 2;
                            body.left = Some(size);
                            continue;
                        }
                    }
                }
                (Framing::Chunked, Some(left)) => {
                    if avail >= left + 2 {
                        self.pos += left + 2;
                        body.left = None;
                        return Ok(Some(left));
                    }
                }
                (Framing::Eof, _) => {
                    self.pos += avail;
                    if avail > 0 {
                        return Ok(Some(avail));
                    }
                }
                (Framing::Length(_), None) => unreachable!("length framing always has `left`"),
            }
            if !self.fill().await? {
                if body.framing == Framing::Eof {
                    body.done = true;
                    return Ok(None);
                }
                return Err(Self::unexpected_eof());
            }
        }
    }

    /// Reads one whole response; returns its head and body length.
    pub async fn read_response(&mut self) -> io::Result<(Head, usize)> {
        let (head, mut body) = self.read_head().await?;
        let mut len = 0;
        while let Some(n) = self.read_body_part(&mut body).await? {
            len += n;
        }
        Ok((head, len))
    }

    /// Waits for the server to close the connection; `Ok(n)` with the bytes that came
    /// before the close.
    pub async fn wait_close(&mut self) -> io::Result<usize> {
        let mut extra = self.buf.len() - self.pos;
        self.pos = self.buf.len();
        while self.fill().await? {
            extra += self.buf.len() - self.pos;
            self.pos = self.buf.len();
        }
        Ok(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A chunked response written in awkward pieces, then a `Content-Length` one on the
    /// same connection, then a close.
    #[tokio::test]
    async fn parses_chunked_and_length_bodies_split_anywhere() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let parts: [&[u8]; 6] = [
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r",
                b"\n\r\n8\r\nevent 0\n\r",
                b"\n8\r\nevent 1\n\r\n0\r",
                b"\n\r\nHTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n",
                b"Connection: close\r\n\r\no",
                b"k",
            ];
            for p in parts {
                s.write_all(p).await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        });
        let mut c = Conn::connect(addr).await.unwrap();
        let (head, mut body) = c.read_head().await.unwrap();
        assert_eq!(
            (head.status, head.framing, head.close),
            (200, Framing::Chunked, false)
        );
        assert_eq!(c.read_body_part(&mut body).await.unwrap(), Some(8));
        assert_eq!(c.read_body_part(&mut body).await.unwrap(), Some(8));
        assert_eq!(c.read_body_part(&mut body).await.unwrap(), None);
        assert!(body.is_done());
        let (head, len) = c.read_response().await.unwrap();
        assert_eq!(
            (head.status, head.framing, head.close, len),
            (503, Framing::Length(2), true, 2)
        );
        assert_eq!(c.wait_close().await.unwrap(), 0);
        server.await.unwrap();
    }
}
