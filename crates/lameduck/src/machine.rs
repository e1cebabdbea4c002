//! The runtime-checked lifecycle state machine: the whole termination DAG and its bounds
//! (described in the repository's `docs/design.md#dag` and `docs/design.md#bounds`).
//!
//! [`Machine`] is sans-IO in the manner of quinn-proto and str0m. Its methods come in four
//! kinds, used in this order by a driver:
//!
//! * **registration** (`add_*`), legal only while configuring;
//! * **inputs**: [`Machine::handle_input`] with an [`Input`] and the current time, and
//!   [`Machine::handle_timeout`] when the instant from [`Machine::poll_timeout`] is reached;
//! * **outputs**: [`Machine::poll_event`], drained until it returns `None` after every input;
//! * **getters**: [`Machine::phase`], [`Machine::shared`], hook and listener names.
//!
//! Every input that is illegal in the current state returns an [`InputError`] and changes
//! nothing. All decisions (when signals fire, what to stop, when to give up waiting, the exit
//! code) are made here; a driver only turns [`Event`]s into effects and reports back.
//!
//! # The run loop a driver writes
//!
//! ```
//! use core::time::Duration;
//! use lameduck::machine::StopSource;
//! use lameduck::{Config, Event, Input, Instant, Machine};
//!
//! let mut m = Machine::new(Config::builder().shutdown_delay(Duration::from_secs(2)).build()?);
//! let api = m.add_listener("api")?;
//! let mut now = Instant::ZERO;
//! m.handle_input(Input::Prepare, now)?;
//! m.handle_input(Input::Start, now)?;
//! m.handle_input(Input::ListenerServing(api), now)?;
//! m.handle_input(Input::StopRequested(StopSource::OsSignal), now)?;
//! let exit = loop {
//!     // 1. Drain the outputs and turn each into an effect.
//!     while let Some(event) = m.poll_event() {
//!         match event {
//!             Event::StopListening { .. } => {
//!                 // close the listener, then report it (a real driver does this later):
//!                 m.handle_input(Input::ListenerStopped(api), now)?;
//!                 m.handle_input(Input::ServerStopped(api), now)?;
//!             }
//!             Event::Exit { code, .. } => return Ok::<_, Box<dyn std::error::Error>>(assert_eq!(code, 0)),
//!             _ => {} // log signals, notify systemd, run hooks, ...
//!         }
//!     }
//!     // 2. Sleep until the next deadline (or until an input arrives), then feed the time.
//!     let Some(deadline) = m.poll_timeout() else { break None };
//!     now = deadline;
//!     m.handle_timeout(now);
//! };
//! # let _: Option<()> = exit;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::config::Config;
use crate::shared::{CheckFn, EndpointSet, PostStartState, Shared};
use crate::signal::LifecycleSignal;
use crate::time::{duration_nanos_saturating, Instant};

// The machine is written in four more files: `io`, the vocabulary (inputs, events, ids,
// errors); `register`, registration and `prepare`; `dag`, `advance` and the drains, the
// one place signals fire; `timer`, the deadline table. This file holds the state and the
// input handling.
mod dag;
mod handover;
mod io;
mod register;
mod timer;

pub use self::io::{
    DrainPlan, Event, ExitReason, HandOverOutcome, HookId, HookKind, HookOutcome, Input,
    InputError, ListenerId, RegisterError, RoutesReadyId, StopSource,
};
use self::timer::TimerTable;

/// How long the process waits, after the drain, for connections to close once the HTTP
/// shutdown timeout has passed, so that the bytes of the last responses (a stream's final
/// chunk) reach their sockets before the process exits. Never extends the exit past
/// `max(request_timeout, grace period)` after `NotAcceptingNewRequest`.
pub const CONNECTION_CLOSE_LINGER: Duration = Duration::from_millis(250);

/// How long the destroy hooks get, in all, before the process exits without them.
pub const DESTROY_HOOKS_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the machine reports drain progress while draining.
pub const DRAIN_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

use crate::phase::{MachineStage, Phase, Progress};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HookState {
    Registered,
    Running,
    Done(HookOutcome),
}

struct Hook {
    name: String,
    kind: HookKind,
    state: HookState,
    /// For post-start hooks: the slot of its health check.
    post_start_slot: usize,
}

