//! The tokio example server (`tokio_server`: the same flags, routes and logs), recording the
//! id of each request it processed, and answering a `POST` of any path with 200 once it has
//! read its body: the `x-request-id` header of every request answered with
//! a 2xx, one line each, appended to the file named by `LAMEDUCK_RECORD_IDS` (nothing is
//! recorded without it). A request the server turned away (429, 503) was not processed and
//! is not recorded. The client proofs (`python3 tests/proofs client`) read the file to check
//! that no request was processed twice.
//!
//! `LAMEDUCK_RECORD_IDS=ids.txt cargo run --release -p lameduck-client --example counting_server -- --listen 127.0.0.1:8080`

use std::convert::Infallible;
use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_tokio::TokioRuntime;
use tower::ServiceExt;

/// Where processed ids go: one line each, written as the response is handed back.
#[derive(Clone)]
struct Record(Option<Arc<Mutex<File>>>);

impl Record {
    fn open() -> Record {
        let Some(path) = std::env::var_os("LAMEDUCK_RECORD_IDS") else {
            return Record(None);
        };
        match File::options().create(true).append(true).open(&path) {
            Ok(f) => Record(Some(Arc::new(Mutex::new(f)))),
            Err(e) => {
                eprintln!("error: LAMEDUCK_RECORD_IDS {}: {e}", path.to_string_lossy());
                std::process::exit(1);
            }
        }
    }

    fn processed(&self, id: &[u8]) {
        if let Some(file) = &self.0 {
            let mut line = id.to_vec();
            line.push(b'\n');
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = f.write_all(&line) {
                eprintln!("error: recording a processed id: {e}");
            }
        }
    }
}

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    metrics::install();
    let record = Record::open();
    let tls = tls::load_or_exit(&flags);
    let sockets = server::open_sockets_or_exit(&flags);
    server::exit_with_tokio(|| async move {
        let adopt = lameduck_tokio::from_std;
        let tls = tls.as_ref().map(lameduck_tokio::TlsAcceptor::new);
        server::run(&flags, TokioRuntime, sockets, adopt, tls, |server| {
            server.long_running(routes::is_long_running);
            let routes = routes::service_with_metrics(
                TokioRuntime,
                server.shared().clone(),
                metrics::render,
                routes::tokio_tungstenite_echo,
            );
            tower::service_fn(move |req: http::Request<Incoming>| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .map(|v| v.as_bytes().to_vec());
                let (routes, record) = (routes.clone(), record.clone());
                async move {
                    // A POST (the routes take only GETs) is read whole and answered 200.
                    let response = if req.method() == http::Method::POST {
                        match req.into_body().collect().await {
                            Ok(_) => http::Response::new(
                                Full::new(Bytes::from_static(b"ok")).boxed_unsync(),
                            ),
                            Err(_) => {
                                let mut r = http::Response::new(Empty::new().boxed_unsync());
                                *r.status_mut() = http::StatusCode::BAD_REQUEST;
                                r
                            }
                        }
                    } else {
                        routes.oneshot(req).await?
                    };
                    if let (Some(id), true) = (id, response.status().is_success()) {
                        record.processed(&id);
                    }
                    Ok::<_, Infallible>(response)
                }
            })
        })
        .await
    })
}
