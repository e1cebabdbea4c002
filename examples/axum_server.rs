//! The example server on axum (DESIGN section 6): an axum `Router` with lameduck's admission
//! layer and explicit health routes.
//!
//! `cargo run --release --example axum_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use std::convert::Infallible;
use std::io::Write;

use axum::extract::Extension;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use lameduck_suite::{flags, logging, routes};
use lameduck_tokio::{ShutdownSignal, TokioRuntime};

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(flags));
    runtime.shutdown_background();
    std::process::exit(code);
}

async fn sleep(uri: Uri) -> Response {
    match routes::sleep_duration(uri.query()) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            "Welcome HTTP Server".into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn watch(signal: Option<Extension<ShutdownSignal>>) -> Response {
    routes::watch_response(TokioRuntime, signal.map(|Extension(s)| s)).map(axum::body::Body::new)
}

async fn run(flags: flags::Flags) -> i32 {
    let mut builder = lameduck_tokio::builder(flags.config.clone());
    if let Some(d) = flags.pre_shutdown_hook_duration {
        let registered = builder.pre_shutdown_hook("demo-sleep", move || async move {
            tokio::time::sleep(d).await;
            Ok::<_, Infallible>(())
        });
        if let Err(e) = registered {
            eprintln!("error: {e}");
            return 1;
        }
    }
    let mut server = builder.prepare();
    let listener = match lameduck_tokio::bind(flags.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: failed to listen on {}: {e}", flags.listen);
            return 1;
        }
    };

    let health = server.health_service();
    let mut app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/sleep", get(sleep))
        .route("/watch", get(watch));
    for endpoint in ["/readyz", "/livez", "/healthz"] {
        app = app
            .route_service(endpoint, health.clone())
            .route_service(&format!("{endpoint}/{{*check}}"), health.clone());
    }
    let app = app.layer(
        server
            .layer()
            .long_running(routes::is_long_running)
            .serve_health(false),
    );

    let addr = match server.serve("api", listener, app) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
    match server.run().await {
        Ok(code) => i32::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
