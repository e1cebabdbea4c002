//! The termination bounds, as kube-apiserver's:
//!
//! - the request timeout bounds a normal request's whole life, streamed body included (a
//!   `/stream` past it is aborted), while long-running requests (`/watch`) outlive it and end,
//!   paced, within the watch grace period;
//! - a normal request shorter than the request timeout completes across the drain, however
//!   long it is;
//! - a second signal exits 1 at once, even while destroy hooks run;
//! - an exempt request (`/metrics`) in flight when the drain starts completes before the exit.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::h2::{runtime, H2Conn, H2End};
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Shared helpers.

/// Polls the exit status every `every` until `deadline`: the exit code and the moment the
/// exit was seen (the exit happened at most `every` before it, and not after it).
fn poll_exit(
    server: &mut ServerProcess,
    deadline: Instant,
    every: Duration,
) -> Option<(i32, Instant)> {
    loop {
        let before = Instant::now();
        if let Some(status) = server.wait_exit(Duration::ZERO) {
            return Some((status.code().unwrap_or(-1), before));
        }
        if before >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// Whether an I/O error means the server aborted the response (closed or reset the
/// connection), as opposed to the client giving up waiting.
fn is_abort(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Reads the rest of a chunked body that must be aborted by the server. Returns when the
/// body was cut: the moment and the number of further chunks; panics if it ended cleanly or
/// the read timed out.
fn read_until_aborted(conn: &mut Conn, what: &str, server: &ServerProcess) -> (Instant, usize) {
    let mut chunks = 0;
    // /stream?duration=5s sends 50 lines: more reads than that is a runaway stream.
    for _ in 0..200 {
        match conn.read_chunk() {
            Ok(Some(_)) => chunks += 1,
            Ok(None) => panic!(
                "{what}: the body ended cleanly (terminating chunk) after {chunks} more \
                 chunks; it should have been aborted at the request timeout\n{}",
                server.describe()
            ),
            Err(e) if is_abort(&e) => return (Instant::now(), chunks),
            Err(e) => panic!(
                "{what}: neither aborted nor ended after {chunks} more chunks: {e}\n{}",
                server.describe()
            ),
        }
    }
    panic!("{what}: more than 200 chunks\n{}", server.describe());
}

/// Sends `GET path` on a new connection and reads the head and the first chunk of a chunked
/// 200. Returns the connection, when the request was sent and when the first chunk arrived.
fn open_stream(addr: std::net::SocketAddr, path: &str, what: &str) -> (Conn, Instant, Instant) {
    let mut conn = Conn::connect(addr).unwrap_or_else(|e| panic!("{what}: connect: {e}"));
    conn.set_read_timeout(Duration::from_secs(8))
        .expect("read timeout");
    let sent = Instant::now();
    conn.send_get(path, &[])
        .unwrap_or_else(|e| panic!("{what}: send: {e}"));
    let head = conn
        .read_head()
        .unwrap_or_else(|e| panic!("{what}: head: {e}"));
    assert!(
        head.status == 200 && head.is_chunked(),
        "{what}: expected a chunked 200, got {head:?}"
    );
    let first = conn
        .read_chunk()
        .unwrap_or_else(|e| panic!("{what}: first chunk: {e}"));
    let first_at = Instant::now();
    assert_eq!(
        first.as_deref(),
        Some(&b"line 0\n"[..]),
        "{what}: the first chunk"
    );
    (conn, sent, first_at)
}

// ---------------------------------------------------------------------------------------------
// (a) Watches outlive the request timeout.

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

// ---------------------------------------------------------------------------------------------
// (b) A normal streamed response is aborted at the request timeout.

const STREAM_FLAGS: &[&str] = &["--request-timeout", "1s"];
const STREAM_PATH: &str = "/stream?duration=5s";
/// When the abort may come, after the request was sent (the request timeout is 1 s).
const ABORT_WINDOW: (Duration, Duration) =
    (Duration::from_millis(800), Duration::from_millis(2500));
/// "At once": the head and first chunk come this soon after the request.
const FIRST_CHUNK_WITHIN: Duration = Duration::from_millis(500);

/// `GET /stream?duration=5s` with `--request-timeout 1s` (a normal request, its head sent at
/// once): the response is aborted at about 1 s, over HTTP/1.1 (connection closed without the
/// terminating chunk) and HTTP/2 (the stream never ends cleanly); and in a drain, the same
/// abort ends the drain and the process exits 0 long before the 5 s stream would have.
pub fn stream_is_aborted_at_the_request_timeout(bin: &'static str) {
    let mut server = ServerProcess::start(bin, STREAM_FLAGS);
    let addr = server.addr;

    // The route itself: 400 with the parse error on a bad or missing duration; a short
    // stream ends cleanly.
    for path in ["/stream?duration=bogus", "/stream"] {
        let resp = get(addr, path);
        assert_eq!(resp.status(), 400, "GET {path}\n{resp}");
        assert!(
            resp.text().contains("duration"),
            "GET {path}: the 400 body should carry the parse error\n{resp}"
        );
    }
    let short = get(addr, "/stream?duration=250ms");
    assert_eq!(short.status(), 200, "GET /stream?duration=250ms\n{short}");
    assert!(
        short.head.is_chunked() && short.text() == "line 0\nline 1\nline 2\n",
        "GET /stream?duration=250ms: three lines, then the terminating chunk\n{short}"
    );

    // HTTP/1.1 while serving.
    let what = "HTTP/1.1 /stream?duration=5s while serving";
    let (mut conn, sent, first_at) = open_stream(addr, STREAM_PATH, what);
    let first = first_at.duration_since(sent);
    assert!(
        first < FIRST_CHUNK_WITHIN,
        "{what}: head and first chunk should come at once, came after {first:?}"
    );
    let (aborted_at, chunks) = read_until_aborted(&mut conn, what, &server);
    let after = aborted_at.duration_since(sent);
    eprintln!(
        "{bin} {what}: first chunk {first:?}, aborted after {after:?} and {chunks} more chunks"
    );
    assert!(
        (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
        "{what}: aborted {after:?} after the request, want {ABORT_WINDOW:?} (request timeout 1 s)"
    );

    // HTTP/2 (h2c, prior knowledge) while serving: RST_STREAM, never END_STREAM.
    let what = "HTTP/2 /stream?duration=5s while serving";
    let (sent, stream, resets, eof) = runtime().block_on(async {
        let mut h2 = H2Conn::connect(addr).await;
        let sent = Instant::now();
        let task = h2
            .start_get_streaming(STREAM_PATH, Duration::from_secs(8))
            .await;
        let stream = task
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        (sent, stream, h2.resets(), h2.eof_at())
    });
    let first = stream
        .data
        .first()
        .map(|(at, bytes)| (at.duration_since(sent), bytes.clone()));
    let ms = |at: Instant| at.saturating_duration_since(sent);
    let timeline = format!(
        "status {}, head {:?}, first data {first:?}, {} data frames, end {:?}, RST_STREAM \
         (stream, code, after) {:?}, connection EOF {:?}",
        stream.status,
        ms(stream.head_at),
        stream.data.len(),
        match &stream.end {
            H2End::Clean(at) => format!("clean END_STREAM after {:?}", ms(*at)),
            H2End::Failed(at, e) => format!("failed after {:?}: {e}", ms(*at)),
            H2End::TimedOut => "still streaming after 8 s".into(),
        },
        resets
            .iter()
            .map(|r| (r.stream_id, r.error_code, ms(r.at)))
            .collect::<Vec<_>>(),
        eof.map(ms),
    );
    eprintln!("{bin} {what}: {timeline}");
    assert_eq!(stream.status, 200, "{what}: {timeline}");
    assert!(
        first.as_ref().is_some_and(
            |(after, bytes)| *after < FIRST_CHUNK_WITHIN && bytes.starts_with(b"line 0\n")
        ),
        "{what}: head and first line should come at once: {timeline}"
    );
    match &stream.end {
        H2End::Failed(at, _) => {
            let after = ms(*at);
            assert!(
                (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
                "{what}: reset {after:?} after the request, want {ABORT_WINDOW:?}: {timeline}"
            );
            assert!(
                !resets.is_empty() || eof.is_some(),
                "{what}: the stream failed without RST_STREAM or the connection closing: \
                 {timeline}"
            );
        }
        _ => panic!(
            "{what}: must be reset at the request timeout: {timeline}\n{}",
            server.describe()
        ),
    }

    // In a drain (no shutdown delay): the stream in flight at SIGTERM is aborted at its
    // request timeout, which ends the drain.
    let what = "HTTP/1.1 /stream?duration=5s in flight at SIGTERM";
    let (mut conn, sent, _) = open_stream(addr, STREAM_PATH, what);
    let signal = server.signal("TERM");
    let (aborted_at, chunks) = read_until_aborted(&mut conn, what, &server);
    let after = aborted_at.duration_since(sent);
    let exit = poll_exit(
        &mut server,
        signal.after + Duration::from_millis(3500),
        Duration::from_millis(5),
    );
    let timeline = format!(
        "aborted {after:?} after the request ({chunks} more chunks), SIGTERM {:?} after the \
         request, exit {:?} {:?} after SIGTERM",
        signal.before.saturating_duration_since(sent),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(signal.before)),
    );
    eprintln!("{bin} {what}: {timeline}");
    assert!(
        (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
        "{what}: aborted {after:?} after the request, want {ABORT_WINDOW:?}: {timeline}"
    );
    match exit {
        Some((0, _)) => {}
        Some((code, _)) => panic!(
            "{what}: exit {code}, want 0: {timeline}\n{}",
            server.describe()
        ),
        None => panic!(
            "{what}: still running 3.5 s after SIGTERM (the 5 s stream must not hold the \
             drain past its 1 s request timeout): {timeline}\n{}",
            server.describe()
        ),
    }
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(STREAM_FLAGS);
}

// ---------------------------------------------------------------------------------------------
// (c) A long normal request within the request timeout survives the drain.

const LONG_FLAGS: &[&str] = &["--request-timeout", "60s"];
const LONG_SLEEP: Duration = Duration::from_secs(45);

/// `GET /sleep?duration=45s` with `--request-timeout 60s`, in flight at SIGTERM: the drain
/// waits for it (no shorter bound cuts it), the reply is a complete 200 after ~45 s, and the
/// process exits 0 only after it. Takes about 46 s.
pub fn long_request_survives_the_drain(bin: &'static str) {
    let mut server = ServerProcess::start(bin, LONG_FLAGS);
    let addr = server.addr;
    let mut conn = Conn::connect(addr).expect("connect");
    conn.set_read_timeout(LONG_SLEEP + Duration::from_secs(15))
        .expect("read timeout");
    let sent = Instant::now();
    conn.send_get("/sleep?duration=45s", &[])
        .expect("send /sleep");
    // The reader: bounded by the read timeout above (60 s).
    let reader = std::thread::Builder::new()
        .name("long-sleep".into())
        .spawn(move || {
            let resp = conn.read_response();
            (resp, Instant::now())
        })
        .expect("spawn reader");
    std::thread::sleep(Duration::from_millis(300));
    let signal = server.signal("TERM");
    server.wait_signal(NOT_ACCEPTING, Duration::from_secs(5));

    // While the request is in flight: the process runs, the drain is not over.
    let give_up = sent + LONG_SLEEP + Duration::from_secs(20);
    let mut early = None;
    while !reader.is_finished() && Instant::now() < give_up {
        let elapsed = sent.elapsed();
        if elapsed + Duration::from_millis(500) < LONG_SLEEP && early.is_none() {
            if let Some(status) = server.wait_exit(Duration::ZERO) {
                early = Some(format!(
                    "the process exited ({status}) {elapsed:?} after the request was sent"
                ));
            } else if server.signals().has(IN_FLIGHT_DRAINED) {
                early = Some(format!(
                    "InFlightRequestsDrained logged {elapsed:?} after the request was sent"
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        reader.is_finished(),
        "no reply {:?} after sending /sleep?duration=45s\n{}",
        sent.elapsed(),
        server.describe()
    );
    let (resp, resp_at) = reader.join().expect("reader thread");
    let took = resp_at.duration_since(sent);
    let resp = resp.unwrap_or_else(|e| {
        panic!(
            "in-flight /sleep?duration=45s across the drain: {e} after {took:?} ({})\n{}",
            early
                .as_deref()
                .unwrap_or("the process was running until then"),
            server.describe()
        )
    });
    eprintln!(
        "{bin} long request: {} after {took:?} (SIGTERM {:?} after the request)",
        resp.status(),
        signal.before.saturating_duration_since(sent)
    );
    assert_reply(&resp, 200, SLEEP_BODY, "in-flight /sleep?duration=45s");
    assert!(
        took + Duration::from_millis(100) >= LONG_SLEEP,
        "the reply came after {took:?}, before the {LONG_SLEEP:?} sleep ended"
    );
    assert!(
        early.is_none(),
        "the drain ended before the in-flight request: {}\n{}",
        early.unwrap_or_default(),
        server.describe()
    );
    server.assert_exit(0, Duration::from_secs(10));
    let log = server.signals();
    log.assert_common_dag_order();
    server.assert_trace_legal(LONG_FLAGS);
}

// ---------------------------------------------------------------------------------------------
// (d) A second signal exits 1 at once, even during the destroy hooks.

const DESTROY_FLAGS: &[&str] = &["--destroy-hook-duration", "10s"];
/// "At once".
const SECOND_SIGNAL_EXIT_WITHIN: Duration = Duration::from_millis(50);

/// Whether a log line says the destroy hooks started (the driver's wording is free: any line
/// naming destroy hooks or the demo hook).
fn destroy_hooks_started(server: &ServerProcess) -> bool {
    server.stderr_text().lines().any(|l| {
        let l = l.to_ascii_lowercase();
        (l.contains("destroy hook") || l.contains("demo-destroy"))
            && !l.contains("failed")
            && !l.contains("out of time")
            && !l.contains("panicked")
    })
}

/// `--destroy-hook-duration 10s`: after SIGTERM the drain ends at once and the 10 s destroy
/// hook runs; a second SIGTERM then exits 1 within 50 ms.
pub fn second_signal_during_destroy_hook_exits_at_once(bin: &'static str) {
    let mut server = ServerProcess::start(bin, DESTROY_FLAGS);
    let first = server.signal("TERM");
    server.wait_signal(SHUTDOWN_INITIATED, Duration::from_secs(5));

    // Wait for the destroy hook: a log line saying so, or else (nothing logs it) the drain
    // and the listener's stop, then 200 ms for the exit decision.
    let deadline = first.after + Duration::from_secs(5);
    let mut both_seen = None::<Instant>;
    let how = loop {
        if destroy_hooks_started(&server) {
            std::thread::sleep(Duration::from_millis(100));
            break "a log line says the destroy hooks started (+100 ms)";
        }
        let log = server.signals();
        if both_seen.is_none() && log.has(IN_FLIGHT_DRAINED) && log.has(STOPPED_LISTENING) {
            both_seen = Some(Instant::now());
        }
        if both_seen.is_some_and(|at| at.elapsed() >= Duration::from_millis(200)) {
            break "InFlightRequestsDrained and HTTPServerStoppedListening logged (+200 ms)";
        }
        if let Some(status) = server.wait_exit(Duration::ZERO) {
            panic!(
                "exited ({status}) before the second signal: the 10 s destroy hook should \
                 hold the exit\n{}",
                server.describe()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the destroy hook did not start within 5 s of SIGTERM\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        server.wait_exit(Duration::ZERO).is_none(),
        "exited before the second signal ({how})\n{}",
        server.describe()
    );

    let second = server.signal("TERM");
    let exit = poll_exit(
        &mut server,
        second.after + Duration::from_secs(8),
        Duration::from_millis(1),
    );
    let timeline = format!(
        "second SIGTERM {:?} after the first ({how}); exit {:?} {:?} after `kill` returned",
        second.before.saturating_duration_since(first.before),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(second.after)),
    );
    eprintln!("{bin} second signal during the destroy hook: {timeline}");
    let (code, at) = exit.unwrap_or_else(|| {
        panic!(
            "still running 8 s after the second signal: {timeline}\n{}",
            server.describe()
        )
    });
    assert_eq!(code, 1, "{timeline}\n{}", server.describe());
    let took = at.saturating_duration_since(second.after);
    assert!(
        took <= SECOND_SIGNAL_EXIT_WITHIN,
        "exit 1 should follow the second signal at once (within \
         {SECOND_SIGNAL_EXIT_WITHIN:?}): {timeline}\n{}",
        server.describe()
    );
    server.assert_trace_legal(DESTROY_FLAGS);
}

/// Two SIGTERMs back to back, no sleep in between: exit 1 at once, whatever phase the second
/// one lands in (the 10 s destroy hook must not hold it). The server must count deliveries
/// (tokio's signal stream alone merges deliveries that come before it is polled).
///
/// The second `kill` is sent as soon as the kernel has delivered the first to the server
/// (usually microseconds after `kill` returns): two SIGTERMs pending at once are one for the
/// kernel, and no server could see two (under load that happened in about one run in five).
pub fn two_signals_back_to_back_exit_1(bin: &'static str) {
    const SIGTERM: u32 = 15;
    let mut server = ServerProcess::start(bin, DESTROY_FLAGS);
    let first = server.signal("TERM");
    assert!(
        server.wait_signal_dequeued(SIGTERM, Duration::from_secs(2)),
        "the first SIGTERM still pending 2 s after `kill` returned\n{}",
        server.describe()
    );
    let second = server.signal("TERM");
    let exit = poll_exit(
        &mut server,
        second.after + Duration::from_secs(8),
        Duration::from_millis(1),
    );
    let timeline = format!(
        "second `kill` started {:?} after the first returned; exit {:?} {:?} after the \
         second `kill` returned",
        second.before.saturating_duration_since(first.after),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(second.after)),
    );
    eprintln!("{bin} two signals back to back: {timeline}");
    let (code, at) = exit.unwrap_or_else(|| {
        panic!(
            "still running 8 s after two signals: {timeline}\n{}",
            server.describe()
        )
    });
    assert_eq!(code, 1, "{timeline}\n{}", server.describe());
    assert!(
        at.saturating_duration_since(second.after) < Duration::from_secs(1),
        "exit 1 should follow the second signal at once: {timeline}\n{}",
        server.describe()
    );
    server.assert_trace_legal(DESTROY_FLAGS);
}

// ---------------------------------------------------------------------------------------------
// (e) An exempt request in flight when the drain starts completes.

const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";
const METRICS_DELAY: Duration = Duration::from_secs(2);

/// Asserts a `/metrics` reply: 200, the exposition content type, both in-flight gauges and
/// a `lameduck_signal_fired` sample (0 or 1) per termination signal; those in `fired` must
/// show 1, and with `others_unfired` the others 0.
#[track_caller]
fn assert_metrics(resp: &Response, fired: &[&str], others_unfired: bool, what: &str) {
    assert_eq!(resp.status(), 200, "{what}\n{resp}");
    assert_eq!(
        resp.header("content-type"),
        Some(METRICS_CONTENT_TYPE),
        "{what}: Content-Type\n{resp}"
    );
    let body = resp.text();
    for class in ["normal", "long_running"] {
        let prefix = format!("lameduck_in_flight_requests{{class=\"{class}\"}} ");
        assert!(
            body.lines().any(|l| l
                .strip_prefix(&prefix)
                .is_some_and(|n| n.parse::<u64>().is_ok())),
            "{what}: no `{prefix}N` sample\n{resp}"
        );
    }
    for signal in TERMINATION_SIGNALS {
        let prefix = format!("lameduck_signal_fired{{signal=\"{signal}\"}} ");
        let value = body.lines().find_map(|l| l.strip_prefix(&prefix));
        let want: &[&str] = match (fired.contains(&signal), others_unfired) {
            (true, _) => &["1"],
            (false, true) => &["0"],
            (false, false) => &["0", "1"],
        };
        assert!(
            value.is_some_and(|v| want.contains(&v)),
            "{what}: `{prefix}` is {value:?}, want one of {want:?}\n{resp}"
        );
    }
}

fn exempt_request_in_flight_at_drain(bin: &'static str, flags: &[&str]) {
    let mut server = ServerProcess::start(bin, flags);
    let addr = server.addr;
    assert_metrics(
        &get(addr, "/metrics"),
        &[],
        true,
        "GET /metrics while serving",
    );
    let bad = get(addr, "/metrics?delay=bogus");
    assert_eq!(bad.status(), 400, "GET /metrics?delay=bogus\n{bad}");
    assert!(
        bad.text().contains("bogus"),
        "the 400 body should carry the parse error\n{bad}"
    );

    let mut conn = Conn::connect(addr).expect("connect");
    conn.set_read_timeout(Duration::from_secs(10))
        .expect("read timeout");
    let sent = Instant::now();
    conn.send_get("/metrics?delay=2s", &[])
        .expect("send /metrics?delay=2s");
    // The reader: bounded by the read timeout above.
    let reader = std::thread::Builder::new()
        .name("slow-scrape".into())
        .spawn(move || {
            let resp = conn.read_response();
            (resp, Instant::now())
        })
        .expect("spawn reader");
    std::thread::sleep(Duration::from_millis(100));
    let signal = server.signal("TERM");

    // Watch for an exit while the scrape is in flight (the read timeout bounds the reader).
    let mut exited_at = None;
    let give_up = sent + Duration::from_secs(15);
    while !reader.is_finished() && Instant::now() < give_up {
        if exited_at.is_none() {
            exited_at = poll_exit(&mut server, Instant::now(), Duration::ZERO).map(|(_, at)| at);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        reader.is_finished(),
        "no reply to /metrics?delay=2s within 15 s\n{}",
        server.describe()
    );
    let (resp, resp_at) = reader.join().expect("reader thread");
    let ms = |at: Instant| at.saturating_duration_since(sent);
    let timeline = format!(
        "SIGTERM {:?}, reply {:?}, exit seen {:?}, InFlightRequestsDrained {:?} after the \
         request",
        ms(signal.before),
        ms(resp_at),
        exited_at.map(ms),
        server.signals().time_of(IN_FLIGHT_DRAINED).map(ms),
    );
    eprintln!("{bin} {flags:?} slow scrape across the drain: {timeline}");
    let resp = resp.unwrap_or_else(|e| {
        panic!(
            "/metrics?delay=2s in flight at SIGTERM: {e}: {timeline}\n{}",
            server.describe()
        )
    });
    assert_metrics(
        &resp,
        &[SHUTDOWN_INITIATED, AFTER_SHUTDOWN_DELAY, NOT_ACCEPTING],
        false,
        "/metrics?delay=2s in flight at SIGTERM (sampled after the delay)",
    );
    assert!(
        ms(resp_at) + Duration::from_millis(100) >= METRICS_DELAY,
        "the reply came before the 2 s delay: {timeline}"
    );
    let exited_early =
        exited_at.is_some_and(|at| ms(at) + Duration::from_millis(100) < METRICS_DELAY);
    assert!(
        !exited_early,
        "the process exited before the in-flight exempt request could finish: {timeline}"
    );
    server.assert_exit(0, Duration::from_secs(10));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(flags);
}

/// Close-listener mode: `GET /metrics?delay=2s` (exempt from admission) in flight at SIGTERM
/// (no shutdown delay): its reply arrives complete and the process exits 0 after it.
pub fn exempt_request_in_flight_at_drain_completes(bin: &'static str) {
    exempt_request_in_flight_at_drain(bin, &[]);
}

/// The same in retry-after mode (`--shutdown-send-retry-after`).
pub fn exempt_request_in_flight_at_drain_completes_retry_after_mode(bin: &'static str) {
    exempt_request_in_flight_at_drain(bin, &["--shutdown-send-retry-after"]);
}
