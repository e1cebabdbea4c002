//! The DAG is written twice, on purpose: as the conditions under which the machine's
//! `advance` fires each signal, and as the reference model's `trace::predecessors`, which
//! `check_trace` applies to any observed trace (other implementations' logs included). Were
//! one derived from the other, the oracle would agree with the machine by construction and a
//! wrong edge would pass every test. So this file checks the two forms against each other,
//! in both modes:
//!
//! 1. every signal the machine fires, in many random runs, follows every predecessor that
//!    `predecessors()` lists (the machine has every listed edge);
//! 2. each listed predecessor is required: in a run where it is withheld (no stop, a shutdown
//!    delay that never passes, a pre-shutdown hook that never returns, a request that never
//!    ends) and everything else is delivered, the signal never fires, while in the same run
//!    without the withholding it does (no listed edge is one the machine lacks);
//! 3. no other edge: for every signal and every signal that is not among its ancestors in
//!    `predecessors()`, some random run fires the first while the second has not fired (the
//!    machine adds no edge of its own).

use std::collections::BTreeSet;
use std::time::Duration;

use lameduck::machine::{HookKind, HookOutcome};
use lameduck::sim::{Op, Setup, Simulator};
use lameduck::trace::predecessors;
use lameduck::{Config, Event, LifecycleSignal, RequestClass, ShutdownMode};

const MODES: [ShutdownMode; 2] = [ShutdownMode::CloseListener, ShutdownMode::SendRetryAfter];

/// Runs per mode for the random checks.
const RUNS: usize = 600;

/// A small deterministic generator (xorshift64), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

fn random_op(rng: &mut Rng) -> Op {
    let b = rng.next().to_le_bytes();
    match b[0] % 16 {
        0..=2 => Op::Advance {
            millis: u16::from_le_bytes([b[1], b[2]]) % 2500,
        },
        3 => Op::Stop {
            os_signal: b[1] % 8 == 0,
        },
        4 | 5 => Op::FinishHook {
            index: b[1] % 12,
            outcome: b[2],
        },
        6 => Op::ListenerServing { index: b[1] % 3 },
        7 => Op::RoutesReady { index: b[1] % 3 },
        8 | 9 => Op::OpenRequest {
            long_running: b[1] % 2 == 0,
        },
        10 => Op::EndRequest { index: b[1] },
        11 => Op::Health { endpoint: b[1] },
        12 => Op::DrainProgress,
        13 => Op::ListenerStopped { index: b[1] % 3 },
        14 => Op::ServerStopped { index: b[1] % 3 },
        _ if b[1] % 4 == 0 => Op::ConnectionsCut { index: b[1] % 3 },
        _ => Op::OpenExempt,
    }
}

/// The signals a simulator's run has fired, in order: those the machine emitted, and
/// `HasBeenReady` (fired by a health answer, not emitted) where the op that fired it ran.
struct Sequence {
    signals: Vec<LifecycleSignal>,
    logged: usize,
}

impl Sequence {
    fn new() -> Self {
        Sequence {
            signals: Vec::new(),
            logged: 0,
        }
    }

    fn catch_up(&mut self, sim: &Simulator) {
        for (_, e) in &sim.log[self.logged..] {
            if let Event::Signal { signal, .. } = e {
                self.signals.push(*signal);
            }
        }
        self.logged = sim.log.len();
        let ready = sim
            .shared()
            .is_some_and(|s| s.has_fired(LifecycleSignal::HasBeenReady));
        if ready && !self.signals.contains(&LifecycleSignal::HasBeenReady) {
            self.signals.push(LifecycleSignal::HasBeenReady);
        }
    }
}

/// One random run in `mode`, to its end: the signals in the order they fired.
fn random_run(rng: &mut Rng, mode: ShutdownMode) -> Vec<LifecycleSignal> {
    let setup = Setup {
        delay_tenths: rng.byte() % 30,
        grace_tenths: rng.byte() % 30,
        request_timeout_tenths: rng.byte() % 100,
        send_retry_after: mode == ShutdownMode::SendRetryAfter,
        hooks: [rng.byte(), rng.byte(), rng.byte(), rng.byte()],
        extra_listeners: rng.byte() % 3,
        routes_ready: rng.byte() % 3,
    };
    let mut sim = setup.simulator().expect("a serving simulator");
    assert_eq!(sim.machine.config().mode(), mode);
    let mut seq = Sequence::new();
    seq.catch_up(&sim);
    let ops = 10 + usize::from(rng.byte() % 60);
    for _ in 0..ops {
        let _ = sim.apply(random_op(rng));
        seq.catch_up(&sim);
    }
    sim.finish(10_000);
    seq.catch_up(&sim);
    seq.signals
}

/// Every signal that must fire before `signal` in `mode`: its predecessors, theirs, ...
fn ancestors(signal: LifecycleSignal, mode: ShutdownMode) -> BTreeSet<LifecycleSignal> {
    let mut out = BTreeSet::new();
    let mut todo = vec![signal];
    while let Some(s) = todo.pop() {
        for &p in predecessors(s, mode) {
            if out.insert(p) {
                todo.push(p);
            }
        }
    }
    out
}

