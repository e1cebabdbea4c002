//! Hundreds of open `/watch` streams end cleanly, paced at the rate of `docs/design.md#dag`,
//! within the grace.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::*;

const STREAMS: usize = 300;
const GRACE: Duration = Duration::from_secs(5);
/// `max(300 / 5 s, 200) = 200/s`: 300 completions take about 1.5 s.
const MIN_SPREAD: Duration = Duration::from_millis(800);
/// Each watch thread gives up this long after it started.
const WATCH_DEADLINE: Duration = Duration::from_secs(45);

#[derive(Debug)]
struct Ended {
    at: Instant,
    chunks: usize,
}

pub fn watch_streams_drain_paced(bin: &'static str) {
    let mut server =
        ServerProcess::start(bin, &["--shutdown-watch-termination-grace-period", "5s"]);
    let addr = server.addr;

    let (heads_tx, heads_rx) = mpsc::channel::<Result<(), String>>();
    let mut threads = Vec::with_capacity(STREAMS);
    for i in 0..STREAMS {
        let heads_tx = heads_tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("watch-{i}"))
            .stack_size(128 * 1024)
            .spawn(move || -> Result<Ended, String> {
                let started = Instant::now();
                let head = Conn::connect(addr).and_then(|mut conn| {
                    conn.send_get("/watch", &[])?;
                    let head = conn.read_head()?;
                    Ok((conn, head))
                });
                let (mut conn, head) = match head {
                    Ok(ok) => ok,
                    Err(e) => {
                        let e = format!("watch {i}: {e}");
                        let _ = heads_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                if head.status != 200 || !head.is_chunked() {
                    let e = format!("watch {i}: not a 200 chunked stream: {head:?}");
                    let _ = heads_tx.send(Err(e.clone()));
                    return Err(e);
                }
                let _ = heads_tx.send(Ok(()));
                let mut chunks = 0;
                loop {
                    match conn.read_chunk() {
                        Ok(Some(_)) => chunks += 1,
                        Ok(None) => {
                            return Ok(Ended {
                                at: Instant::now(),
                                chunks,
                            })
                        }
                        Err(e) => {
                            return Err(format!(
                                "watch {i}: stream ended without its terminating chunk \
                                 after {chunks} chunks: {e}"
                            ))
                        }
                    }
                    if started.elapsed() > WATCH_DEADLINE {
                        return Err(format!(
                            "watch {i}: still streaming after {WATCH_DEADLINE:?}"
                        ));
                    }
                }
            })
            .expect("spawn watch thread");
        threads.push(thread);
    }
    drop(heads_tx);

    // Every stream open and answered before the signal.
    let opened_by = Instant::now() + Duration::from_secs(30);
    for n in 0..STREAMS {
        let left = opened_by.saturating_duration_since(Instant::now());
        match heads_rx.recv_timeout(left) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(e) => panic!(
                "only {n} of {STREAMS} watches open: {e}\n{}",
                server.describe()
            ),
        }
    }
    // Let the server see them all as in flight.
    std::thread::sleep(Duration::from_millis(300));

    let sent = server.signal("TERM");
    let mut ends = Vec::with_capacity(STREAMS);
    let mut failures = Vec::new();
    for thread in threads {
        match thread.join() {
            Ok(Ok(ended)) => ends.push(ended),
            Ok(Err(e)) => failures.push(e),
            Err(_) => failures.push("a watch thread panicked".into()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {STREAMS} watches did not end cleanly, e.g. {:?}\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        server.describe()
    );
    server.assert_exit(0, Duration::from_secs(15));

    ends.sort_by_key(|e| e.at);
    let first = ends[0].at.duration_since(sent.before);
    let last = ends[STREAMS - 1].at.duration_since(sent.before);
    let spread = last - first;
    let max_per_100ms = ends
        .iter()
        .enumerate()
        .map(|(i, e)| {
            ends[i..]
                .iter()
                .take_while(|f| f.at.duration_since(e.at) < Duration::from_millis(100))
                .count()
        })
        .max()
        .unwrap_or(0);
    let summary = format!(
        "first end {first:?}, last end {last:?} after the signal, spread {spread:?}, \
         at most {max_per_100ms} ends in 100 ms, chunks per stream {}..={}",
        ends.iter().map(|e| e.chunks).min().unwrap_or(0),
        ends.iter().map(|e| e.chunks).max().unwrap_or(0),
    );
    eprintln!("{bin} watch drain: {summary}");
    assert!(
        last <= GRACE + Duration::from_secs(2),
        "watches must end within the {GRACE:?} grace (+2 s slack): {summary}"
    );
    assert!(
        spread >= MIN_SPREAD,
        "completions not paced (300 at 200/s take ~1.5 s; want ≥ {MIN_SPREAD:?}): {summary}"
    );
    assert!(
        max_per_100ms <= STREAMS / 2,
        "half the watches or more ended within 100 ms: not paced: {summary}"
    );
    let log = server.signals();
    log.assert_common_dag_order();
    server.assert_trace_legal(&["--shutdown-watch-termination-grace-period", "5s"]);
}
