//! A small hand-written HTTP/1.1 client over `std::net::TcpStream`.
//!
//! The black-box cases need control a pooled client hides: which connection a request goes
//! over (new or reused), the exact `Connection` header of a reply, whether the server closed
//! an idle keep-alive connection, whether a connect is refused, and whether a chunked body ended
//! with its terminating chunk. Every read and write carries a timeout, so nothing here can hang
//! a test.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connect timeout for every new connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default read timeout: longer than any reply the cases wait for.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Upper bound on a head or chunk-size line, and on the number of header lines.
const MAX_LINE: usize = 16 * 1024;
const MAX_HEADERS: usize = 200;
/// Upper bound on a body the client accepts (the example routes send tiny bodies).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Status line and headers of a reply.
#[derive(Debug, Clone)]
pub struct Head {
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// A head of the status line `line`, without headers yet.
    pub fn from_status_line(line: &str) -> io::Result<Head> {
        let mut parts = line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|_| version.starts_with("HTTP/1."))
            .ok_or_else(|| invalid(format!("bad status line {line:?}")))?;
        Ok(Head {
            version,
            status,
            headers: Vec::new(),
        })
    }

    /// Adds the header line `line`; an error if it is none, or one too many.
    pub fn add_header(&mut self, line: &str) -> io::Result<()> {
        if self.headers.len() >= MAX_HEADERS {
            return Err(invalid("too many headers".into()));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        self.headers
            .push((name.trim().to_string(), value.trim().to_string()));
        Ok(())
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the `Connection` header lists `close`.
    pub fn connection_close(&self) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("close"))
    }

    /// Whether the body is sent with `Transfer-Encoding: chunked`.
    pub fn is_chunked(&self) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
            .any(|(_, v)| v.to_ascii_lowercase().contains("chunked"))
    }

    fn content_length(&self) -> io::Result<Option<usize>> {
        match self.header("content-length") {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| invalid(format!("bad Content-Length {v:?}"))),
        }
    }
}

/// A complete reply.
#[derive(Debug, Clone)]
pub struct Response {
    pub head: Head,
    pub body: Vec<u8>,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.head.status
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.head.version, self.head.status)?;
        for (n, v) in &self.head.headers {
            write!(f, "\n  {n}: {v}")?;
        }
        write!(f, "\n  body: {:?}", self.text())
    }
}

/// What a read on an idle connection found.
#[derive(Debug, PartialEq, Eq)]
pub enum IdleState {
    /// The server closed it (EOF or reset).
    Closed,
    /// Nothing arrived within the wait.
    Open,
    /// The server sent bytes nobody asked for.
    UnexpectedData(Vec<u8>),
}

/// One HTTP/1.1 connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
    host: String,
}

impl Conn {
    /// Opens a connection (refusal surfaces as `ErrorKind::ConnectionRefused`).
    pub fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(stream),
            host: addr.to_string(),
        })
    }

    pub fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.reader.get_ref().set_read_timeout(Some(timeout))
    }

    /// Writes `GET path` with the given extra header lines (`Name: value`), keep-alive.
    pub fn send_get(&mut self, path: &str, extra_headers: &[&str]) -> io::Result<()> {
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: lameduck-blackbox\r\n",
            self.host
        );
        for h in extra_headers {
            request.push_str(h);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        let stream = self.reader.get_mut();
        stream.write_all(request.as_bytes())?;
        stream.flush()
    }

    /// `GET path` on this connection and its whole reply.
    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.send_get(path, &[])?;
        self.read_response()
    }

    /// Reads one complete reply to a GET.
    pub fn read_response(&mut self) -> io::Result<Response> {
        let head = self.read_head()?;
        let body = self.read_body(&head)?;
        Ok(Response { head, body })
    }

    /// Reads the status line and headers. EOF before the first byte is `UnexpectedEof`.
    pub fn read_head(&mut self) -> io::Result<Head> {
        let mut head = Head::from_status_line(&self.read_line()?)?;
        loop {
            let line = self.read_line()?;
            if line.is_empty() {
                return Ok(head);
            }
            head.add_header(&line)?;
        }
    }

    /// Reads the body that follows `head` (Content-Length, chunked, or until EOF).
    pub fn read_body(&mut self, head: &Head) -> io::Result<Vec<u8>> {
        if head.status == 204 || head.status == 304 || (100..200).contains(&head.status) {
            return Ok(Vec::new());
        }
        if head.is_chunked() {
            let mut body = Vec::new();
            while let Some(chunk) = self.read_chunk()? {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY {
                    return Err(invalid("body too large".into()));
                }
            }
            return Ok(body);
        }
        match head.content_length()? {
            Some(len) if len > MAX_BODY => Err(invalid("body too large".into())),
            Some(len) => {
                let mut body = vec![0; len];
                self.reader.read_exact(&mut body)?;
                Ok(body)
            }
            None => {
                let mut body = Vec::new();
                self.reader
                    .by_ref()
                    .take(MAX_BODY as u64)
                    .read_to_end(&mut body)?;
                Ok(body)
            }
        }
    }

    /// Reads one chunk of a chunked body: `Some(data)`, or `None` after the terminating
    /// zero-size chunk and its trailer section. EOF in between is `UnexpectedEof`.
    pub fn read_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let line = self.read_line()?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            for _ in 0..MAX_HEADERS {
                if self.read_line()?.is_empty() {
                    return Ok(None);
                }
            }
            return Err(invalid("too many trailer lines".into()));
        }
        if size > MAX_BODY {
            return Err(invalid("chunk too large".into()));
        }
        let mut data = vec![0; size];
        self.reader.read_exact(&mut data)?;
        let mut crlf = [0; 2];
        self.reader.read_exact(&mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(invalid(format!("chunk not followed by CRLF: {crlf:?}")));
        }
        Ok(Some(data))
    }

    /// Waits up to `wait` for the server to close this (idle) connection.
    pub fn idle_state(&mut self, wait: Duration) -> IdleState {
        let deadline = Instant::now() + wait;
        if !self.reader.buffer().is_empty() {
            return IdleState::UnexpectedData(self.reader.buffer().to_vec());
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return IdleState::Open;
            }
            if self.set_read_timeout(left).is_err() {
                return IdleState::Closed;
            }
            let mut byte = [0u8; 64];
            match self.reader.get_mut().read(&mut byte) {
                Ok(0) => return IdleState::Closed,
                Ok(n) => return IdleState::UnexpectedData(byte[..n].to_vec()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    return IdleState::Open
                }
                Err(_) => return IdleState::Closed,
            }
        }
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        let n = self
            .reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)?;
        finish_line(line, n)
    }
}

/// A line read up to its `\n` (`n` bytes read, at most a line's limit), without its line end;
/// an error if the connection closed before it, if it was cut short, or if it is not UTF-8.
pub fn finish_line(mut line: Vec<u8>, n: usize) -> io::Result<String> {
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed by the server",
        ));
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "line cut short: {:?}",
                String::from_utf8_lossy(&line).into_owned()
            ),
        ));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map_err(|e| invalid(format!("non-UTF-8 line: {e}")))
}

/// An error for a reply that breaks HTTP/1.1.
pub fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// `GET path` on a new connection.
pub fn try_get(addr: SocketAddr, path: &str) -> io::Result<Response> {
    Conn::connect(addr)?.get(path)
}

/// `GET path` on a new connection; panics with context on any I/O error.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    try_get(addr, path).unwrap_or_else(|e| panic!("GET {path} on a new connection to {addr}: {e}"))
}
