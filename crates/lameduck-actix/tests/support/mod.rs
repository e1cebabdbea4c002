//! What the tests over real HTTP/1 connections share: a server answering `GET /` with `ok`,
//! a request, and reading one response.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_web::{web, App};
use lameduck::Config;
use lameduck_actix::{AutoH2cServer, Server, TokioRuntime};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A prepared server for `config` (without OS signals) whose app answers `GET /` with `ok`
/// through the admission middleware, bound to a loopback port with `workers` workers.
pub fn prepare_ok_server(config: Config, workers: usize) -> (SocketAddr, Server<TokioRuntime>) {
    let mut builder = lameduck_actix::builder(config);
    builder.without_signals();
    let mut server = builder.prepare();
    let (shared, clock) = (server.shared().clone(), server.clock());
    let admission = lameduck_actix::AdmissionMiddleware::new(shared, clock);
    let http = AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(|| async { "ok" }))
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    lameduck_actix::serve(&mut server, "api", http, |http| {
        http.workers(workers).listen(listener)
    })
    .unwrap();
    (addr, server)
}

/// A keep-alive `GET /`.
pub const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

/// One response on `conn` (head and `content-length` body), within 5 s; what was read.
pub async fn response(conn: &mut TcpStream) -> String {
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
