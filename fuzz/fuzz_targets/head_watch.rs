//! Drives the HTTP/1 header-read watch (`HeadWatch` over a `ConnActivity`) through arbitrary
//! request heads, response ends, clock advances, timer firings and polls, on a deterministic
//! runtime whose clock only moves when told.
//!
//! A connection waits for a request head while no request is in flight: from its opening,
//! and again from the end of its last response. The module promises that a wait is timed from
//! a clock reading at most `TICK` old, "so a connection is closed up to this much before its
//! timeout (never after)": with `W` the start of the current wait, the watch says to close
//! (`after_pending` is `true`) at a time in `[W + timeout - TICK, W + timeout]`. That is what
//! is checked, as the connection's task sees it:
//!
//! - `after_pending` is `true` only while no request is in flight, at a time at least
//!   `W + timeout - TICK`;
//! - at every poll at or after `W + timeout` with no request in flight, it is `true`; and the
//!   clock never reaches `W + timeout` with the connection still open: the watch's timer has
//!   fired by then and the poll it woke said to close;
//! - once the connection speaks HTTP/2, it is never `true`.
//!
//! The runtime is what the watch assumes of one: each timer fires when the clock reaches it
//! (the clock moves from timer to timer), the woken task is polled at once, and so is the
//! task whenever a request head arrives or a response ends (hyper does both inside a poll of
//! the connection). The timeout is at least two ticks (the watch's timeout is
//! `HEADER_READ_TIMEOUT`, 30 s): with less, a connection whose requests keep coming until
//! just before its wait can be closed up to a tick after the timeout.
#![no_main]

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use lameduck::{Config, Lifecycle, Shared, StdClock};
use lameduck_hyper::adapter::HEADER_READ_TIMEOUT;
use lameduck_hyper::fuzzing::{ConnActivity, HeadWatch, InFlight, TICK};
use lameduck_hyper::{AdmissionLayer, OsSignal, Runtime};
use libfuzzer_sys::fuzz_target;

/// Ops past this many are ignored.
const MAX_OPS: usize = 300;

/// The clock's zero.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The fake runtime's clock and timers.
#[derive(Default)]
struct Clock {
    /// Since [`base`].
    now: Duration,
    next_id: u64,
    /// The timers alive: deadline and the waker of their last poll.
    timers: BTreeMap<u64, (Duration, Option<Waker>)>,
}

#[derive(Clone, Default)]
struct FakeRuntime(Arc<Mutex<Clock>>);

