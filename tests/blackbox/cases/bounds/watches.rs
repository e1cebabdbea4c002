//! Watches outlive the request timeout: none is cut at it, and in the drain they end paced
//! within the watch grace period.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::poll_exit;
use crate::support::*;

const WATCHES: usize = 800;

const WATCH_FLAGS: &[&str] = &[
    "--request-timeout",
    "1s",
    "--shutdown-watch-termination-grace-period",
    "10s",
];

const WATCH_GRACE: Duration = Duration::from_secs(10);

/// `max(800 / 10 s, 200/s) = 200/s`: 800 ends take about 4 s; unpaced, milliseconds.
const WATCH_MIN_SPREAD: Duration = Duration::from_secs(2);

/// The last end within the grace plus this (CPU contention on a loaded test machine).
const WATCH_SLACK: Duration = Duration::from_secs(4);

/// At 200/s about 20 ends fall in any 100 ms.
const WATCH_MAX_PER_100MS: usize = WATCHES / 4;

/// Connects (and waits for heads) at most this many at once: the listen backlog of the
/// examples can be as small as 128.
const WATCH_CONNECTS_IN_FLIGHT: usize = 64;

/// Each watch thread gives up this long after it started.
const WATCH_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct WatchEnd {
    at: Instant,
    chunks: usize,
}

