//! Exhaustive exploration of the machine for bounded configurations.
//!
//! For every configuration of a small product (mode, listeners, hooks of each kind, shutdown
//! delay and grace period zero or not, request timeout non-zero), a depth-first search runs
//! every order of the inputs the environment may deliver: stops (by signal or from code, a
//! second one included), listener reports, connection cuts, hook ends with each outcome,
//! requests of each class opened and ended at any point, and time jumping to the next
//! deadline. The machine shares its `Arc<Shared>` when cloned, so a state is reached again
//! by *replay*: the path of choices is re-run from a fresh simulator. A visited set keyed by
//! a fingerprint of everything observable (see [`fingerprint`]) makes the search finite.
//!
//! On every transition: the simulator's invariants hold, `check_trace` accepts the trace,
//! and the event log obeys the rules of [`check_log`]. Every input the machine rejects must
//! leave the fingerprint unchanged. From every state reached, the well-behaved environment
//! ([`Simulator::finish`]) must reach an exit.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use lameduck::machine::{HookId, HookKind, HookOutcome, ListenerId, StopSource};
use lameduck::sim::Simulator;
use lameduck::trace::{check_trace, TracedEvent};
use lameduck::{Config, Event, Input, Instant, LifecycleSignal, RequestClass};

const KINDS: [HookKind; 4] = [
    HookKind::PreShutdown,
    HookKind::PostStart,
    HookKind::AfterDrain,
    HookKind::Destroy,
];
const CLASSES: [RequestClass; 3] = [
    RequestClass::Normal,
    RequestClass::LongRunning,
    RequestClass::Exempt,
];
const OUTCOMES: [HookOutcome; 3] = [
    HookOutcome::Succeeded,
    HookOutcome::Failed,
    HookOutcome::Panicked,
];

/// One bounded configuration.
#[derive(Clone, Copy, Debug)]
struct Cfg {
    send_retry_after: bool,
    listeners: u16,
    /// Whether a hook of each kind of [`KINDS`] is registered.
    hooks: [bool; 4],
    delay: bool,
    grace: bool,
    /// How many requests of each class of [`CLASSES`] the environment may open.
    requests: [u8; 3],
    /// How many stop requests (the second one forces the exit when it is a signal).
    stops: u8,
    /// How many `ConnectionsCut` reports (each is legal any number of times while running,
    /// and emits an event each time, so it needs a budget for the search to end).
    cuts: u8,
}

impl Cfg {
    fn config(&self) -> Config {
        Config::builder()
            .shutdown_send_retry_after(self.send_retry_after)
            .shutdown_delay(Duration::from_secs(u64::from(self.delay)))
            .shutdown_watch_termination_grace_period(Duration::from_secs(2 * u64::from(self.grace)))
            .request_timeout(Duration::from_secs(1))
            .build()
            .unwrap()
    }

    fn hook_count(&self) -> u16 {
        self.hooks.iter().filter(|h| **h).count() as u16
    }
}

/// One thing the environment can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Stop(StopSource),
    Serving(u16),
    Stopped(u16),
    ServerStopped(u16),
    Cut(u16),
    Hook(u16, HookOutcome),
    Open(usize),
    End(usize),
    /// Time jumps to `poll_timeout()`.
    Advance,
}

/// A simulator and the environment's bookkeeping.
struct Run {
    sim: Simulator,
    /// The class index of each request the simulator holds, in the simulator's order.
    held: Vec<usize>,
    opened: [u8; 3],
    stops: u8,
    cuts: u8,
}

fn fresh(cfg: &Cfg) -> Run {
    let mut sim = Simulator::serving(cfg.config(), |m| {
        for (kind, on) in KINDS.iter().zip(cfg.hooks) {
            if on {
                m.add_hook(*kind, kind.name()).unwrap();
            }
        }
        for i in 1..cfg.listeners {
            m.add_listener(["second", "third"][usize::from(i - 1)])
                .unwrap();
        }
    })
    .unwrap();
    // Listener reports are choices of the search, not automatic.
    sim.auto_stop_listeners = false;
    Run {
        sim,
        held: Vec::new(),
        opened: [0; 3],
        stops: 0,
        cuts: 0,
    }
}

