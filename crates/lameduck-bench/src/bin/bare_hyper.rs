//! The bare baseline for hyper on tokio: hyper-util's auto builder (HTTP/1.1 and HTTP/2 on
//! one port) serving the example servers' routes (`lameduck_examples::routes`, the same handler
//! code `examples/tokio_server.rs` wraps in lameduck's layer), with no lameduck at all.
//!
//! `--hello`: instead, the minimal server a user would write without lameduck, the baseline of
//! the README's quick start: `service_fn` answering `hello\n` to every request, hyper-util's
//! auto builder with `TokioExecutor`, one task per connection, nothing else (no `TCP_NODELAY`,
//! no upgrades).
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`); `--hyper-timer`: give hyper a timer as
//! lameduck's driver does (which turns on hyper's 30 s HTTP/1 header read timeout), to
//! attribute that cost; `--graceful-shutdown`: on SIGTERM/SIGINT stop accepting, shut every
//! connection down with hyper-util's `GracefulShutdown` and exit 0 (without it the default
//! signal action kills the process).

use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use lameduck_bench::args::Args;
use lameduck_examples::{logging, routes};
use lameduck_tokio::TokioRuntime;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

fn main() {
    let args = Args::from_env(&["--hyper-timer", "--graceful-shutdown", "--hello"]);
    logging::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(serve(args));
    runtime.shutdown_background();
    std::process::exit(code);
}

/// The minimal server of `--hello`: what a hyper user writes without lameduck.
async fn serve_hello(listener: TcpListener) -> i32 {
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    lameduck_bench::announce(listener.local_addr().expect("local address"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let builder = Arc::clone(&builder);
        tokio::spawn(async move {
            let hello = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"hello\n"),
                )))
            });
            let _ = builder.serve_connection(TokioIo::new(stream), hello).await;
        });
    }
}

async fn serve(args: Args) -> i32 {
    let listener = match TcpListener::bind(args.listen()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: failed to listen on {}: {e}", args.listen());
            return 1;
        }
    };
    if args.flag("--hello") {
        return serve_hello(listener).await;
    }
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if args.flag("--hyper-timer") {
        builder.http1().timer(TokioTimer::new());
        builder.http2().timer(TokioTimer::new());
    }
    let builder = Arc::new(builder);
    let service = TowerToHyperService::new(routes::service(TokioRuntime));
    let graceful = args.flag("--graceful-shutdown").then(GracefulShutdown::new);
    // Only with --graceful-shutdown: a handler replaces the default action (termination).
    let mut signals = graceful.as_ref().map(|_| {
        (
            signal(SignalKind::terminate()).expect("SIGTERM handler"),
            signal(SignalKind::interrupt()).expect("SIGINT handler"),
        )
    });
    lameduck_bench::announce(listener.local_addr().expect("local address"));
    loop {
        let stop = async {
            match &mut signals {
                Some((term, int)) => tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                },
                None => std::future::pending().await,
            }
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = stop => break,
        };
        let (stream, _) = match accepted {
            Ok(a) => a,
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (builder, service) = (Arc::clone(&builder), service.clone());
        let watcher = graceful.as_ref().map(GracefulShutdown::watcher);
        tokio::spawn(async move {
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let _ = match watcher {
                Some(w) => w.watch(conn).await,
                None => conn.await,
            };
        });
    }
    drop(listener);
    if let Some(g) = graceful {
        g.shutdown().await;
    }
    0
}
