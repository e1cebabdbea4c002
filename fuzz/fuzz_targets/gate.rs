//! Interleaves admissions, releases, closing, pacing and paced-turn reservations on one
//! admission gate, single-threaded, against a simple model of it.
//!
//! After every op: the in-flight counts and the closed flag equal the model's, the drained
//! predicates are `closed && count == 0`, admissions succeed exactly while open and are
//! rejected with the mode's [`Rejection`] after, the last release out of a closed group (and
//! every close) wakes a listener, and `reserve_turn` hands out the burst-1 schedule:
//! `None` before pacing, then turn `max(now, next)`, `None` when that turn is at or past the
//! deadline (nothing reserved) or is `now` itself (may finish at once), with the next turn
//! `turn + interval` later. "now" only moves forward.
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use arbitrary::Arbitrary;
use lameduck::gate::testing;
use lameduck::gate::{Gate, LongRunningTicket, NormalTicket, Rejection};
use lameduck::{Instant, ShutdownMode};
use libfuzzer_sys::fuzz_target;

/// Ops past this many are ignored.
const MAX_OPS: usize = 512;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    AdmitNormal,
    AdmitLongRunning,
    /// Drop the `index`-th (modulo) normal ticket.
    ReleaseNormal {
        index: u8,
    },
    /// Drop the `index`-th (modulo) long-running ticket.
    ReleaseLongRunning {
        index: u8,
    },
    Close,
    StartPacing {
        interval: Span,
        /// The deadline, after now.
        deadline: Span,
    },
    /// Reserve a turn through the `index`-th (modulo) long-running ticket.
    Reserve {
        index: u8,
    },
    /// Reserve a turn, then drop the ticket as an adapter does when no wait is needed.
    ReserveAndRelease {
        index: u8,
    },
    Advance {
        by: Span,
    },
}

/// A duration, mostly small, sometimes huge (saturation).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Span {
    Nanos(u16),
    Millis(u16),
    Secs(u32),
    Raw(u64),
    Max,
}

impl Span {
    fn duration(self) -> Duration {
        match self {
            Span::Nanos(n) => Duration::from_nanos(u64::from(n)),
            Span::Millis(n) => Duration::from_millis(u64::from(n)),
            Span::Secs(n) => Duration::from_secs(u64::from(n)),
            Span::Raw(n) => Duration::from_nanos(n),
            Span::Max => Duration::MAX,
        }
    }

