//! The bare baseline for hyper on smol: hyper-util's auto builder over smol-hyper's I/O
//! and executor adapters, on a two-thread `async_executor::Executor` (as
//! `examples/smol_server.rs` runs), serving the example servers' routes
//! (`lameduck_examples::routes`) with no lameduck at all.
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`); `--hyper-timer`: give hyper smol-hyper's
//! timer as lameduck's driver does (hyper's 30 s HTTP/1 header read timeout), to attribute
//! that cost. SIGTERM has its default action (the process is killed).

use std::sync::Arc;

use async_executor::Executor;
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use lameduck_bench::args::Args;
use lameduck_examples::{logging, routes};
use lameduck_smol::SmolRuntime;
use smol_hyper::rt::{FuturesIo, SmolExecutor, SmolTimer};

fn main() {
    let args = Args::from_env(&["--hyper-timer"]);
    logging::init();
    let executor = Arc::new(Executor::new());
    let worker = Arc::clone(&executor);
    std::thread::Builder::new()
        .name("smol-worker-1".into())
        .spawn(move || smol::block_on(worker.run(std::future::pending::<()>())))
        .expect("worker thread");
    let code = smol::block_on(executor.run(serve(args, Arc::clone(&executor))));
    std::process::exit(code);
}

async fn serve(args: Args, executor: Arc<Executor<'static>>) -> i32 {
    let listener = match smol::net::TcpListener::bind(args.listen()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: failed to listen on {}: {e}", args.listen());
            return 1;
        }
    };
    let mut builder = auto::Builder::new(SmolExecutor::new(Arc::clone(&executor)));
    if args.flag("--hyper-timer") {
        builder.http1().timer(SmolTimer::new());
        builder.http2().timer(SmolTimer::new());
    }
    let builder = Arc::new(builder);
    let service = TowerToHyperService::new(routes::service(SmolRuntime::with_executor(
        Arc::clone(&executor),
    )));
    lameduck_bench::announce(listener.local_addr().expect("local address"));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(a) => a,
            Err(_) => {
                smol::Timer::after(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (builder, service) = (Arc::clone(&builder), service.clone());
        executor
            .spawn(async move {
                let _ = builder
                    .serve_connection_with_upgrades(FuturesIo::new(stream), service)
                    .await;
            })
            .detach();
    }
}
