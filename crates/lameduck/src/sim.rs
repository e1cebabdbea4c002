//! A deterministic driver for tests and fuzzers: the machine, a simulated clock that jumps
//! from deadline to deadline (quinn-proto's `Pair::step`, bounded), and an auto-pilot that
//! plays the adapter's part for listeners.
//!
//! Users drive their own scenarios with [`Simulator`]; property tests and the fuzz targets
//! drive it with random [`Op`]s and assert [`Simulator::check_invariants`] after each one.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::classify::RequestClass;
use crate::config::Config;
use crate::machine::{
    Event, HookId, HookKind, HookOutcome, Input, InputError, ListenerId, Machine, StopSource,
};
use crate::phase::Phase;
use crate::shared::{Admission, OwnedLongRunningTicket, OwnedNormalTicket, Shared};
use crate::signal::{LifecycleSignal, SignalSet};
use crate::time::Instant;
use crate::trace::{check_trace, TraceSummary, TracedEvent, Violation};

mod apply;

/// A request the simulator holds open.
enum Held {
    Normal(OwnedNormalTicket),
    LongRunning(OwnedLongRunningTicket),
}

/// A machine with a simulated clock and a log of everything it emitted.
pub struct Simulator {
    /// The machine under test.
    pub machine: Machine,
    /// The simulated time.
    pub now: Instant,
    /// Every event, with the time it was emitted.
    pub log: Vec<(Instant, Event)>,
    /// The registered listeners.
    pub listeners: Vec<ListenerId>,
    /// When set, listeners stop and their servers finish as soon as asked (idle servers).
    pub auto_stop_listeners: bool,
    /// The exit code, once the machine exited.
    pub exit: Option<u8>,
    held: Vec<Held>,
    /// Long-running requests whose end is held until their paced turn.
    paced: BTreeMap<Instant, Vec<OwnedLongRunningTicket>>,
    last_phase: Phase,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("machine", &self.machine)
            .field("now", &self.now)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

/// A broken invariant found by [`Simulator::check_invariants`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvariantError {
    /// The machine's trace breaks the reference model.
    #[error("the machine's own trace is illegal: {0}")]
    IllegalTrace(Violation),
    /// The signals in the shared state differ from those the machine emitted.
    #[error("shared signals {shared:?} differ from emitted signals {emitted:?}")]
    SignalsDiffer {
        /// In the shared state.
        shared: SignalSet,
        /// Emitted as events.
        emitted: SignalSet,
    },
    /// The gate is closed exactly when `NotAcceptingNewRequest` has fired.
    #[error("gate closed = {closed} but NotAcceptingNewRequest fired = {fired}")]
    GateOutOfStep {
        /// The gate's state.
        closed: bool,
        /// The signal's state.
        fired: bool,
    },
    /// Phases only move forward.
    #[error("phase went back from {from:?} to {to:?}")]
    PhaseWentBack {
        /// Before.
        from: Phase,
        /// After.
        to: Phase,
    },
    /// A deadline in the past was left armed after handling time.
    #[error("a timer at {0:?} is overdue")]
    OverdueTimer(Instant),
}

impl Simulator {
    /// A machine configured by `setup` (register hooks, checks, more listeners) with one
    /// listener named `api`, prepared, started and serving at [`Instant::ZERO`].
    pub fn serving(config: Config, setup: impl FnOnce(&mut Machine)) -> Result<Self, InputError> {
        let mut machine = Machine::new(config);
        let mut listeners = Vec::new();
        if let Ok(api) = machine.add_listener("api") {
            listeners.push(api);
        }
        setup(&mut machine);
        listeners = machine.listeners().map(|(id, _)| id).collect();
        let mut sim = Simulator {
            machine,
            now: Instant::ZERO,
            log: Vec::new(),
            listeners,
            auto_stop_listeners: true,
            exit: None,
            held: Vec::new(),
            paced: BTreeMap::new(),
            last_phase: Phase::Configuring,
        };
        sim.input(Input::Prepare)?;
        sim.input(Input::Start)?;
        if let Some(&api) = sim.listeners.first() {
            sim.input(Input::ListenerServing(api))?;
        }
        Ok(sim)
    }