    fn nanos(self) -> u64 {
        u64::try_from(self.duration().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The pacer as documented: a burst-1 limiter kept as its next free turn.
#[derive(Debug, Clone, Copy)]
struct Pacer {
    interval: u64,
    next: u64,
    deadline: u64,
}

#[derive(Debug, Default)]
struct Model {
    closed: bool,
    normal: usize,
    long_running: usize,
    pacer: Option<Pacer>,
    now: u64,
    /// The last turn handed out, for the spacing check.
    last_turn: Option<u64>,
}

impl Model {
    /// What `reserve_turn` returns at `now`, updating the pacer.
    fn reserve(&mut self) -> Option<u64> {
        let p = self.pacer.as_mut()?;
        let turn = p.next.max(self.now);
        if turn >= p.deadline {
            return None;
        }
        p.next = turn.saturating_add(p.interval);
        (turn > self.now).then_some(turn)
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    send_retry_after: bool,
    ops: Vec<Op>,
}

/// Whether `listener` has been notified, without blocking.
fn notified(listener: &mut (impl Future<Output = ()> + Unpin), cx: &mut Context<'_>) -> bool {
    Pin::new(listener).poll(cx).is_ready()
}

fn check(gate: &Gate, model: &Model, op: &Op) {
    assert_eq!(gate.is_closed(), model.closed, "closed after {op:?}");
    assert_eq!(gate.normal_in_flight(), model.normal, "normal after {op:?}");
    assert_eq!(
        gate.long_running_in_flight(),
        model.long_running,
        "long-running after {op:?}"
    );
    assert_eq!(
        gate.normal_drained(),
        model.closed && model.normal == 0,
        "normal_drained after {op:?}"
    );
    assert_eq!(
        gate.long_running_drained(),
        model.closed && model.long_running == 0,
        "long_running_drained after {op:?}"
    );
}

fuzz_target!(|input: Input| {
    let mode = if input.send_retry_after {
        ShutdownMode::SendRetryAfter
    } else {
        ShutdownMode::CloseListener
    };
    let rejection = Rejection::for_mode(mode);
    let mut cx = Context::from_waker(Waker::noop());

    let gate = Gate::new(mode);
    assert_eq!(gate.mode(), mode);
    let mut model = Model::default();
    let mut normal: Vec<NormalTicket<'_>> = Vec::new();
    let mut long_running: Vec<LongRunningTicket<'_>> = Vec::new();

    for op in input.ops.into_iter().take(MAX_OPS) {
        match op {
            Op::AdmitNormal => match gate.admit_normal() {
                Ok(t) => {
                    assert!(!model.closed, "admitted a normal request after close");
                    normal.push(t);
                    model.normal += 1;
                }
                Err(r) => {
                    assert!(model.closed, "rejected a normal request while open");
                    assert_eq!(r, rejection);
                }
            },
            Op::AdmitLongRunning => match gate.admit_long_running() {
                Ok(t) => {
                    assert!(!model.closed, "admitted a long-running request after close");
                    long_running.push(t);
                    model.long_running += 1;
                }
                Err(r) => {
                    assert!(model.closed, "rejected a long-running request while open");
                    assert_eq!(r, rejection);
                }
            },
            Op::ReleaseNormal { index } => {
                if !normal.is_empty() {
                    let t = normal.swap_remove(usize::from(index) % normal.len());
                    model.normal -= 1;
                    let mut listener = gate.listen();
                    drop(t);
                    if model.closed && model.normal == 0 {
                        assert!(
                            notified(&mut listener, &mut cx),
                            "the last normal release did not notify"
                        );
                    }
                }
            }
            Op::ReleaseLongRunning { index } => {
                if !long_running.is_empty() {
                    let t = long_running.swap_remove(usize::from(index) % long_running.len());
                    model.long_running -= 1;
                    let mut listener = gate.listen();
                    drop(t);
                    if model.closed && model.long_running == 0 {
                        assert!(
                            notified(&mut listener, &mut cx),
                            "the last long-running release did not notify"
                        );
                    }
                }
            }
            Op::Close => {
                let mut listener = gate.listen();
                assert_eq!(testing::close(&gate), (model.normal, model.long_running));
                assert!(notified(&mut listener, &mut cx), "close did not notify");
                model.closed = true;
            }
            Op::StartPacing { interval, deadline } => {
                let interval_nanos = interval.nanos().max(1);
                let deadline = model.now.saturating_add(deadline.nanos());
                testing::start_pacing(
                    &gate,
                    Instant::from_nanos(model.now),
                    interval.duration(),
                    Instant::from_nanos(deadline),
                );
                model.pacer = Some(Pacer {
                    interval: interval_nanos,
                    next: model.now,
                    deadline,
                });
                model.last_turn = None;
            }
            Op::Reserve { index } | Op::ReserveAndRelease { index } => {
                if !long_running.is_empty() {
                    let i = usize::from(index) % long_running.len();
                    let now = Instant::from_nanos(model.now);
                    let got = long_running[i].reserve_turn(now).map(Instant::as_nanos);
                    let want = model.reserve();
                    assert_eq!(got, want, "reserve_turn at {now:?} ({model:?})");
                    if let Some(turn) = got {
                        let p = model.pacer.expect("a turn without pacing");
                        assert!(turn > model.now, "a turn not in the future");
                        assert!(turn < p.deadline, "a turn at or past the deadline");
                        if let Some(last) = model.last_turn {
                            assert!(
                                turn >= last.saturating_add(p.interval),
                                "turn {turn} closer than {} to {last}",
                                p.interval
                            );
                        }
                        model.last_turn = Some(turn);
                    }
                    if matches!(op, Op::ReserveAndRelease { .. }) {
                        drop(long_running.swap_remove(i));
                        model.long_running -= 1;
                    }
                }
            }
            Op::Advance { by } => {
                model.now = model.now.saturating_add(by.nanos());
            }
        }
        check(&gate, &model, &op);
    }

    // Close and release everything: both groups drain.
    testing::close(&gate);
    model.closed = true;
    drop(normal);
    drop(long_running);
    model.normal = 0;
    model.long_running = 0;
    check(&gate, &model, &Op::Close);
    assert_eq!(gate.admit_normal().err(), Some(rejection));
    assert_eq!(gate.admit_long_running().err(), Some(rejection));
    check(&gate, &model, &Op::AdmitNormal);
});