fn candidates(cfg: &Cfg) -> Vec<Choice> {
    let mut c = vec![
        Choice::Advance,
        Choice::Stop(StopSource::OsSignal),
        Choice::Stop(StopSource::Api),
    ];
    for l in 0..cfg.listeners {
        c.extend([
            Choice::Serving(l),
            Choice::Stopped(l),
            Choice::ServerStopped(l),
            Choice::Cut(l),
        ]);
    }
    for h in 0..cfg.hook_count() {
        c.extend(OUTCOMES.map(|o| Choice::Hook(h, o)));
    }
    for k in 0..CLASSES.len() {
        c.extend([Choice::Open(k), Choice::End(k)]);
    }
    c
}

/// Applies `choice`: `None` when the environment's budget does not allow it, otherwise the
/// machine's answer.
fn apply(
    cfg: &Cfg,
    run: &mut Run,
    choice: Choice,
) -> Option<Result<(), lameduck::machine::InputError>> {
    let sim = &mut run.sim;
    let l = ListenerId::from_raw;
    Some(match choice {
        Choice::Stop(source) => {
            if run.stops >= cfg.stops {
                return None;
            }
            let r = sim.input(Input::StopRequested(source));
            run.stops += u8::from(r.is_ok());
            r
        }
        Choice::Serving(i) => sim.input(Input::ListenerServing(l(i))),
        Choice::Stopped(i) => sim.input(Input::ListenerStopped(l(i))),
        Choice::ServerStopped(i) => sim.input(Input::ServerStopped(l(i))),
        Choice::Cut(i) => {
            if run.cuts >= cfg.cuts {
                return None;
            }
            let r = sim.input(Input::ConnectionsCut(l(i)));
            run.cuts += u8::from(r.is_ok());
            r
        }
        Choice::Hook(h, outcome) => sim.finish_hook(HookId::from_raw(h), outcome),
        Choice::Open(k) => {
            if run.opened[k] >= cfg.requests[k] || sim.exit.is_some() {
                return None;
            }
            run.opened[k] += 1;
            if sim.open_request(CLASSES[k]) {
                run.held.push(k);
            }
            Ok(())
        }
        Choice::End(k) => {
            let i = run.held.iter().position(|c| *c == k)?;
            sim.end_request(i);
            run.held.swap_remove(i);
            Ok(())
        }
        Choice::Advance => {
            let t = sim.machine.poll_timeout()?;
            sim.advance_to(t);
            Ok(())
        }
    })
}

/// Everything observable, in a canonical form: the phase, the signals and when they fired,
/// the clock and the timer table (absolute instants: every instant reachable is a sum of a
/// few configured durations, so there are finitely many), the gate's counts, the
/// environment's bookkeeping (the classes of the requests held, as a multiset) and the
/// events emitted so far as a multiset. The machine's private facts (the stop request, the
/// failure flag, the drains' and servers' states, the exit decided) all show in the events
/// emitted and the inputs given.
fn fingerprint(run: &Run) -> String {
    let sim = &run.sim;
    let mut s = String::new();
    let m = &sim.machine;
    // The machine's `Debug` shows the phase and the whole timer table.
    write!(s, "{m:?}|now={:?}|next={:?}|", sim.now, m.poll_timeout()).unwrap();
    if let Some(shared) = m.shared() {
        for sig in LifecycleSignal::ALL {
            write!(s, "{:?},", shared.fired_at(sig)).unwrap();
        }
        let g = shared.gate();
        write!(
            s,
            "|gate={},{},{}|open={}|",
            g.is_closed(),
            g.normal_in_flight(),
            g.long_running_in_flight(),
            sim.open_requests()
        )
        .unwrap();
    }
    let mut held = run.held.clone();
    held.sort_unstable();
    write!(
        s,
        "held={held:?}|opened={:?}|stops={}|cuts={}|exit={:?}|",
        run.opened, run.stops, run.cuts, sim.exit
    )
    .unwrap();
    s.push_str(&canonical_events(&sim.log).join(";"));
    s
}

