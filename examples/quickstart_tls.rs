use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tower::service_fn;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or("127.0.0.1:8443".into());
    let cert = args.next().unwrap_or("tls.crt".into());
    let key = args.next().unwrap_or("tls.key".into());
    // The pair is read again whenever its files change (cert-manager, a Secret volume):
    // rotation needs no restart. A bad file is an error naming it.
    let tls = lameduck_tokio::ServerTls::from_files(cert, key)?;
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5)) // /readyz red, still serving, for 5 s
        .build()?;
    let mut server = lameduck_tokio::builder(config).prepare();
    let listener = lameduck_tokio::bind(addr.parse()?).await?;
    // Each handshake runs in its connection's own task, bounded (10 s by default); ALPN
    // picks HTTP/2 or HTTP/1.1.
    let acceptor = lameduck_tokio::TlsAcceptor::new(&tls);
    // The handler drops the request at the call: its future holds nothing.
    let hello = service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
    });
    let addr = server.serve_tls("api", listener, acceptor, hello)?;
    tracing::info!("listening on https://{addr}");
    std::process::exit(server.run().await?.into()); // 0 after a graceful termination
}
