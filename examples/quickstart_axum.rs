use std::time::Duration;

use axum::routing::get;
use axum::Router;

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(3)).await;
    "slow hello\n"
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5))
        .shutdown_send_retry_after(true) // answer 429 + Retry-After instead of closing
        .build()?;
    let mut server = lameduck_tokio::builder(config).prepare();
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/slow", get(slow)); // /readyz, /livez and /healthz are the server's
    let listener = lameduck_tokio::bind(addr.parse()?).await?;
    let addr = server.serve("api", listener, app)?;
    tracing::info!("listening on http://{addr}");
    std::process::exit(server.run().await?.into()); // 0 after a graceful termination
}