fn spawn_watch(
    i: usize,
    addr: std::net::SocketAddr,
    heads: mpsc::Sender<Result<(), String>>,
) -> JoinHandle<Result<WatchEnd, String>> {
    std::thread::Builder::new()
        .name(format!("watch-{i}"))
        .stack_size(128 * 1024)
        .spawn(move || -> Result<WatchEnd, String> {
            let started = Instant::now();
            let opened = Conn::connect(addr).and_then(|mut conn| {
                conn.set_read_timeout(Duration::from_secs(20))?;
                conn.send_get("/watch", &[])?;
                let head = conn.read_head()?;
                Ok((conn, head))
            });
            let (mut conn, head) = match opened {
                Ok(ok) => ok,
                Err(e) => {
                    let e = format!("watch {i}: {e}");
                    let _ = heads.send(Err(e.clone()));
                    return Err(e);
                }
            };
            if head.status != 200 || !head.is_chunked() {
                let e = format!("watch {i}: not a 200 chunked stream: {head:?}");
                let _ = heads.send(Err(e.clone()));
                return Err(e);
            }
            let _ = heads.send(Ok(()));
            drop(heads);
            let mut chunks = 0;
            loop {
                match conn.read_chunk() {
                    Ok(Some(_)) => chunks += 1,
                    Ok(None) => {
                        return Ok(WatchEnd {
                            at: Instant::now(),
                            chunks,
                        })
                    }
                    Err(e) => {
                        return Err(format!(
                            "watch {i}: stream ended without its terminating chunk after \
                             {chunks} chunks, {:?} after it started: {e}",
                            started.elapsed()
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
        .expect("spawn watch thread")
}

/// 800 `/watch` streams with `--request-timeout 1s` and a 10 s grace: none is cut at the
/// request timeout (neither while serving nor in the drain); after SIGTERM they all end
/// cleanly, paced at 200/s (about 4 s), within the grace, and the process exits 0.
pub fn watches_outlive_the_request_timeout(bin: &'static str) {
    // 800 sockets here, 800 in the server, and the other cases running beside this one.
    ensure_open_files(4096);
    let mut server = ServerProcess::start(bin, WATCH_FLAGS);
    let addr = server.addr;

    let (heads_tx, heads_rx) = mpsc::channel::<Result<(), String>>();
    let opened_by = Instant::now() + Duration::from_secs(60);
    let mut threads = Vec::with_capacity(WATCHES);
    let mut heads = 0;
    let receive_head = |heads: &mut usize| {
        let left = opened_by.saturating_duration_since(Instant::now());
        match heads_rx.recv_timeout(left) {
            Ok(Ok(())) => *heads += 1,
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(e) => panic!(
                "only {heads} of {WATCHES} watches open: {e}\n{}",
                server.describe()
            ),
        }
    };
    for i in 0..WATCHES {
        if threads.len() - heads >= WATCH_CONNECTS_IN_FLIGHT {
            receive_head(&mut heads);
        }
        threads.push(spawn_watch(i, addr, heads_tx.clone()));
    }
    drop(heads_tx);
    while heads < WATCHES {
        receive_head(&mut heads);
    }
    let all_open = Instant::now();

    // Past the request timeout while serving: every watch still streams.
    std::thread::sleep(Duration::from_millis(1500));
    let ended_early: Vec<usize> = (0..WATCHES).filter(|&i| threads[i].is_finished()).collect();
    if let Some(&i) = ended_early.first() {
        let n = ended_early.len();
        let first = threads.swap_remove(i).join();
        panic!(
            "{n} of {WATCHES} watches ended before the signal, {:?} after the last one \
             opened (--request-timeout 1s must not bound long-running requests); the first: \
             {first:?}\n{}",
            all_open.elapsed(),
            server.describe()
        );
    }

    let sent = server.signal("TERM");
    let mut ends = Vec::with_capacity(WATCHES);
    let mut failures = Vec::new();
    for thread in threads {
        match thread.join() {
            Ok(Ok(end)) => ends.push(end),
            Ok(Err(e)) => failures.push(e),
            Err(_) => failures.push("a watch thread panicked".into()),
        }
    }
    let exit = poll_exit(
        &mut server,
        sent.after + WATCH_GRACE + WATCH_SLACK + Duration::from_secs(2),
        Duration::from_millis(10),
    );
    let not_accepting = server.signals().time_of(NOT_ACCEPTING);

    ends.sort_by_key(|e| e.at);
    let since_signal = |at: Instant| at.saturating_duration_since(sent.before);
    let first = ends.first().map_or(Duration::ZERO, |e| since_signal(e.at));
    let last = ends.last().map_or(Duration::ZERO, |e| since_signal(e.at));
    let spread = last.saturating_sub(first);
    let max_per_100ms = (0..ends.len())
        .map(|i| {
            ends[i..]
                .iter()
                .take_while(|f| f.at.duration_since(ends[i].at) < Duration::from_millis(100))
                .count()
        })
        .max()
        .unwrap_or(0);
    // A cut at the request timeout would end (most of) them about 1 s after N.
    let by_n_plus_1500ms = not_accepting.map_or(0, |n| {
        ends.iter()
            .filter(|e| e.at < n + Duration::from_millis(1500))
            .count()
    });
    let summary = format!(
        "{} of {WATCHES} ended cleanly; first end {first:?}, last end {last:?} after SIGTERM, \
         spread {spread:?}, at most {max_per_100ms} ends in 100 ms, {by_n_plus_1500ms} ended \
         by NotAcceptingNewRequest + 1.5 s; NotAcceptingNewRequest {:?} after SIGTERM; \
         chunks per stream {}..={}; exit {:?} {:?} after SIGTERM",
        ends.len(),
        not_accepting.map(since_signal),
        ends.iter().map(|e| e.chunks).min().unwrap_or(0),
        ends.iter().map(|e| e.chunks).max().unwrap_or(0),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| since_signal(at)),
    );
    eprintln!("{bin} watches past the request timeout: {summary}");
    assert!(
        failures.is_empty(),
        "{} of {WATCHES} watches did not end cleanly, e.g. {:?}\n{summary}\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        server.describe()
    );
    let (code, _) = exit.unwrap_or_else(|| {
        panic!(
            "still running {:?} after SIGTERM: {summary}\n{}",
            WATCH_GRACE + WATCH_SLACK + Duration::from_secs(2),
            server.describe()
        )
    });
    assert_eq!(code, 0, "exit code: {summary}\n{}", server.describe());
    assert!(
        ends.iter().all(|e| e.at > sent.before),
        "a watch ended before the signal: {summary}"
    );
    assert!(
        last < WATCH_GRACE + WATCH_SLACK,
        "watches must end within the {WATCH_GRACE:?} grace (+{WATCH_SLACK:?}): {summary}"
    );
    assert!(
        spread >= WATCH_MIN_SPREAD,
        "ends not paced (800 at 200/s take ~4 s; want ≥ {WATCH_MIN_SPREAD:?}): {summary}"
    );
    assert!(
        max_per_100ms <= WATCH_MAX_PER_100MS,
        "more than {WATCH_MAX_PER_100MS} ends within 100 ms: a burst, not paced: {summary}"
    );
    assert!(
        by_n_plus_1500ms <= WATCHES / 2,
        "half the watches or more ended by NotAcceptingNewRequest + 1.5 s: cut at the 1 s \
         request timeout rather than paced over the grace: {summary}"
    );
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(WATCH_FLAGS);
}