#[test]
fn every_fired_signal_follows_its_listed_predecessors_and_nothing_else_is_required() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for mode in MODES {
        // (signal, other): `signal` fired while `other` had not.
        let mut seen_without = BTreeSet::new();
        for run in 0..RUNS {
            let signals = random_run(&mut rng, mode);
            for (i, &s) in signals.iter().enumerate() {
                let before = &signals[..i];
                for p in predecessors(s, mode) {
                    assert!(
                        before.contains(p),
                        "{mode:?} run {run}: {s} fired before its predecessor {p}: {signals:?}"
                    );
                }
                for q in LifecycleSignal::ALL {
                    if q != s && !before.contains(&q) {
                        seen_without.insert((s, q));
                    }
                }
            }
        }
        for s in LifecycleSignal::ALL {
            let required = ancestors(s, mode);
            for q in LifecycleSignal::ALL {
                if q == s || required.contains(&q) {
                    continue;
                }
                assert!(
                    seen_without.contains(&(s, q)),
                    "{mode:?}: in {RUNS} runs {s} never fired before {q}, which \
                     predecessors() does not require: does the machine add an edge?"
                );
            }
        }
    }
}

/// How a scenario keeps one predecessor from firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Withhold {
    Nothing,
    /// No stop is requested: `ShutdownInitiated` never fires.
    Stop,
    /// A shutdown delay of an hour, in a run of ten minutes: `AfterShutdownDelayDuration`
    /// never fires.
    ShutdownDelay,
    /// The pre-shutdown hook never returns: neither `PreShutdownHooksStopped` nor (so)
    /// `NotAcceptingNewRequest` fires.
    PreShutdownHook,
    /// A normal request never ends, with no request timeout: `InFlightRequestsDrained` never
    /// fires.
    Drain,
}

fn withholding(predecessor: LifecycleSignal) -> Withhold {
    match predecessor {
        LifecycleSignal::ShutdownInitiated => Withhold::Stop,
        LifecycleSignal::AfterShutdownDelayDuration => Withhold::ShutdownDelay,
        LifecycleSignal::PreShutdownHooksStopped | LifecycleSignal::NotAcceptingNewRequest => {
            Withhold::PreShutdownHook
        }
        LifecycleSignal::InFlightRequestsDrained => Withhold::Drain,
        other => panic!("no scenario withholds {other}: add one for the new edge"),
    }
}

/// A serving lifecycle with one pre-shutdown hook and one request in flight, given ten
/// simulated minutes in which everything not withheld is delivered.
fn scenario(mode: ShutdownMode, withhold: Withhold) -> Simulator {
    let config = Config::builder()
        .shutdown_send_retry_after(mode == ShutdownMode::SendRetryAfter)
        .shutdown_delay(if withhold == Withhold::ShutdownDelay {
            Duration::from_secs(3600)
        } else {
            Duration::from_secs(1)
        })
        .request_timeout(if withhold == Withhold::Drain {
            Duration::ZERO
        } else {
            Duration::from_secs(10)
        })
        .shutdown_watch_termination_grace_period(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut sim = Simulator::serving(config, |m| {
        m.add_hook(HookKind::PreShutdown, "hook").unwrap();
    })
    .unwrap();
    let hook = sim.machine.hooks(HookKind::PreShutdown).next().unwrap().0;
    assert!(sim.open_request(RequestClass::Normal));
    if withhold != Withhold::Stop {
        sim.stop().unwrap();
    }
    for _ in 0..600 {
        if withhold != Withhold::PreShutdownHook {
            // An error until the hook runs, and once it has reported.
            let _ = sim.finish_hook(hook, HookOutcome::Succeeded);
        }
        if withhold != Withhold::Drain && sim.open_requests() > 0 {
            sim.end_request(0);
        }
        sim.advance(Duration::from_secs(1));
    }
    sim
}

#[test]
fn each_listed_predecessor_is_required() {
    let mut edges = 0;
    for mode in MODES {
        for s in LifecycleSignal::ALL {
            for &p in predecessors(s, mode) {
                edges += 1;
                let withhold = withholding(p);
                let granted = scenario(mode, Withhold::Nothing);
                assert!(
                    granted.machine.has_fired(s),
                    "{mode:?}: {s} does not fire even with nothing withheld: {:?}",
                    granted.signals()
                );
                let withheld = scenario(mode, withhold);
                assert!(
                    !withheld.machine.has_fired(p),
                    "{mode:?}: {withhold:?} does not withhold {p}"
                );
                assert!(
                    !withheld.machine.has_fired(s),
                    "{mode:?}: {s} fired although its predecessor {p} was withheld \
                     ({withhold:?}): {:?}",
                    withheld.signals()
                );
                // The edge is what stops it: its other predecessors that the withholding
                // does not also hold back did fire.
                for &other in predecessors(s, mode) {
                    if other != p
                        && !ancestors(other, mode).contains(&p)
                        && withholding(other) != withhold
                    {
                        assert!(
                            withheld.machine.has_fired(other),
                            "{mode:?}: withholding {p} ({withhold:?}) also withheld {other}"
                        );
                    }
                }
            }
        }
    }
    // Close-listener mode has 6 edges, retry-after mode 6: a test that checks none would pass
    // silently.
    assert_eq!(edges, 12);
}
