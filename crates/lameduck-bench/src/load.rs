//! A closed-loop load generator with a fixed request count: `connections` keep-alive
//! connections each send one request, read the whole response, and repeat, until `total`
//! requests have been answered. Exactly `total` requests are sent (the count to divide an
//! instruction count by).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http1::{self, Conn};

/// What a load run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadResult {
    /// Responses with status 200.
    pub ok: u64,
    /// Other statuses, I/O errors and reconnects.
    pub errors: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

/// Sends exactly `total` GET requests for `path` to `addr` over `connections` connections;
/// with `close_every` above 0, every `close_every`-th request of a connection asks for
/// `Connection: close` and the next request opens a new connection.
pub async fn run(
    addr: SocketAddr,
    path: &str,
    total: u64,
    connections: usize,
    close_every: u64,
) -> LoadResult {
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let request: Arc<[u8]> = http1::get(path).into();
    let closing: Arc<[u8]> =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .into_bytes()
            .into();
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections.max(1) {
        let (next, ok, errors, request, closing) = (
            Arc::clone(&next),
            Arc::clone(&ok),
            Arc::clone(&errors),
            Arc::clone(&request),
            Arc::clone(&closing),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            let mut on_conn = 0u64;
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let result: io::Result<bool> = async {
                    if conn.is_none() {
                        conn = Some(Conn::connect(addr).await?);
                        on_conn = 0;
                    }
                    let c = conn.as_mut().expect("connected");
                    on_conn += 1;
                    let last = close_every > 0 && on_conn % close_every == 0;
                    c.send(if last { &closing } else { &request }).await?;
                    let (head, _) = c.read_response().await?;
                    if head.close || last {
                        conn = None;
                    }
                    Ok(head.status == 200)
                }
                .await;
                match result {
                    Ok(true) => ok.fetch_add(1, Ordering::Relaxed),
                    Ok(false) => errors.fetch_add(1, Ordering::Relaxed),
                    Err(_) => {
                        conn = None;
                        errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    LoadResult {
        ok: ok.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
    }
}
