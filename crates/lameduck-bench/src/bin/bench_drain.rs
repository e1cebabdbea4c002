//! Peer benchmarks, group 4 (`BENCHMARKS.md`): drain pacing of long-running requests. Goal:
//! a completion rate within 10% of `max(N / grace, min_qps)`, every stream ended within the
//! grace period.
//!
//! ```text
//! bench_drain --streams 400,4000 --grace 5s [--min-qps 200] [--out DIR]
//!             --server LABEL=COMMAND... [--server ...]
//! ```
//!
//! For each stream count N and each server: start the server (its command must listen on
//! 127.0.0.1:0 with `--shutdown-watch-termination-grace-period` equal to `--grace`), open N
//! `GET /watch` streams (one HTTP/1.1 connection each), wait until every stream has its
//! first line, send SIGTERM, and record when each stream's body ends (its last chunk). The
//! completion rate is compared with lameduck's target `max(N / grace, min_qps)`:
//! * `paced rate` = (completions − 1) / (last − first completion): with burst 1 the first
//!   completion is free and each later one waits one interval;
//! * `last − first` = the drain's span, from its first completion (the drain start, when
//!   lameduck's grace period starts) to its last; and `last` from SIGTERM;
//! * `fit rate` = the least-squares slope of completions over time.
//!
//! Writes `DIR/drain-N.svg` (cumulative completions over time since SIGTERM, every server
//! and the target line), `DIR/drain-N-residual.svg` (completions minus the target line, which
//! makes small deviations visible) and `DIR/drain-N.csv` (every completion time), and prints a
//! Markdown table.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lameduck_bench::args::{fail, servers, Args};
use lameduck_bench::http1::{self, Conn};
use lameduck_bench::proc::{Server, SIGTERM};
use lameduck_bench::stats::linear_fit;
use lameduck_bench::svg::{self, Chart, Series};
use tokio::sync::Semaphore;

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

struct Run {
    /// Completion times since SIGTERM (s), sorted.
    ends: Vec<f64>,
    /// Streams that ended with an error instead of a clean last chunk.
    errors: usize,
    /// SIGTERM → reaped (s).
    exit: Option<f64>,
    code: Option<i32>,
}

