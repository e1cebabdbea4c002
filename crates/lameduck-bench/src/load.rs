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

/// Sends exactly `total` GET requests for `path` to `addr` over `connections` connections.
pub async fn run(addr: SocketAddr, path: &str, total: u64, connections: usize) -> LoadResult {
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let request: Arc<[u8]> = http1::get(path).into();
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections.max(1) {
        let (next, ok, errors, request) = (
            Arc::clone(&next),
            Arc::clone(&ok),
            Arc::clone(&errors),
            Arc::clone(&request),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let result: io::Result<bool> = async {
                    if conn.is_none() {
                        conn = Some(Conn::connect(addr).await?);
                    }
                    let c = conn.as_mut().expect("connected");
                    c.send(&request).await?;
                    let (head, _) = c.read_response().await?;
                    if head.close {
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
