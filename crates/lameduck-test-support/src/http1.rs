//! HTTP/1 over a raw connection.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// A keep-alive `GET /` (HTTP/1.1, `host: x`).
pub const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

/// Reads one HTTP/1 response on `conn` (its head and a body of `content-length` bytes),
/// bounded by 5 seconds of tokio's clock; the text, or what was read when the connection
/// closed or the time ran out first.
pub async fn read_response(conn: &mut (impl AsyncRead + Unpin)) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let text = String::from_utf8_lossy(&all).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = head
                    .lines()
                    .filter_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_string)
                    })
                    .find_map(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= len {
                    return;
                }
            }
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&all).to_string()
}