/// How far one listener has got: it serves, then stops, then its server stops. A listener
/// may also stop without having served (it failed first).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
enum ListenerState {
    /// Registered; not serving yet.
    #[default]
    Registered,
    /// Serving.
    Serving,
    /// The listener stopped (`served`: it had served before).
    Stopped { served: bool },
    /// Its server stopped too.
    ServerStopped { served: bool },
}

impl ListenerState {
    /// Whether the listener has served (it may have stopped since).
    fn has_served(self) -> bool {
        matches!(
            self,
            ListenerState::Serving
                | ListenerState::Stopped { served: true }
                | ListenerState::ServerStopped { served: true }
        )
    }

    /// Whether the listener has stopped.
    fn is_stopped(self) -> bool {
        matches!(
            self,
            ListenerState::Stopped { .. } | ListenerState::ServerStopped { .. }
        )
    }
}

struct PendingCheck {
    name: String,
    endpoints: EndpointSet,
    check: CheckFn,
}

/// How far the wait for the servers to stop has got, once the listeners were told to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerWait {
    /// Not asked to stop yet.
    NotStarted,
    /// Waiting for every server to report [`Input::ServerStopped`].
    Waiting,
    /// The HTTP shutdown timeout passed: no longer a condition of the exit (after the drain,
    /// connections still get [`CONNECTION_CLOSE_LINGER`] to close).
    TimedOut,
    /// Every server stopped.
    Done,
}

/// One of the two drains (normal, long-running), from `NotAcceptingNewRequest` until it
/// ends; `InFlightRequestsDrained` fires when both have finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DrainState {
    /// The gate is open.
    NotStarted,
    /// Waiting for the requests in flight, `before` of them when the gate closed.
    Running {
        /// Requests in flight when the gate closed.
        before: usize,
    },
    /// Drained, timed out, or (long-running with grace period 0) not waited for.
    Finished,
}

/// Whether termination was asked for, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopRequest {
    /// Nobody asked.
    NotRequested,
    /// A failure started it (a post-start hook failed, a listener died, connections were
    /// cut): a later OS signal is still the first stop event.
    Failure,
    /// A stop event (an OS signal or the API): a further OS signal exits at once.
    Event,
}

/// How far the hand-over of the listening sockets to a successor got (`handover`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandOverState {
    /// None under way (none asked for, or the last one failed).
    Idle,
    /// Asked for before every listener served: starts once they do.
    Pending,
    /// The driver is sending the sockets and waiting for the successor.
    InProgress,
    /// The successor took over.
    Done,
}

/// The lifecycle state machine. See the [module docs](self).
pub struct Machine {
    config: Config,
    hooks: Vec<Hook>,
    listener_names: Vec<String>,
    listeners: Vec<ListenerState>,
    routes_ready_names: Vec<String>,
    routes_ready_flags: Vec<bool>,
    pending_checks: Vec<PendingCheck>,
    shared: Option<Arc<Shared>>,
    timers: TimerTable,
    events: VecDeque<Event>,
    // Facts the DAG is computed from. The signals, and the progress that marks the phases
    // (started, every listener served, exited), live in `Shared`.
    stop: StopRequest,
    /// A hook or listener failed: the exit code will be 1.
    failed: bool,
    normal_drain: DrainState,
    long_running_drain: DrainState,
    server_wait: ServerWait,
    /// The exit decided once the termination completed, while the destroy hooks run.
    exiting: Option<(u8, ExitReason)>,
    /// The hand-over of the listening sockets to a successor.
    hand_over: HandOverState,
}

impl fmt::Debug for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Machine")
            .field("phase", &self.phase())
            .field("timers", &self.timers)
            .field("pending_events", &self.events.len())
            .finish_non_exhaustive()
    }
}

