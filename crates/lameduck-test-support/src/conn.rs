//! The end of a connection, as its client sees it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

/// A connection the server closed.
#[derive(Debug)]
pub struct Closed {
    /// Everything read until the close.
    pub bytes: Vec<u8>,
    /// When the close was read.
    pub at: Instant,
    /// How long after the wait started.
    pub after: Duration,
}

/// Reads `conn` until the server closes it (the end of the stream, or a read error such as a
/// reset), within `within` of tokio's clock; `None` if the connection was still open at the
/// end of `within`.
pub async fn read_to_close(
    conn: &mut (impl AsyncRead + Unpin),
    within: Duration,
) -> Option<Closed> {
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let at = tokio::time::timeout(within, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(Closed {
        bytes,
        at,
        after: at - started,
    })
}
