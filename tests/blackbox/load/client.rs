//! A small async HTTP/1.1 client over tokio, for holding thousands of requests open at once.
//!
//! Only what the load cases need: one GET per connection, the status line, headers, and the
//! body by `Content-Length` or chunked, with the moment the body ended and whether a chunked
//! body ended with its terminating chunk. Every wait is bounded by the caller's timeout.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::support::http1::{finish_line, invalid, Head};

const MAX_LINE: u64 = 16 * 1024;
const MAX_BODY: usize = 1024 * 1024;

/// One connection with a request written on it.
pub struct Pending {
    reader: BufReader<TcpStream>,
}

/// How a reply ended.
#[derive(Debug)]
pub struct Reply {
    pub head: Head,
    pub body: Vec<u8>,
    /// Data chunks of a chunked body.
    pub chunks: usize,
    /// When the body's last byte (or terminating chunk) was read.
    pub ended_at: Instant,
}

/// A failed request: what went wrong, classified for the summary.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: io::ErrorKind,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// Connects (at most `permits` connects in flight at once, so a burst of thousands does not
/// overflow the listen backlog) and writes `GET path`.
pub async fn send_get(
    addr: SocketAddr,
    path: &str,
    permits: &Arc<Semaphore>,
) -> io::Result<Pending> {
    let mut pending = connect(addr, permits).await?;
    pending.write_get(path).await?;
    Ok(pending)
}

/// Connects, at most `permits` connects in flight at once.
pub async fn connect(addr: SocketAddr, permits: &Arc<Semaphore>) -> io::Result<Pending> {
    let _permit = permits.acquire().await.expect("semaphore open");
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(Pending {
        reader: BufReader::new(stream),
    })
}

impl Pending {
    /// Writes `GET path` on this connection.
    pub async fn write_get(&mut self, path: &str) -> io::Result<()> {
        let host = self.reader.get_ref().peer_addr()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: lameduck-load\r\n\r\n");
        self.reader.get_mut().write_all(request.as_bytes()).await?;
        self.reader.get_mut().flush().await
    }

    /// Reads the status line and headers.
    pub async fn read_head(&mut self) -> io::Result<Head> {
        let mut head = Head::from_status_line(&self.read_line().await?)?;
        loop {
            let line = self.read_line().await?;
            if line.is_empty() {
                return Ok(head);
            }
            head.add_header(&line)?;
        }
    }

    /// Reads the body after `head`.
    pub async fn read_body(&mut self, head: Head) -> io::Result<Reply> {
        let mut body = Vec::new();
        let mut chunks = 0;
        if head.is_chunked() {
            loop {
                let line = self.read_line().await?;
                let size_text = line.split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(size_text, 16)
                    .map_err(|_| invalid(format!("bad chunk size line {line:?}")))?;
                if size == 0 {
                    while !self.read_line().await?.is_empty() {}
                    break;
                }
                if body.len() + size > MAX_BODY {
                    return Err(invalid("body too large".into()));
                }
                let start = body.len();
                body.resize(start + size, 0);
                self.reader.read_exact(&mut body[start..]).await?;
                let mut crlf = [0; 2];
                self.reader.read_exact(&mut crlf).await?;
                if &crlf != b"\r\n" {
                    return Err(invalid(format!("chunk not followed by CRLF: {crlf:?}")));
                }
                chunks += 1;
            }
        } else {
            let len: usize = head
                .header("content-length")
                .ok_or_else(|| invalid("neither chunked nor Content-Length".into()))?
                .parse()
                .map_err(|_| invalid("bad Content-Length".into()))?;
            if len > MAX_BODY {
                return Err(invalid("body too large".into()));
            }
            body.resize(len, 0);
            self.reader.read_exact(&mut body).await?;
        }
        Ok(Reply {
            head,
            body,
            chunks,
            ended_at: Instant::now(),
        })
    }

    /// The whole reply, within `timeout`.
    pub async fn read_reply(&mut self, timeout: Duration) -> Result<Reply, Failure> {
        let read = async {
            let head = self.read_head().await?;
            self.read_body(head).await
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(r) => r.map_err(Failure::from),
            Err(_) => Err(Failure {
                kind: io::ErrorKind::TimedOut,
                message: format!("no complete reply within {timeout:?}"),
            }),
        }
    }

    async fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .await?;
        finish_line(line, n)
    }
}

/// Counts failures by kind: `{kind: count}` plus one example message of each.
pub fn summarize(failures: &[Failure]) -> String {
    let mut by_kind: Vec<(io::ErrorKind, usize, String)> = Vec::new();
    for f in failures {
        match by_kind.iter_mut().find(|(k, _, _)| *k == f.kind) {
            Some((_, n, _)) => *n += 1,
            None => by_kind.push((f.kind, 1, f.message.clone())),
        }
    }
    by_kind
        .iter()
        .map(|(k, n, m)| format!("{n} x {k:?} (e.g. {m})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The soft limit on open files of this process (children inherit it).
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line.split_whitespace().nth(3)?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

/// Panics with advice when the open-files limit is too low for `connections` sockets.
pub fn require_open_files(connections: u64) {
    let need = connections + 512;
    if let Some(limit) = open_files_limit() {
        assert!(
            limit >= need,
            "this case holds {connections} connections: the open-files limit is {limit}, \
             raise it to at least {need} (`ulimit -n {need}`) before running the load cases"
        );
    }
}
