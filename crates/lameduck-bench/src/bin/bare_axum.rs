//! The bare baseline for axum: the routes of `examples/axum_server.rs` (`/`, `/sleep`,
//! `/watch`) in a `Router` without lameduck's layer and health routes, served by
//! `axum::serve` (with `TCP_NODELAY`, as lameduck's listeners set it).
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`); `--graceful-shutdown`: axum's own
//! graceful termination, `with_graceful_shutdown` on SIGTERM/SIGINT, then exit 0 (the peer
//! of the termination benchmarks; without it the default signal action kills the process).

use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use lameduck_bench::args::Args;
use lameduck_examples::{logging, routes};
use lameduck_tokio::TokioRuntime;
use tokio::signal::unix::{signal, SignalKind};

async fn sleep(uri: Uri) -> Response {
    match routes::sleep_duration(uri.query()) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            "Welcome HTTP Server".into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn watch() -> Response {
    routes::watch_response(TokioRuntime, None).map(axum::body::Body::new)
}

/// Resolves on SIGTERM or SIGINT. The handlers are installed at the call, before the
/// listening line is printed, so a signal right after it is caught.
fn terminated() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

fn main() {
    let args = Args::from_env(&["--graceful-shutdown"]);
    logging::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(args.listen()).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: failed to listen on {}: {e}", args.listen());
                return 1;
            }
        };
        let addr = listener.local_addr().expect("local address");
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/sleep", get(sleep))
            .route("/watch", get(watch));
        let result = if args.flag("--graceful-shutdown") {
            let signal = terminated();
            lameduck_bench::announce(addr);
            axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
        } else {
            lameduck_bench::announce(addr);
            axum::serve(listener, app).await
        };
        i32::from(result.is_err())
    });
    runtime.shutdown_background();
    std::process::exit(code);
}