    /// The shared state.
    #[must_use]
    pub fn shared(&self) -> Option<Arc<Shared>> {
        self.machine.shared().cloned()
    }

    /// Feeds an input at the current time and drains the events.
    pub fn input(&mut self, input: Input) -> Result<(), InputError> {
        let r = self.machine.handle_input(input, self.now);
        self.drain();
        r
    }

    /// Requests termination as an OS signal would.
    pub fn stop(&mut self) -> Result<(), InputError> {
        self.input(Input::StopRequested(StopSource::OsSignal))
    }

    /// Reports a hook's end.
    pub fn finish_hook(&mut self, hook: HookId, outcome: HookOutcome) -> Result<(), InputError> {
        self.input(Input::HookFinished { hook, outcome })
    }

    /// Drains events into the log, playing the adapter's part for listeners when
    /// [`Simulator::auto_stop_listeners`] is set.
    pub fn drain(&mut self) {
        while let Some(e) = self.machine.poll_event() {
            self.log.push((self.now, e));
            match e {
                Event::StopListening { .. } if self.auto_stop_listeners => {
                    for l in self.listeners.clone() {
                        // Already-stopped listeners answer with an error; that is fine here.
                        let _ = self
                            .machine
                            .handle_input(Input::ListenerStopped(l), self.now);
                        let _ = self.machine.handle_input(Input::ServerStopped(l), self.now);
                    }
                }
                Event::Exit { code, .. } => self.exit = Some(code),
                _ => {}
            }
        }
    }

