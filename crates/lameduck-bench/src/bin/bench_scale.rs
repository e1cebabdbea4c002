//! Peer benchmarks, group 5 (`BENCHMARKS.md`): memory and termination time with many idle
//! keep-alive connections.
//!
//! ```text
//! bench_scale --connections 10000 [--runs 1] --server LABEL=COMMAND... [--server ...]
//! ```
//!
//! For each server: start it (listening on 127.0.0.1:0, delay 0), read its `VmRSS`, open
//! `--connections` connections that each send one `GET /` and keep the connection open
//! (HTTP/1.1 keep-alive, idle after the response), read `VmRSS`/`VmHWM` again, send SIGTERM
//! and measure until the last client connection is closed by the server and until the
//! process is reaped. The client and the server are separate processes, so each stays under
//! the file-descriptor limit. Prints a Markdown table.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lameduck_bench::args::{fail, servers, Args};
use lameduck_bench::http1::{self, Conn};
use lameduck_bench::proc::{Server, SIGTERM};
use tokio::sync::Semaphore;

struct Run {
    rss_idle: u64,
    rss_open: u64,
    hwm: u64,
    open_secs: f64,
    /// Connections retried while opening.
    retries: usize,
    /// SIGTERM → last connection closed by the server (s).
    closed: f64,
    closed_count: usize,
    /// SIGTERM → reaped (s).
    exit: f64,
    code: Option<i32>,
}

async fn run_once(cmd: &[String], connections: usize, timeout: Duration) -> Result<Run, String> {
    let mut server =
        Server::spawn(cmd, None, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let addr = server.addr;
    // One request first, so lazily built state is there before the idle reading.
    let mut c = Conn::connect(addr).await.map_err(|e| e.to_string())?;
    c.send(&http1::get("/")).await.map_err(|e| e.to_string())?;
    c.read_response().await.map_err(|e| e.to_string())?;
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss_idle, _) = server.memory_kib().ok_or("cannot read /proc/PID/status")?;

    let opened = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let connecting = Arc::new(Semaphore::new(256));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<Instant, String>>();
    let start = Instant::now();
    for _ in 0..connections {
        let (opened, retries, connecting, tx) = (
            Arc::clone(&opened),
            Arc::clone(&retries),
            Arc::clone(&connecting),
            tx.clone(),
        );
        tokio::spawn(async move {
            let open = || async {
                let _permit = connecting.acquire().await.map_err(|e| e.to_string())?;
                let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
                conn.send(&http1::get("/"))
                    .await
                    .map_err(|e| e.to_string())?;
                let (head, _) = conn.read_response().await.map_err(|e| e.to_string())?;
                if head.status != 200 || head.close {
                    return Err(format!(
                        "GET / answered {} (close: {})",
                        head.status, head.close
                    ));
                }
                Ok(conn)
            };
            // A connection that fails while being opened (a reset under the connect burst)
            // is retried, up to 3 attempts; retries are counted and reported.
            let mut conn = open().await;
            for _ in 0..2 {
                if conn.is_ok() {
                    break;
                }
                retries.fetch_add(1, Ordering::Relaxed);
                conn = open().await;
            }
            let mut conn = match conn {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            opened.fetch_add(1, Ordering::AcqRel);
            // Idle until the server closes the connection.
            let r = conn.wait_close().await;
            let _ = tx.send(match r {
                Ok(_) => Ok(Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Instant::now()),
                Err(e) => Err(e.to_string()),
            });
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(120);
    while opened.load(Ordering::Acquire) < connections {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} connections opened",
                opened.load(Ordering::Acquire)
            ));
        }
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(5), rx.recv()).await {
            return Err(format!("a connection ended before SIGTERM: {r:?}"));
        }
    }
    let open_secs = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_open, hwm) = server.memory_kib().ok_or("cannot read /proc/PID/status")?;

    let t0 = Instant::now();
    server.signal(SIGTERM).map_err(|e| e.to_string())?;
    let mut last = t0;
    let mut closed_count = 0;
    let collect = async {
        while let Some(r) = rx.recv().await {
            if let Ok(at) = r {
                closed_count += 1;
                last = last.max(at);
            }
        }
    };
    let complete = tokio::time::timeout(timeout, collect).await.is_ok();
    let exit = server.wait_exit(if complete { timeout } else { Duration::ZERO });
    let Some(exit) = exit else {
        return Err(format!(
            "not exited {timeout:?} after SIGTERM ({closed_count} of {connections} connections closed by then)"
        ));
    };
    Ok(Run {
        rss_idle,
        rss_open,
        hwm,
        open_secs,
        retries: retries.load(Ordering::Relaxed),
        closed: (last - t0).as_secs_f64(),
        closed_count,
        exit: (exit.at - t0).as_secs_f64(),
        code: exit.status.code(),
    })
}

fn main() {
    let args = Args::from_env(&[]);
    let list = servers(&args);
    let connections: usize = args.get("--connections", 10_000);
    let runs: usize = args.get("--runs", 1);
    let timeout = args.duration("--timeout", Duration::from_secs(45));
    if runs == 0 {
        fail("--runs must be positive");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    let mut failed = false;
    for run in 0..runs {
        for (label, cmd) in &list {
            match runtime.block_on(run_once(cmd, connections, timeout)) {
                Ok(r) => {
                    eprintln!(
                        "run {run} {label}: idle {} KiB, open {} KiB, SIGTERM→last close {:.3} s, →exit {:.3} s",
                        r.rss_idle, r.rss_open, r.closed, r.exit
                    );
                    rows.push(format!(
                        "| {label} | {run} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {:.1} | {}/{connections} | {:.1} | {} |",
                        r.rss_idle as f64 / 1024.0,
                        r.rss_open as f64 / 1024.0,
                        r.hwm as f64 / 1024.0,
                        (r.rss_open.saturating_sub(r.rss_idle)) as f64 / connections as f64,
                        r.open_secs,
                        r.retries,
                        r.closed * 1e3,
                        r.closed_count,
                        r.exit * 1e3,
                        r.code.map_or("signal".into(), |c| c.to_string()),
                    ));
                }
                Err(e) => {
                    eprintln!("run {run} {label}: FAILED: {e}");
                    rows.push(format!("| {label} | {run} | FAILED: {e} ||||||||||"));
                    failed = true;
                }
            }
        }
    }
    println!("\n| server | run | RSS idle MiB | RSS with {connections} conns MiB | VmHWM MiB | KiB per conn | open s | open retries | SIGTERM → last close ms | closed by server | SIGTERM → exit ms | exit code |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in rows {
        println!("{r}");
    }
    if failed {
        std::process::exit(1);
    }
}
