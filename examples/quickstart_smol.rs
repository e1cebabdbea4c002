use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tower::service_fn;

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5)) // /readyz red, still serving, for 5 s
        .build()?;
    smol::block_on(async {
        let mut server = lameduck_smol::builder(config).prepare();
        let listener = lameduck_smol::bind(addr.parse()?).await?;
        // Every request is admitted by the server: health endpoints, 503/429, request timeout.
        let addr = server.serve("api", listener, service_fn(hello))?;
        tracing::info!("listening on http://{addr}");
        std::process::exit(server.run().await?.into()); // 0 after a graceful termination
    })
}
