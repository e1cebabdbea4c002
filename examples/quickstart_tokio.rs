use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tower::service_fn;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5)) // /readyz red, still serving, for 5 s
        .build()?;
    let mut builder = lameduck_tokio::builder(config);
    builder.pre_shutdown_hook("deregister", || async {
        tracing::info!("deregistering from service discovery");
        Ok::<_, Infallible>(())
    })?;
    let mut server = builder.prepare(); // SIGTERM and SIGINT are caught from here on
    let listener = lameduck_tokio::bind(addr.parse()?).await?;
    // The handler drops the request at the call: its future holds nothing.
    let hello = service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
    });
    // Every request is admitted by the server: health endpoints, 503/429, request timeout.
    let addr = server.serve("api", listener, hello)?;
    tracing::info!("listening on http://{addr}");
    std::process::exit(server.run().await?.into()); // 0 after a graceful termination
}
