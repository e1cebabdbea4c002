//! The bare baseline for hyper on tokio over TLS: `bare_hyper` (hyper-util's auto builder,
//! the example servers' routes, no lameduck) behind tokio-rustls, with the very rustls
//! configuration lameduck's example servers serve with (`lameduck_tls::ServerTls`: ring,
//! ALPN `h2` and `http/1.1`, the certificate resolver that follows the files). Each
//! connection's handshake runs in the connection's own task, as hyper-util's and axum's
//! examples do, without a bound.
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`), `--tls-cert-file FILE`,
//! `--tls-private-key-file FILE` (PEM); `--alpn`: serve each connection with hyper's own
//! HTTP/1 or HTTP/2 connection as ALPN chose (as lameduck's `serve_tls` does) instead of
//! hyper-util's auto connection, which reads the first bytes to tell; to attribute that
//! difference. `--hello`: instead, the minimal TLS server a user would write without lameduck,
//! the baseline of the TLS quick start: `service_fn` answering `hello\n`, hyper-util's auto
//! builder, tokio-rustls with the same rustls configuration, one task per connection, nothing
//! else. Prints `listening on https://ADDR`.

use std::sync::Arc;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use lameduck_bench::args::{fail, Args};
use lameduck_examples::{logging, routes};
use lameduck_tls::ServerTls;
use lameduck_tokio::TokioRuntime;
use tokio::net::TcpListener;

fn main() {
    let args = Args::from_env(&["--alpn", "--hello"]);
    logging::init();
    let cert = args
        .value("--tls-cert-file")
        .unwrap_or_else(|| fail("--tls-cert-file FILE is required"));
    let key = args
        .value("--tls-private-key-file")
        .unwrap_or_else(|| fail("--tls-private-key-file FILE is required"));
    let tls = ServerTls::from_files(cert, key).unwrap_or_else(|e| fail(&e.to_string()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(serve(&args, &tls));
    runtime.shutdown_background();
    std::process::exit(code);
}

async fn serve(args: &Args, tls: &ServerTls) -> i32 {
    let listener = match TcpListener::bind(args.listen()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: failed to listen on {}: {e}", args.listen());
            return 1;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.rustls_config());
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    if args.flag("--hello") {
        return serve_hello(listener, acceptor, builder).await;
    }
    let service = TowerToHyperService::new(routes::service(TokioRuntime));
    let alpn = args.flag("--alpn");
    lameduck_bench::announce_tls(listener.local_addr().expect("local address"));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(a) => a,
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, builder, service) =
            (acceptor.clone(), Arc::clone(&builder), service.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            if alpn {
                let http2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                let io = TokioIo::new(stream);
                let _ = if http2 {
                    http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service)
                        .await
                } else {
                    http1::Builder::new()
                        .serve_connection(io, service)
                        .with_upgrades()
                        .await
                };
                return;
            }
            let _ = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The minimal TLS server of `--hello`: what a hyper user writes without lameduck.
async fn serve_hello(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    builder: Arc<auto::Builder<TokioExecutor>>,
) -> i32 {
    lameduck_bench::announce_tls(listener.local_addr().expect("local address"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, builder) = (acceptor.clone(), Arc::clone(&builder));
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let hello = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"hello\n"),
                )))
            });
            let _ = builder.serve_connection(TokioIo::new(stream), hello).await;
        });
    }
}