/// The events emitted so far as a set, without their times (the signals' times are in the
/// fingerprint already) or progress counts: what the checks of later transitions depend on.
/// A repeated one-off event is caught by [`check_log`] when it happens.
fn canonical_events(log: &[(Instant, Event)]) -> Vec<String> {
    let mut events: Vec<String> = log
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Signal { signal, .. } => Some(format!("{signal:?}")),
            Event::DrainProgress { .. } => None,
            Event::NormalDrainFinished { timed_out, .. } => Some(format!("normal:{timed_out}")),
            Event::LongRunningDrainFinished { timed_out, .. } => Some(format!("long:{timed_out}")),
            Event::DrainStarted(_) => Some("DrainStarted".into()),
            Event::StopListening { .. } => Some("StopListening".into()),
            other => Some(format!("{other:?}")),
        })
        .collect();
    events.sort_unstable();
    events.dedup();
    events
}

fn hash(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Rules over the whole event log that the trace (signals, `StopListening`, exit) does not
/// show: `InFlightRequestsDrained` follows the end of both drains, and every one-off event
/// happens at most once.
fn check_log(log: &[(Instant, Event)]) -> Result<(), String> {
    let pos = |f: &dyn Fn(&Event) -> bool| log.iter().position(|(_, e)| f(e));
    let drained = pos(&|e| {
        matches!(
            e,
            Event::Signal {
                signal: LifecycleSignal::InFlightRequestsDrained,
                ..
            }
        )
    });
    if let Some(d) = drained {
        let normal = pos(&|e| matches!(e, Event::NormalDrainFinished { .. }));
        let long = pos(&|e| matches!(e, Event::LongRunningDrainFinished { .. }));
        if !normal.is_some_and(|n| n < d) {
            return Err("InFlightRequestsDrained before NormalDrainFinished".into());
        }
        if !long.is_some_and(|n| n < d) {
            return Err("InFlightRequestsDrained before LongRunningDrainFinished".into());
        }
    }
    for (name, once) in [
        (
            "NotifyReady",
            &(|e: &Event| matches!(e, Event::NotifyReady)) as &dyn Fn(&Event) -> bool,
        ),
        ("DrainStarted", &|e| matches!(e, Event::DrainStarted(_))),
        ("StopListening", &|e| {
            matches!(e, Event::StopListening { .. })
        }),
        ("RunDestroyHooks", &|e| matches!(e, Event::RunDestroyHooks)),
        ("Exit", &|e| matches!(e, Event::Exit { .. })),
    ] {
        if log.iter().filter(|(_, e)| once(e)).count() > 1 {
            return Err(format!("{name} emitted twice"));
        }
    }
    Ok(())
}

/// What the search checks the recorded log with; a test injects a bug through it.
type LogView = fn(&[(Instant, Event)]) -> Vec<(Instant, Event)>;

#[derive(Default, Debug)]
struct Stats {
    configs: usize,
    states: usize,
    transitions: usize,
    paths: usize,
    illegal: usize,
    exits: usize,
    max_depth: usize,
}

struct Explorer {
    cfg: Cfg,
    view: LogView,
    visited: HashSet<u64>,
    stats: Stats,
    checked_after_exit: bool,
}

impl Explorer {
    fn replay(&self, path: &[Choice]) -> Run {
        let mut run = fresh(&self.cfg);
        for c in path {
            match apply(&self.cfg, &mut run, *c) {
                Some(Ok(())) => {}
                other => panic!("replay of {path:?} diverged at {c:?}: {other:?}"),
            }
        }
        run
    }

    /// The checks after every transition.
    fn check(&self, run: &mut Run, path: &[Choice]) -> Result<(), String> {
        let fail = |what: String| {
            Err(format!(
                "{what}\n  config: {:?}\n  path: {path:?}",
                self.cfg
            ))
        };
        if let Err(e) = run.sim.check_invariants() {
            return fail(format!("invariant: {e}"));
        }
        let log = (self.view)(&run.sim.log);
        let trace: Vec<TracedEvent> = log
            .iter()
            .filter_map(|(now, e)| TracedEvent::from_event(e, *now))
            .collect();
        if let Err(v) = check_trace(run.sim.machine.config(), &trace) {
            return fail(format!("check_trace: {v}"));
        }
        if let Err(e) = check_log(&log) {
            return fail(format!("log: {e}"));
        }
        Ok(())
    }

    /// Explores from the state `run` reached by `path` (already checked and recorded).
    fn explore(&mut self, path: &mut Vec<Choice>, run: Run) -> Result<(), String> {
        self.stats.states += 1;
        self.stats.max_depth = self.stats.max_depth.max(path.len());
        if run.sim.exit.is_some() {
            self.stats.exits += 1;
        } else {
            // An exit is reachable: the well-behaved environment gets there. No exception:
            // every wait of the machine is bounded by a timer once the environment has
            // ended every hook and request and the listeners have reported.
            let mut done = self.replay(path);
            if done.sim.finish(100).is_none() {
                return Err(format!(
                    "no exit from this state\n  config: {:?}\n  path: {path:?}",
                    self.cfg
                ));
            }
            self.check(&mut done, path)
                .map_err(|e| format!("{e}\n  (during the completion)"))?;
        }
        let exited = run.sim.exit.is_some();
        if exited && self.checked_after_exit {
            // Every input after the exit was checked to be rejected once per configuration.
            self.stats.paths += 1;
            return Ok(());
        }
        self.checked_after_exit |= exited;
        let mut cur = Some(run);
        let mut children = 0;
        for choice in candidates(&self.cfg) {
            let mut r = cur.take().unwrap_or_else(|| self.replay(path));
            let before = fingerprint(&r);
            match apply(&self.cfg, &mut r, choice) {
                None => cur = Some(r),
                Some(Err(e)) => {
                    self.stats.illegal += 1;
                    let after = fingerprint(&r);
                    if after != before {
                        return Err(format!(
                            "illegal {choice:?} ({e}) changed the state\n  before: {before}\n  \
                             after: {after}\n  path: {path:?}"
                        ));
                    }
                    cur = Some(r);
                }
                Some(Ok(())) => {
                    self.stats.transitions += 1;
                    path.push(choice);
                    self.check(&mut r, path)?;
                    let after = fingerprint(&r);
                    if after == before {
                        // A no-op (a request opened and rejected changes the bookkeeping,
                        // so this is rare): stay on this instance.
                        path.pop();
                        cur = Some(r);
                        continue;
                    }
                    if self.visited.insert(hash(&after)) {
                        children += 1;
                        self.explore(path, r)?;
                    }
                    path.pop();
                }
            }
        }
        if children == 0 {
            self.stats.paths += 1;
        }
        Ok(())
    }
}

/// Explores every configuration of `cfgs`; returns the totals, or the first counterexample.
fn explore_all(cfgs: impl IntoIterator<Item = Cfg>, view: LogView) -> Result<Stats, String> {
    let mut total = Stats::default();
    for cfg in cfgs {
        let mut ex = Explorer {
            cfg,
            view,
            visited: HashSet::new(),
            stats: Stats::default(),
            checked_after_exit: false,
        };
        let mut run = fresh(&cfg);
        ex.check(&mut run, &[])?;
        ex.visited.insert(hash(&fingerprint(&run)));
        ex.explore(&mut Vec::new(), run)?;
        total.configs += 1;
        total.states += ex.stats.states;
        total.transitions += ex.stats.transitions;
        total.paths += ex.stats.paths;
        total.illegal += ex.stats.illegal;
        total.exits += ex.stats.exits;
        total.max_depth = total.max_depth.max(ex.stats.max_depth);
    }
    Ok(total)
}

fn same(log: &[(Instant, Event)]) -> Vec<(Instant, Event)> {
    log.to_vec()
}

/// Every configuration with `requests` and the hooks chosen by `hooks`.
fn configs(requests: [u8; 3], hooks: impl Fn([bool; 4]) -> bool) -> Vec<Cfg> {
    let mut v = Vec::new();
    for bits in 0u8..16 {
        let h = [0, 1, 2, 3].map(|i| bits & (1 << i) != 0);
        if !hooks(h) {
            continue;
        }
        for send_retry_after in [false, true] {
            for listeners in [1, 2] {
                for delay in [false, true] {
                    for grace in [false, true] {
                        v.push(Cfg {
                            send_retry_after,
                            listeners,
                            hooks: h,
                            delay,
                            grace,
                            requests,
                            stops: 2,
                            cuts: 1,
                        });
                    }
                }
            }
        }
    }
    v
}

fn run_and_report(name: &str, cfgs: Vec<Cfg>, min_states: usize) {
    let start = std::time::Instant::now();
    let stats = explore_all(cfgs, same).unwrap_or_else(|e| panic!("{e}"));
    println!("{name}: {stats:?} in {:?}", start.elapsed());
    assert!(stats.states >= min_states, "{stats:?}");
    assert!(
        stats.exits > 0 && stats.paths > 0 && stats.illegal > 0,
        "{stats:?}"
    );
}

/// No hooks, one normal and one long-running request (the exempt class is covered below):
/// every mode, listener count, delay and grace period.
#[test]
fn requests_without_hooks() {
    run_and_report("requests", configs([1, 1, 0], |h| h == [false; 4]), 50_000);
}

/// One hook of each kind alone, one normal request.
#[test]
fn each_hook_kind_alone() {
    run_and_report(
        "one hook",
        configs([1, 0, 0], |h| h.iter().filter(|x| **x).count() == 1),
        130_000,
    );
}

/// Two normal, two long-running and one exempt request, one listener, no hooks.
#[test]
fn more_requests() {
    let cfgs = configs([2, 2, 1], |h| h == [false; 4])
        .into_iter()
        .filter(|c| c.listeners == 1)
        .collect();
    run_and_report("more requests", cfgs, 90_000);
}

/// The injected bug: a machine that fires `InFlightRequestsDrained` before the long-running
/// drain finished, made by moving the signal before `LongRunningDrainFinished` in the
/// recorded log the checks see.
fn drained_too_early(log: &[(Instant, Event)]) -> Vec<(Instant, Event)> {
    let mut log = log.to_vec();
    let drained = log.iter().position(|(_, e)| {
        matches!(
            e,
            Event::Signal {
                signal: LifecycleSignal::InFlightRequestsDrained,
                ..
            }
        )
    });
    let long = log
        .iter()
        .position(|(_, e)| matches!(e, Event::LongRunningDrainFinished { .. }));
    let normal = log
        .iter()
        .position(|(_, e)| matches!(e, Event::NormalDrainFinished { .. }));
    // Only where the long-running drain ended last (with a grace period), so that this is
    // the one rule broken.
    if let (Some(d), Some(l), Some(n)) = (drained, long, normal) {
        if l < n {
            return log;
        }
        let e = log.remove(d);
        log.insert(l, e);
    }
    log
}

/// The same explorer rejects the buggy machine, with a counterexample path.
#[test]
fn an_injected_bug_is_reported_with_a_counterexample() {
    let cfgs = configs([0, 1, 0], |h| h == [false; 4]);
    let err = explore_all(cfgs, drained_too_early).expect_err("the bug is caught");
    println!("counterexample:\n{err}");
    assert!(
        err.contains("InFlightRequestsDrained before LongRunningDrainFinished"),
        "{err}"
    );
    assert!(err.contains("path: ["), "{err}");
}
