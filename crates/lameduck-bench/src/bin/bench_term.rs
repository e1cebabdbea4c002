//! Peer benchmarks, group 3 (`BENCHMARKS.md`): termination latency, measured by the parent
//! that reaps the server. Goal: a median of at most 1 ms from SIGTERM to exit (idle) and from
//! the last response to exit (in flight).
//!
//! ```text
//! bench_term --runs 20 [--in-flight 300ms] --server LABEL=COMMAND... [--server ...]
//! ```
//!
//! Each run starts the server (its command must make it listen on 127.0.0.1:0 and exit
//! promptly on SIGTERM), waits for its `listening on` line, and:
//! * idle (default): sends one `GET /` on a fresh connection, closes it, waits `--settle`
//!   (default 100ms), sends SIGTERM and measures until `waitpid` returns;
//! * `--in-flight D`: sends `GET /sleep?duration=D`, waits `--settle` (the request is in the
//!   handler), sends SIGTERM, reads the whole response (time `response`), and measures from
//!   the complete response to `waitpid` returning (negative if the process was reaped
//!   before the client had read the response's last byte).
//!
//! Servers are measured round-robin (run 1 of each, then run 2 of each, ...), so load from
//! other processes on the machine spreads over all of them. Prints a Markdown table of the
//! median, p90, min and max, and the exit codes seen.

use std::time::{Duration, Instant};

use lameduck_bench::args::{fail, servers, Args};
use lameduck_bench::http1::{self, Conn};
use lameduck_bench::proc::{Server, SIGTERM};
use lameduck_bench::stats::{min_max, quantile};

struct Sample {
    /// SIGTERM → reaped (ms).
    term_to_exit: f64,
    /// Last response byte → reaped (ms), in-flight mode only.
    response_to_exit: Option<f64>,
    code: Option<i32>,
}

async fn run_once(
    cmd: &[String],
    in_flight: Option<Duration>,
    settle: Duration,
) -> Result<Sample, String> {
    let mut server =
        Server::spawn(cmd, None, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let addr = server.addr;
    let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
    match in_flight {
        None => {
            conn.send(&http1::get("/"))
                .await
                .map_err(|e| e.to_string())?;
            let (head, _) = conn.read_response().await.map_err(|e| e.to_string())?;
            if head.status != 200 {
                return Err(format!("GET / answered {}", head.status));
            }
            drop(conn);
            tokio::time::sleep(settle).await;
            let t0 = Instant::now();
            server.signal(SIGTERM).map_err(|e| e.to_string())?;
            let exit = server
                .wait_exit(Duration::from_secs(60))
                .ok_or("no exit within 60 s of SIGTERM")?;
            Ok(Sample {
                term_to_exit: (exit.at - t0).as_secs_f64() * 1e3,
                response_to_exit: None,
                code: exit.status.code(),
            })
        }
        Some(d) => {
            let path = format!("/sleep?duration={}ms", d.as_millis());
            conn.send(&http1::get(&path))
                .await
                .map_err(|e| e.to_string())?;
            tokio::time::sleep(settle).await;
            let t0 = Instant::now();
            server.signal(SIGTERM).map_err(|e| e.to_string())?;
            let (head, _) = conn.read_response().await.map_err(|e| e.to_string())?;
            let response_at = Instant::now();
            if head.status != 200 {
                return Err(format!("the in-flight request answered {}", head.status));
            }
            let exit = server
                .wait_exit(Duration::from_secs(60))
                .ok_or("no exit within 60 s of SIGTERM")?;
            let since_response = if exit.at >= response_at {
                (exit.at - response_at).as_secs_f64() * 1e3
            } else {
                -(response_at - exit.at).as_secs_f64() * 1e3
            };
            Ok(Sample {
                term_to_exit: (exit.at - t0).as_secs_f64() * 1e3,
                response_to_exit: Some(since_response),
                code: exit.status.code(),
            })
        }
    }
}

fn row(label: &str, what: &str, v: &[f64], codes: &str) {
    let (lo, hi) = min_max(v);
    println!(
        "| {label} | {what} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {codes} |",
        v.len(),
        quantile(v, 0.5),
        quantile(v, 0.9),
        lo,
        hi
    );
}

fn main() {
    let args = Args::from_env(&[]);
    let list = servers(&args);
    let runs: usize = args.get("--runs", 20);
    let in_flight = args
        .value("--in-flight")
        .map(|_| args.duration("--in-flight", Duration::ZERO));
    let settle = args.duration("--settle", Duration::from_millis(100));
    if runs == 0 {
        fail("--runs must be positive");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut samples: Vec<Vec<Sample>> = list.iter().map(|_| Vec::new()).collect();
    let mut failures = 0;
    for run in 0..runs {
        for (i, (label, cmd)) in list.iter().enumerate() {
            match runtime.block_on(run_once(cmd, in_flight, settle)) {
                Ok(s) => {
                    eprintln!(
                        "run {run:>2} {label:<28} SIGTERM→exit {:>9.3} ms{}",
                        s.term_to_exit,
                        s.response_to_exit
                            .map(|r| format!("   response→exit {r:>8.3} ms"))
                            .unwrap_or_default()
                    );
                    samples[i].push(s);
                }
                Err(e) => {
                    failures += 1;
                    eprintln!("run {run:>2} {label:<28} FAILED: {e}");
                }
            }
        }
    }
    println!("\n| server | interval | runs | median ms | p90 ms | min ms | max ms | exit codes |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for ((label, _), s) in list.iter().zip(&samples) {
        let mut codes: Vec<String> = s
            .iter()
            .map(|s| s.code.map_or("signal".into(), |c| c.to_string()))
            .collect();
        codes.sort();
        codes.dedup();
        let codes = codes.join(", ");
        let term: Vec<f64> = s.iter().map(|s| s.term_to_exit).collect();
        row(label, "SIGTERM → exit", &term, &codes);
        let resp: Vec<f64> = s.iter().filter_map(|s| s.response_to_exit).collect();
        if !resp.is_empty() {
            row(label, "last response → exit", &resp, &codes);
        }
    }
    if failures > 0 {
        eprintln!("{failures} run(s) failed");
        std::process::exit(1);
    }
}