impl Machine {
    /// A machine in [`Phase::Configuring`].
    #[must_use]
    pub fn new(config: Config) -> Self {
        Machine {
            config,
            hooks: Vec::new(),
            listener_names: Vec::new(),
            listeners: Vec::new(),
            routes_ready_names: Vec::new(),
            routes_ready_flags: Vec::new(),
            pending_checks: Vec::new(),
            shared: None,
            timers: TimerTable::default(),
            events: VecDeque::new(),
            stop: StopRequest::NotRequested,
            failed: false,
            normal_drain: DrainState::NotStarted,
            long_running_drain: DrainState::NotStarted,
            server_wait: ServerWait::NotStarted,
            exiting: None,
            hand_over: HandOverState::Idle,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The name of a hook.
    #[must_use]
    pub fn hook_name(&self, hook: HookId) -> Option<&str> {
        self.hooks.get(hook.index()).map(|h| h.name.as_str())
    }

    /// The kind of a hook.
    #[must_use]
    pub fn hook_kind(&self, hook: HookId) -> Option<HookKind> {
        self.hooks.get(hook.index()).map(|h| h.kind)
    }

    /// The hooks of `kind`, in registration order.
    pub fn hooks(&self, kind: HookKind) -> impl Iterator<Item = (HookId, &str)> {
        self.hooks
            .iter()
            .enumerate()
            .filter(move |(_, h)| h.kind == kind)
            .map(|(i, h)| (HookId(i as u16), h.name.as_str()))
    }

    /// The name of a listener.
    #[must_use]
    pub fn listener_name(&self, listener: ListenerId) -> Option<&str> {
        self.listener_names
            .get(listener.index())
            .map(String::as_str)
    }

    /// The listeners, in registration order.
    pub fn listeners(&self) -> impl Iterator<Item = (ListenerId, &str)> {
        self.listener_names
            .iter()
            .enumerate()
            .map(|(i, n)| (ListenerId(i as u16), n.as_str()))
    }

    /// The name of a routes-ready report.
    #[must_use]
    pub fn routes_ready_name(&self, id: RoutesReadyId) -> Option<&str> {
        self.routes_ready_names.get(id.index()).map(String::as_str)
    }

    /// The shared state, from [`Phase::Prepared`] on.
    #[must_use]
    pub fn shared(&self) -> Option<&Arc<Shared>> {
        self.shared.as_ref()
    }

    /// The current phase (once prepared, [`Shared::phase`], which request tasks see too).
    #[must_use]
    pub fn phase(&self) -> Phase {
        match &self.shared {
            None => Phase::Configuring,
            Some(shared) => shared.phase(),
        }
    }

    /// The coarse stage, which decides the legal registrations and inputs: the phase's.
    pub(crate) fn stage(&self) -> MachineStage {
        self.phase().stage()
    }

    /// Whether every listener has served once (the machine said [`Event::NotifyReady`]).
    pub(crate) fn has_served(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.has_progressed(Progress::Serving))
    }

    /// Whether `signal` has fired.
    #[must_use]
    pub fn has_fired(&self, signal: LifecycleSignal) -> bool {
        self.shared.as_ref().is_some_and(|s| s.has_fired(signal))
    }

    /// When `signal` fired.
    #[must_use]
    pub fn fired_at(&self, signal: LifecycleSignal) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.fired_at(signal))
    }

    /// The next output, or `None` when there is nothing more until the next input or timeout.
    #[must_use = "events must be acted on"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether [`Machine::poll_event`] has events waiting.
    #[must_use]
    pub fn has_pending_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The earliest instant at which [`Machine::handle_timeout`] has work, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Advances time to `now`: fires every timer that is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.stage() == MachineStage::Running {
            self.advance(now);
        }
    }

    /// Feeds one input at `now`. Illegal inputs return an error and change nothing.
    pub fn handle_input(&mut self, input: Input, now: Instant) -> Result<(), InputError> {
        let phase = self.phase();
        let wrong = |input: &'static str| Err(InputError::WrongPhase { input, phase });
        match input {
            Input::Prepare => {
                if self.stage() != MachineStage::Configuring {
                    return wrong("Prepare");
                }
                let _shared = self.prepare();
                return Ok(());
            }
            Input::Start => {
                if self.stage() != MachineStage::Prepared {
                    return wrong("Start");
                }
                self.start(now);
                return Ok(());
            }
            _ if self.stage() != MachineStage::Running => return wrong(input.name()),
            Input::ListenerServing(id) => {
                let l = self.listener_mut(id)?;
                if *l != ListenerState::Registered {
                    return Err(InputError::ListenerRepeated {
                        listener: id,
                        input: "ListenerServing",
                    });
                }
                *l = ListenerState::Serving;
            }
            Input::HookFinished { hook, outcome } => {
                let h = self
                    .hooks
                    .get_mut(hook.index())
                    .ok_or(InputError::UnknownHook(hook))?;
                if h.state != HookState::Running {
                    return Err(InputError::HookNotRunning(hook));
                }
                h.state = HookState::Done(outcome);
                let (kind, slot) = (h.kind, h.post_start_slot);
                if kind == HookKind::PostStart {
                    if let Some(s) = &self.shared {
                        s.set_post_start(
                            slot,
                            if outcome.is_failure() {
                                PostStartState::Failed
                            } else {
                                PostStartState::Succeeded
                            },
                        );
                    }
                }
                if outcome.is_failure() {
                    self.failed = true;
                    self.events.push_back(Event::HookFailed { hook, outcome });
                    if kind == HookKind::PostStart {
                        // A failing post-start hook starts a graceful termination (not a stop
                        // event: a later signal is still the first one).
                        self.stop_after_failure();
                    }
                }
            }
            Input::RoutesReady(id) => {
                let fired = self
                    .routes_ready_flags
                    .get_mut(id.index())
                    .ok_or(InputError::UnknownRoutesReady(id))?;
                *fired = true;
            }
            Input::StopRequested(source) => {
                if self.stop == StopRequest::Event {
                    if source == StopSource::OsSignal {
                        // The second stop event: exit at once, no hooks, no drain.
                        self.exit(1, ExitReason::SecondSignal);
                    }
                    // A repeated `request_shutdown()` changes nothing.
                    return Ok(());
                }
                self.stop = StopRequest::Event;
            }
            Input::DrainProgress => {}
            Input::ListenerStopped(id) => {
                let sent = self.server_wait != ServerWait::NotStarted;
                let l = self.listener_mut(id)?;
                if l.is_stopped() {
                    return Err(InputError::ListenerRepeated {
                        listener: id,
                        input: "ListenerStopped",
                    });
                }
                *l = ListenerState::Stopped {
                    served: l.has_served(),
                };
                if !sent {
                    // The listener died on its own: terminate, and exit 1 at the end.
                    self.failed = true;
                    self.stop_after_failure();
                    self.events.push_back(Event::ListenerFailed(id));
                }
            }
            Input::ServerStopped(id) => {
                let l = self.listener_mut(id)?;
                let served = match *l {
                    ListenerState::Stopped { served } => served,
                    ListenerState::ServerStopped { .. } => {
                        return Err(InputError::ListenerRepeated {
                            listener: id,
                            input: "ServerStopped",
                        })
                    }
                    ListenerState::Registered | ListenerState::Serving => {
                        return Err(InputError::ServerBeforeListener(id))
                    }
                };
                *l = ListenerState::ServerStopped { served };
            }
            Input::ConnectionsCut(id) => {
                self.listener_mut(id)?;
                self.failed = true;
                self.stop_after_failure();
                self.events.push_back(Event::ConnectionsCut(id));
            }
            Input::HandOverRequested => self.request_hand_over()?,
            Input::HandOverFinished(outcome) => self.finish_hand_over(outcome)?,
        }
        self.advance(now);
        Ok(())
    }

    /// A failure starts a graceful termination, unless one was asked for already.
    fn stop_after_failure(&mut self) {
        if self.stop == StopRequest::NotRequested {
            self.stop = StopRequest::Failure;
        }
    }

    fn listener_mut(&mut self, id: ListenerId) -> Result<&mut ListenerState, InputError> {
        self.listeners
            .get_mut(id.index())
            .ok_or(InputError::UnknownListener(id))
    }

    /// Starts running. Only called in `MachineStage::Prepared` (checked by `handle_input`, or by
    /// the typestate API's types).
    pub(crate) fn start(&mut self, now: Instant) {
        if let Some(s) = &self.shared {
            s.set_started(now);
        }
        self.advance(now);
    }
}

/// The interval between paced long-running completions:
/// `1 / max(count / grace, min_qps)`, never zero.
#[must_use]
pub fn pacing_interval(count: usize, grace: Duration, min_qps: u32) -> Duration {
    let grace_nanos = duration_nanos_saturating(grace);
    let by_count = match u64::try_from(count) {
        Ok(0) | Err(_) => u64::MAX,
        Ok(n) => grace_nanos / n,
    };
    let by_floor = match min_qps {
        0 => u64::MAX,
        q => 1_000_000_000 / u64::from(q),
    };
    Duration::from_nanos(by_count.min(by_floor).clamp(1, grace_nanos.max(1)))
}