    /// Moves the clock to `t`, firing timers and paced releases on the way, in order.
    pub fn advance_to(&mut self, t: Instant) {
        loop {
            let next_timer = self.machine.poll_timeout();
            let next_paced = self.paced.keys().next().copied();
            let next = match (next_timer, next_paced) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(x) => x,
                    None => break,
                },
            };
            if next > t {
                break;
            }
            self.now = self.now.max(next);
            self.release_paced();
            self.machine.handle_timeout(self.now);
            self.drain();
        }
        self.now = self.now.max(t);
        self.release_paced();
        self.machine.handle_timeout(self.now);
        self.drain();
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&mut self, d: Duration) {
        self.advance_to(self.now + d);
    }

    fn release_paced(&mut self) {
        let mut released = false;
        while let Some(entry) = self.paced.first_entry() {
            if *entry.key() > self.now {
                break;
            }
            drop(entry.remove());
            released = true;
        }
        if released {
            let _ = self.machine.handle_input(Input::DrainProgress, self.now);
            self.drain();
        }
    }

    /// Jumps from deadline to deadline until the machine exits or has nothing scheduled, at
    /// most `max_steps` times. Returns the exit code, if it exited.
    pub fn run_to_exit(&mut self, max_steps: usize) -> Option<u8> {
        for _ in 0..max_steps {
            if self.exit.is_some() {
                break;
            }
            let _ = self.machine.handle_input(Input::DrainProgress, self.now);
            self.drain();
            let next = match (
                self.machine.poll_timeout(),
                self.paced.keys().next().copied(),
            ) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(x) => x,
                    None => break,
                },
            };
            self.advance_to(next);
        }
        self.exit
    }

    /// Opens a request of `class` held by the simulator; returns whether it was admitted.
    pub fn open_request(&mut self, class: RequestClass) -> bool {
        let Some(shared) = self.shared() else {
            return false;
        };
        match shared.admit(class) {
            Admission::Normal(t) | Admission::Exempt(Some(t)) => self.held.push(Held::Normal(t)),
            Admission::LongRunning(t) => self.held.push(Held::LongRunning(t)),
            Admission::Exempt(None) | Admission::Rejected(_) | Admission::Late(_) => return false,
        }
        true
    }

    /// Ends the `index`-th held request (modulo the number held) as an adapter would: a
    /// long-running one is held until its paced turn.
    pub fn end_request(&mut self, index: usize) {
        if self.held.is_empty() {
            return;
        }
        let held = self.held.swap_remove(index % self.held.len());
        match held {
            Held::Normal(t) => drop(t),
            Held::LongRunning(t) => match t.reserve_turn(self.now) {
                Some(at) => self.paced.entry(at).or_default().push(t),
                None => drop(t),
            },
        }
        let _ = self.machine.handle_input(Input::DrainProgress, self.now);
        self.drain();
    }

    /// Requests held open.
    #[must_use]
    pub fn open_requests(&self) -> usize {
        self.held.len() + self.paced.values().map(Vec::len).sum::<usize>()
    }

    /// Delivers everything a well-behaved environment eventually delivers: a stop request,
    /// every running hook's end, every request's end, every listener's reports. Then runs to
    /// exit within `max_steps`. Returns the exit code.
    pub fn finish(&mut self, max_steps: usize) -> Option<u8> {
        let _ = self.input(Input::StopRequested(StopSource::Api));
        for _ in 0..max_steps {
            if self.exit.is_some() {
                break;
            }
            for kind in [
                HookKind::PreShutdown,
                HookKind::PostStart,
                HookKind::AfterDrain,
                HookKind::Destroy,
            ] {
                let hooks: Vec<HookId> = self.machine.hooks(kind).map(|(id, _)| id).collect();
                for h in hooks {
                    let _ = self.finish_hook(h, HookOutcome::Succeeded);
                }
            }
            while !self.held.is_empty() {
                self.end_request(0);
            }
            for l in self.listeners.clone() {
                let _ = self.input(Input::ListenerServing(l));
                if self
                    .machine
                    .has_fired(LifecycleSignal::NotAcceptingNewRequest)
                {
                    let _ = self.input(Input::ListenerStopped(l));
                    let _ = self.input(Input::ServerStopped(l));
                }
            }
            self.run_to_exit(max_steps);
        }
        self.exit
    }

    /// The signals in the order they fired.
    #[must_use]
    pub fn signals(&self) -> Vec<LifecycleSignal> {
        self.log
            .iter()
            .filter_map(|(_, e)| match e {
                Event::Signal { signal, .. } => Some(*signal),
                _ => None,
            })
            .collect()
    }

    /// The trace of the run so far.
    #[must_use]
    pub fn trace(&self) -> Vec<TracedEvent> {
        self.log
            .iter()
            .filter_map(|(now, e)| TracedEvent::from_event(e, *now))
            .collect()
    }

    /// Checks the run so far against the reference model.
    pub fn check_trace(&self) -> Result<TraceSummary, Violation> {
        check_trace(self.machine.config(), &self.trace())
    }

    /// How many logged events match `pred`.
    #[must_use]
    pub fn count(&self, pred: impl Fn(&Event) -> bool) -> usize {
        self.log.iter().filter(|(_, e)| pred(e)).count()
    }

    /// Checks every invariant that must hold between any two inputs.
    pub fn check_invariants(&mut self) -> Result<(), InvariantError> {
        let summary = self.check_trace().map_err(InvariantError::IllegalTrace)?;
        let phase = self.machine.phase();
        if phase < self.last_phase {
            return Err(InvariantError::PhaseWentBack {
                from: self.last_phase,
                to: phase,
            });
        }
        self.last_phase = phase;
        if let Some(shared) = self.machine.shared() {
            // HasBeenReady is fired by health requests, not emitted by the machine.
            let mut fired = shared.fired();
            let mut emitted = summary.signals;
            for s in [&mut fired, &mut emitted] {
                *s = SignalSet::from_bits(s.bits() & !LifecycleSignal::HasBeenReady.bit());
            }
            if fired != emitted && phase != Phase::Exited {
                return Err(InvariantError::SignalsDiffer {
                    shared: fired,
                    emitted,
                });
            }
            let closed = shared.gate().is_closed();
            let n = shared.has_fired(LifecycleSignal::NotAcceptingNewRequest);
            if closed != n {
                return Err(InvariantError::GateOutOfStep { closed, fired: n });
            }
        }
        if let Some(t) = self.machine.poll_timeout() {
            if t < self.now {
                return Err(InvariantError::OverdueTimer(t));
            }
        }
        Ok(())
    }
}