async fn run_once(cmd: &[String], streams: usize) -> Result<Run, String> {
    let mut server =
        Server::spawn(cmd, None, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let addr = server.addr;
    let ready = Arc::new(AtomicUsize::new(0));
    let connecting = Arc::new(Semaphore::new(128));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<Instant, String>>();
    for _ in 0..streams {
        let (ready, connecting, tx) = (Arc::clone(&ready), Arc::clone(&connecting), tx.clone());
        tokio::spawn(async move {
            let opened = async {
                let _permit = connecting.acquire().await.map_err(|e| e.to_string())?;
                let mut conn = Conn::connect(addr).await.map_err(|e| e.to_string())?;
                conn.send(&http1::get("/watch"))
                    .await
                    .map_err(|e| e.to_string())?;
                let (head, mut body) = conn.read_head().await.map_err(|e| e.to_string())?;
                if head.status != 200 {
                    return Err(format!("GET /watch answered {}", head.status));
                }
                conn.read_body_part(&mut body)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the stream ended before its first line")?;
                Ok((conn, body))
            }
            .await;
            let (mut conn, mut body) = match opened {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            ready.fetch_add(1, Ordering::AcqRel);
            let end = loop {
                match conn.read_body_part(&mut body).await {
                    Ok(Some(_)) => continue,
                    Ok(None) => break Ok(Instant::now()),
                    Err(e) => break Err(e.to_string()),
                }
            };
            let _ = tx.send(end);
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(120);
    while ready.load(Ordering::Acquire) < streams {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {streams} streams opened",
                ready.load(Ordering::Acquire)
            ));
        }
        if let Ok(Some(Err(e))) = tokio::time::timeout(Duration::from_millis(5), rx.recv()).await {
            return Err(format!("a stream failed before SIGTERM: {e}"));
        }
    }
    // Every stream has its first line; let the server settle.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    server.signal(SIGTERM).map_err(|e| e.to_string())?;
    let mut ends = Vec::with_capacity(streams);
    let mut errors = 0;
    let collect = async {
        while let Some(r) = rx.recv().await {
            match r {
                Ok(at) => ends.push((at - t0).as_secs_f64()),
                Err(e) => {
                    if errors == 0 {
                        eprintln!("  stream error: {e}");
                    }
                    errors += 1;
                }
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .is_err()
    {
        return Err("streams still open 60 s after SIGTERM".into());
    }
    ends.sort_by(f64::total_cmp);
    let exit = server.wait_exit(Duration::from_secs(60));
    Ok(Run {
        ends,
        errors,
        exit: exit.map(|e| (e.at - t0).as_secs_f64()),
        code: exit.and_then(|e| e.status.code()),
    })
}

/// The smallest of 1, 2, 5 × 10^k at or above `x`.
fn tick_step_up(x: f64) -> f64 {
    let mag = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|v| *v >= x)
        .unwrap_or(10.0 * mag)
}

/// "yes", or "NO (+x ms)" when `t` is past `grace`.
fn within(t: f64, grace: f64) -> String {
    if t <= grace {
        "yes".into()
    } else {
        format!("NO (+{:.1} ms)", (t - grace) * 1e3)
    }
}

fn main() {
    let args = Args::from_env(&[]);
    let list = servers(&args);
    let counts: Vec<usize> = args
        .value("--streams")
        .unwrap_or("400,4000")
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|_| fail("invalid --streams"))
        })
        .collect();
    let grace = args
        .duration("--grace", Duration::from_secs(5))
        .as_secs_f64();
    let min_qps: f64 = args.get("--min-qps", 200.0);
    let out = PathBuf::from(args.value("--out").unwrap_or("."));
    std::fs::create_dir_all(&out).unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    let mut failed = false;
    for &n in &counts {
        let target = (n as f64 / grace).max(min_qps);
        let mut chart = Chart {
            title: format!("Drain pacing: {n} /watch streams, grace {grace} s"),
            subtitle: format!(
                "cumulative completions after SIGTERM (delay 0); target rate max(N/G, {min_qps}) = {target:.0}/s"
            ),
            x_label: "seconds since SIGTERM".into(),
            y_label: "streams completed".into(),
            y_max: Some(n as f64),
            x_max: Some(grace.max((n as f64 - 1.0) / target) + 1.0),
            markers: vec![(grace, format!("grace {grace} s"))],
            ..Chart::default()
        };
        let mut residual = Chart {
            title: format!("Drain pacing: {n} streams, completions minus the target line"),
            subtitle: format!(
                "completed(t) − (1 + {target:.0}/s × (t − first completion)); 0 = exactly on target"
            ),
            x_label: "seconds since SIGTERM".into(),
            y_label: "completions ahead (+) / behind (−) of target".into(),
            x_max: chart.x_max,
            markers: chart.markers.clone(),
            ..Chart::default()
        };
        let mut csv = String::from("server,index,seconds_since_sigterm\n");
        let mut first_start = None;
        for (i, (label, cmd)) in list.iter().enumerate() {
            eprintln!("N={n} {label}: opening streams");
            let run = match runtime.block_on(run_once(cmd, n)) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("N={n} {label}: FAILED: {e}");
                    failed = true;
                    continue;
                }
            };
            let ends = &run.ends;
            let (first, last) = (ends[0], ends[ends.len() - 1]);
            first_start.get_or_insert(first);
            let paced = (ends.len() as f64 - 1.0) / (last - first);
            let idx: Vec<f64> = (1..=ends.len()).map(|k| k as f64).collect();
            let (fit, _) = linear_fit(ends, &idx);
            rows.push(format!(
                "| {n} | {label} | {target:.0} | {paced:.1} | {:+.1}% | {fit:.1} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} |",
                (paced / target - 1.0) * 100.0,
                first,
                last,
                first + (n as f64 - 1.0) / target,
                within(last - first, grace),
                within(last, grace),
                run.errors,
                match (run.exit, run.code) {
                    (Some(e), Some(c)) => format!("{e:.3} s, code {c}"),
                    (Some(e), None) => format!("{e:.3} s, signal"),
                    _ => "not reaped".into(),
                }
            ));
            eprintln!(
                "N={n} {label}: {} completions, first {first:.3} s, last {last:.3} s, paced rate {paced:.1}/s (target {target:.0}/s), {} errors",
                ends.len(),
                run.errors
            );
            for (k, t) in ends.iter().enumerate() {
                csv.push_str(&format!("{label},{},{t:.6}\n", k + 1));
            }
            let mut points = Vec::with_capacity(ends.len() + 1);
            points.push((first, 0.0));
            points.extend(ends.iter().enumerate().map(|(k, &t)| (t, (k + 1) as f64)));
            let ahead: Vec<(f64, f64)> = ends
                .iter()
                .enumerate()
                .map(|(k, &t)| (t, (k + 1) as f64 - (1.0 + target * (t - first))))
                .collect();
            residual.series.push(Series {
                name: label.clone(),
                color: COLORS[i % COLORS.len()].into(),
                points: ahead,
                dashed: false,
            });
            chart.series.push(Series {
                name: format!("{label}: {paced:.0}/s, last at {last:.2} s"),
                color: COLORS[i % COLORS.len()].into(),
                points,
                dashed: false,
            });
        }
        let start = first_start.unwrap_or(0.0);
        let span = (n as f64 - 1.0) / target;
        chart.series.push(Series {
            name: format!("target: {target:.0}/s from the first completion"),
            color: "#000".into(),
            points: vec![(start, 1.0), (start + span, n as f64)],
            dashed: true,
        });
        let worst = residual
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1.abs()))
            .fold(1.0f64, f64::max);
        let bound = tick_step_up(worst * 1.2);
        residual.y_min = -bound;
        residual.y_max = Some(bound);
        residual.series.push(Series {
            name: "target".into(),
            color: "#000".into(),
            points: vec![(start, 0.0), (start + span, 0.0)],
            dashed: true,
        });
        std::fs::write(
            out.join(format!("drain-{n}-residual.svg")),
            svg::render(&residual),
        )
        .expect("write svg");
        let svg_path = out.join(format!("drain-{n}.svg"));
        std::fs::write(&svg_path, svg::render(&chart)).expect("write svg");
        std::fs::write(out.join(format!("drain-{n}.csv")), csv).expect("write csv");
        eprintln!("wrote {}", svg_path.display());
    }
    println!("\n| N | server | target /s | paced rate /s | vs target | fit rate /s | first s | last s | ideal last s (first + (N−1)/target) | last − first ≤ G | last ≤ G (from SIGTERM) | stream errors | exit after SIGTERM |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|");
    for r in rows {
        println!("{r}");
    }
    if failed {
        std::process::exit(1);
    }
}
