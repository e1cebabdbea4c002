//! A fixed-count HTTP/1.1 load: exactly `--requests N` GETs of `--path` (default `/`) over
//! `--connections C` keep-alive connections to `--addr` (with `--close-every K`, each
//! connection's K-th request asks for `Connection: close` and a new one is opened). Prints one line:
//! `requests=N ok=N errors=N seconds=S rps=R`. Exits 1 on any error.
//!
//! Used where a request count must be exact (instructions per request under callgrind,
//! warm-ups); the requests-per-second measurements use wrk.

use std::net::SocketAddr;

use lameduck_bench::args::{fail, Args};

fn main() {
    let args = Args::from_env(&[]);
    let addr: SocketAddr = args
        .value("--addr")
        .unwrap_or_else(|| fail("--addr HOST:PORT is required"))
        .parse()
        .unwrap_or_else(|_| fail("invalid --addr"));
    let total: u64 = args.get("--requests", 10_000);
    let connections: usize = args.get("--connections", 16);
    let path = args.value("--path").unwrap_or("/").to_string();
    let close_every: u64 = args.get("--close-every", 0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let r = runtime.block_on(lameduck_bench::load::run(
        addr,
        &path,
        total,
        connections,
        close_every,
    ));
    let secs = r.elapsed.as_secs_f64();
    println!(
        "requests={total} ok={} errors={} seconds={secs:.3} rps={:.0}",
        r.ok,
        r.errors,
        r.ok as f64 / secs
    );
    if r.errors > 0 || r.ok != total {
        std::process::exit(1);
    }
}