/// One random step for property tests and fuzzers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Op {
    /// Let time pass.
    Advance {
        /// How long.
        millis: u16,
    },
    /// Request termination.
    Stop {
        /// As an OS signal (a second one forces exit) or from code.
        os_signal: bool,
    },
    /// Report a hook's end (indexes past the registered hooks make unknown ids).
    FinishHook {
        /// Which.
        index: u8,
        /// 0: failed, 1: panicked, otherwise succeeded.
        outcome: u8,
    },
    /// Report a listener serving.
    ListenerServing {
        /// Which.
        index: u8,
    },
    /// Report a listener stopped.
    ListenerStopped {
        /// Which.
        index: u8,
    },
    /// Report a server stopped.
    ServerStopped {
        /// Which.
        index: u8,
    },
    /// Report a runtime cutting a server's connections.
    ConnectionsCut {
        /// Which.
        index: u8,
    },
    /// Open an exempt request (tracked while the gate is open).
    OpenExempt,
    /// Send a routes-ready report.
    RoutesReady {
        /// Which.
        index: u8,
    },
    /// Open a request.
    OpenRequest {
        /// Long-running or normal.
        long_running: bool,
    },
    /// End a held request.
    EndRequest {
        /// Which (modulo the number held).
        index: u8,
    },
    /// Tell the machine the gate may have drained.
    DrainProgress,
    /// Ask a health endpoint.
    Health {
        /// Which.
        endpoint: u8,
    },
    /// A hand-over step (modulo 3): ask for one, report the successor ready, or report it
    /// failed.
    HandOver {
        /// Which step.
        step: u8,
    },
}

/// A random configuration and registrations for property tests and fuzzers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Setup {
    /// Shutdown delay in 100 ms units.
    pub delay_tenths: u8,
    /// Watch grace in 100 ms units.
    pub grace_tenths: u8,
    /// Request timeout in 100 ms units (0: none).
    pub request_timeout_tenths: u8,
    /// Retry-after mode.
    pub send_retry_after: bool,
    /// Pre-shutdown, post-start, after-drain and destroy hooks (each modulo 4).
    pub hooks: [u8; 4],
    /// Extra listeners besides `api` (modulo 3).
    pub extra_listeners: u8,
    /// Routes-ready reports (modulo 3).
    pub routes_ready: u8,
}

impl Setup {
    /// The configuration.
    #[must_use]
    pub fn config(&self) -> Config {
        let tenths = |t: u8| Duration::from_millis(u64::from(t) * 100);
        Config::builder()
            .shutdown_delay(tenths(self.delay_tenths))
            .shutdown_watch_termination_grace_period(tenths(self.grace_tenths))
            .request_timeout(tenths(self.request_timeout_tenths))
            .shutdown_send_retry_after(self.send_retry_after)
            .build()
            .unwrap_or_default()
    }

    /// A serving simulator with these registrations.
    pub fn simulator(&self) -> Result<Simulator, InputError> {
        let kinds = [
            HookKind::PreShutdown,
            HookKind::PostStart,
            HookKind::AfterDrain,
            HookKind::Destroy,
        ];
        let hooks = self.hooks;
        let (extra, mux) = (self.extra_listeners % 3, self.routes_ready % 3);
        Simulator::serving(self.config(), |m| {
            for (kind, n) in kinds.into_iter().zip(hooks) {
                for i in 0..n % 4 {
                    let _ = m.add_hook(kind, HOOK_NAMES[usize::from(i)]);
                }
            }
            for i in 0..extra {
                let _ = m.add_listener(HOOK_NAMES[usize::from(i)]);
            }
            for i in 0..mux {
                let _ = m.add_routes_ready(HOOK_NAMES[usize::from(i)]);
            }
        })
    }
}

const HOOK_NAMES: [&str; 4] = ["a", "b", "c", "d"];