impl FakeRuntime {
    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.0.lock().unwrap()
    }

    fn now(&self) -> Duration {
        self.clock().now
    }

    /// The earliest deadline of a timer that was polled (so has a task to wake).
    fn next_deadline(&self) -> Option<Duration> {
        let clock = self.clock();
        clock
            .timers
            .values()
            .filter(|(_, w)| w.is_some())
            .map(|(at, _)| *at)
            .min()
    }

    /// Sets the clock to `at` and wakes every timer due by then.
    fn set(&self, at: Duration) {
        let mut wakers = Vec::new();
        {
            let mut clock = self.clock();
            clock.now = clock.now.max(at);
            let now = clock.now;
            for (deadline, waker) in clock.timers.values_mut() {
                if *deadline <= now {
                    wakers.extend(waker.take());
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }
}

struct FakeSleep {
    runtime: FakeRuntime,
    id: u64,
}

impl Future for FakeSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut clock = self.runtime.clock();
        let now = clock.now;
        let (deadline, waker) = clock.timers.get_mut(&self.id).expect("a live timer");
        if *deadline <= now {
            return Poll::Ready(());
        }
        *waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for FakeSleep {
    fn drop(&mut self) {
        self.runtime.clock().timers.remove(&self.id);
    }
}

/// hyper's timer: the watch never uses it.
#[derive(Clone)]
struct NoTimer;

impl hyper::rt::Timer for NoTimer {
    fn sleep(&self, _: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        unreachable!("the watch uses the runtime's timer")
    }

    fn sleep_until(&self, _: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        unreachable!("the watch uses the runtime's timer")
    }
}

struct NoOsSignals;

impl futures_core::Stream for NoOsSignals {
    type Item = OsSignal;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<OsSignal>> {
        Poll::Pending
    }
}

impl Runtime for FakeRuntime {
    type Sleep = FakeSleep;
    type HyperTimer = NoTimer;
    type OsSignals = NoOsSignals;

    fn now(&self) -> Instant {
        base() + self.clock().now
    }

    fn sleep_until(&self, deadline: Instant) -> FakeSleep {
        let mut clock = self.clock();
        let id = clock.next_id;
        clock.next_id += 1;
        clock
            .timers
            .insert(id, (deadline.saturating_duration_since(base()), None));
        FakeSleep {
            runtime: self.clone(),
            id,
        }
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, _: F) {
        unreachable!("the watch spawns nothing")
    }

    fn hyper_timer(&self) -> NoTimer {
        NoTimer
    }

    fn os_signals(&self) -> io::Result<NoOsSignals> {
        Ok(NoOsSignals)
    }
}

/// The connection's task: woken or not.
#[derive(Default)]
struct Task(AtomicBool);

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[derive(Arbitrary, Debug)]
enum Timeout {
    HeaderRead,
    /// Two ticks and this many milliseconds.
    Millis(u32),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A request head arrives (the connection's task polls right after, with any other
    /// change of this instant).
    Head,
    /// The response of the in-flight request with this index (of those in flight) ends.
    End(u8),
    /// A request whose response ends at once.
    Quick,
    /// The clock moves on this many milliseconds (the timers due on the way fire).
    Advance(u16),
    /// The clock moves on this many seconds.
    AdvanceSecs(u8),
    /// The clock moves to the next timer, which fires.
    NextTimer,
    /// The clock moves to a nanosecond before the next timer.
    JustBeforeNextTimer,
    /// The task is polled for some other reason.
    Poll,
    /// The connection turns out to speak HTTP/2.
    Http2,
}

#[derive(Arbitrary, Debug)]
struct Input {
    timeout: Timeout,
    ops: Vec<Op>,
}

struct Harness {
    runtime: FakeRuntime,
    activity: ConnActivity<FakeRuntime>,
    watch: HeadWatch<FakeRuntime>,
    task: Arc<Task>,
    waker: Waker,
    timeout: Duration,
    in_flight: Vec<InFlight<FakeRuntime>>,
    /// The start of the current wait for a head, while there is one.
    waiting_since: Option<Duration>,
    /// A head came or a response ended since the task's last poll.
    changed: bool,
    http2: bool,
    closed: bool,
}

impl Harness {
    /// Polls the task (again while it woke itself): the watch's answer, checked.
    fn poll(&mut self) {
        self.changed = false;
        for _ in 0..100 {
            self.task.0.store(false, Ordering::SeqCst);
            let close = self
                .watch
                .after_pending(&mut Context::from_waker(&self.waker));
            self.check(close);
            if self.closed || !self.task.0.load(Ordering::SeqCst) {
                return;
            }
        }
        panic!("the watch keeps waking its task");
    }

    fn check(&mut self, close: bool) {
        let now = self.runtime.now();
        assert_eq!(self.activity.is_idle(), self.waiting_since.is_some());
        if self.http2 {
            assert!(!close, "an HTTP/2 connection timed out");
            return;
        }
        match self.waiting_since {
            Some(since) if close => {
                let waited = now - since;
                let least = self.timeout.saturating_sub(TICK);
                assert!(
                    waited >= least,
                    "closed after a wait of {waited:?}, less than {least:?}"
                );
                self.closed = true;
            }
            Some(since) => assert!(
                now < since + self.timeout,
                "open at {now:?}, a wait since {since:?} past the timeout {:?}",
                self.timeout
            ),
            None => assert!(!close, "closed at {now:?} with a request in flight"),
        }
    }

    /// Moves the clock to `to`: every timer due on the way fires at its deadline, and the
    /// task it wakes is polled then.
    fn advance_to(&mut self, to: Duration) {
        if self.changed {
            self.poll();
        }
        while !self.closed {
            let Some(at) = self.runtime.next_deadline().filter(|&at| at <= to) else {
                break;
            };
            self.runtime.set(at);
            if self.task.0.load(Ordering::SeqCst) {
                self.poll();
            }
        }
        if self.closed {
            return;
        }
        self.runtime.set(to);
        if let Some(since) = self.waiting_since.filter(|_| !self.http2) {
            assert!(
                to < since + self.timeout,
                "the clock reached {to:?}, a wait since {since:?} past the timeout {:?}, and the connection is open",
                self.timeout
            );
        }
    }

    fn apply(&mut self, op: &Op) {
        let now = self.runtime.now();
        match *op {
            Op::Head => {
                self.in_flight.push(self.activity.head_received());
                self.waiting_since = None;
                self.changed = true;
            }
            Op::End(i) => {
                if !self.in_flight.is_empty() {
                    drop(self.in_flight.remove(usize::from(i) % self.in_flight.len()));
                    if self.in_flight.is_empty() {
                        self.waiting_since = Some(now);
                    }
                    self.changed = true;
                }
            }
            Op::Quick => {
                drop(self.activity.head_received());
                if self.in_flight.is_empty() {
                    self.waiting_since = Some(now);
                }
                self.changed = true;
            }
            Op::Advance(ms) => self.advance_to(now + Duration::from_millis(u64::from(ms))),
            Op::AdvanceSecs(s) => self.advance_to(now + Duration::from_secs(u64::from(s))),
            Op::NextTimer | Op::JustBeforeNextTimer => {
                if self.changed {
                    self.poll();
                }
                if let Some(at) = self.runtime.next_deadline() {
                    let early = matches!(op, Op::JustBeforeNextTimer);
                    let to = if early {
                        at - Duration::from_nanos(1)
                    } else {
                        at
                    };
                    self.advance_to(to.max(now));
                }
            }
            Op::Poll => self.poll(),
            Op::Http2 => {
                self.activity.set_http2();
                self.http2 = true;
            }
        }
    }
}

fn admission(runtime: &FakeRuntime) -> AdmissionLayer<FakeRuntime> {
    // One lifecycle for every run: the watch reads nothing of it.
    static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
    let shared =
        SHARED.get_or_init(|| Arc::clone(Lifecycle::new(Config::default()).prepare().shared()));
    let clock = StdClock::with_epoch(base());
    AdmissionLayer::new(Arc::clone(shared), runtime.clone(), clock)
}

fuzz_target!(|input: Input| {
    let timeout = match input.timeout {
        Timeout::HeaderRead => HEADER_READ_TIMEOUT,
        Timeout::Millis(ms) => 2 * TICK + Duration::from_millis(u64::from(ms % 120_000)),
    };
    let runtime = FakeRuntime::default();
    let activity = ConnActivity::new(admission(&runtime));
    let watch = HeadWatch::new(&activity, runtime.clone(), timeout);
    let task = Arc::new(Task::default());
    let mut h = Harness {
        waker: Waker::from(Arc::clone(&task)),
        task,
        runtime,
        activity,
        watch,
        timeout,
        in_flight: Vec::new(),
        waiting_since: Some(Duration::ZERO),
        // The connection's task polls it as soon as it opens.
        changed: true,
        http2: false,
        closed: false,
    };
    for op in input.ops.iter().take(MAX_OPS) {
        h.apply(op);
        if h.closed {
            return;
        }
    }
    // Then the clock runs on: an idle HTTP/1 connection is closed by the timeout.
    let end = h.runtime.now() + h.timeout + TICK;
    h.advance_to(end);
    if h.waiting_since.is_some() && !h.http2 {
        assert!(h.closed, "an idle connection still open a timeout later");
    }
});
