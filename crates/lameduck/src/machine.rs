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
//! use lameduck::{Config, Event, Input, Instant, Machine, StopSource};
//!
//! let mut m = Machine::new(Config::builder().shutdown_delay(Duration::from_secs(2)).build()?);
//! let api = m.add_listener("api")?;
//! let mut now = Instant::ZERO;
//! m.handle_input(Input::Prepare, now)?;
//! m.handle_input(Input::Start, now)?;
//! m.handle_input(Input::ListenerServing(api), now)?;
//! m.handle_input(Input::StopRequested(StopSource::Signal), now)?;
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

use crate::config::{Config, ShutdownMode};
use crate::health::is_valid_check_name;
use crate::shared::{Check, CheckFn, CheckKind, EndpointSet, PostStartState, RunStage, Shared};
use crate::signal::Signal;
use crate::time::{duration_nanos_saturating, Instant};

/// How long the process waits, after the drain, for connections to close once the HTTP
/// shutdown timeout has passed, so that the bytes of the last responses (a stream's final
/// chunk) reach their sockets before the process exits. Never extends the exit past
/// `max(request_timeout, grace period)` after `NotAcceptingNewRequest`.
pub const CONNECTION_CLOSE_LINGER: Duration = Duration::from_millis(250);

/// How long the destroy hooks get, in all, before the process exits without them.
pub const DESTROY_HOOKS_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the machine reports drain progress while draining.
pub const DRAIN_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

pub use crate::phase::Phase;

/// Kinds of hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookKind {
    /// Runs concurrently with the shutdown delay, from `ShutdownInitiated`.
    PreShutdown,
    /// Runs once every listener serves; adds a `poststarthook/<name>` health check.
    PostStart,
    /// Runs after `InFlightRequestsDrained` (flush logs, traces, exporters).
    AfterDrain,
    /// Runs once at exit, on every exit path; its outcome does not change the exit code.
    Destroy,
}

impl HookKind {
    /// A short name for logs.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            HookKind::PreShutdown => "pre-shutdown",
            HookKind::PostStart => "post-start",
            HookKind::AfterDrain => "after-drain",
            HookKind::Destroy => "destroy",
        }
    }
}

/// A registered hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookId(pub(crate) u16);

/// A registered listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(pub(crate) u16);

/// A registered readiness-of-routes signal (`MuxAndDiscoveryComplete` waits for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MuxSignalId(pub(crate) u16);

impl HookId {
    /// An id from its raw index, for fuzzers and reference-model tests. The machine rejects
    /// ids that were not registered with a typed error.
    #[must_use]
    pub const fn from_raw(index: u16) -> Self {
        HookId(index)
    }

    /// The index in registration order (across all kinds).
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl ListenerId {
    /// An id from its raw index, for fuzzers and reference-model tests. The machine rejects
    /// ids that were not registered with a typed error.
    #[must_use]
    pub const fn from_raw(index: u16) -> Self {
        ListenerId(index)
    }

    /// The index in registration order.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl MuxSignalId {
    /// An id from its raw index, for fuzzers and reference-model tests. The machine rejects
    /// ids that were not registered with a typed error.
    #[must_use]
    pub const fn from_raw(index: u16) -> Self {
        MuxSignalId(index)
    }

    /// The index in registration order.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// How a hook ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookOutcome {
    /// It returned success.
    Succeeded,
    /// It returned an error.
    Failed,
    /// It panicked; counted as failed.
    Panicked,
}

impl HookOutcome {
    /// Whether the hook failed (error or panic).
    #[must_use]
    pub const fn is_failure(self) -> bool {
        !matches!(self, HookOutcome::Succeeded)
    }
}

/// What asked for termination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopSource {
    /// SIGTERM or SIGINT. A second one forces exit 1 at once.
    Signal,
    /// `request_shutdown()` from code; repeating it changes nothing.
    Api,
}

/// Why the process exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExitReason {
    /// A graceful termination with nothing failed.
    Graceful,
    /// A graceful termination during which a hook failed or panicked, or a listener failed.
    Failure,
    /// A second signal forced exit.
    SecondSignal,
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExitReason::Graceful => "graceful termination completed",
            ExitReason::Failure => "graceful termination completed after a failure",
            ExitReason::SecondSignal => "second signal received, exiting at once",
        })
    }
}

/// The plan for the drains, decided at `NotAcceptingNewRequest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainPlan {
    /// Normal requests in flight when the gate closed.
    pub normal_in_flight: usize,
    /// Long-running requests in flight when the gate closed.
    pub long_running_in_flight: usize,
    /// When the normal drain gives up (`None`: no request timeout, it waits without bound).
    pub normal_deadline: Option<Instant>,
    /// When the long-running drain gives up (`None`: not waited for, grace period 0).
    pub long_running_deadline: Option<Instant>,
    /// The interval between paced long-running completions
    /// (`1 / max(count / grace, min_watch_drain_qps)`), if pacing.
    pub pacing_interval: Option<Duration>,
}

/// An input to the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Freeze the registrations and build the shared state (typestate: `prepare`).
    Prepare,
    /// Start running (typestate: `start`). Listeners are then bound by the driver.
    Start,
    /// A listener is bound and serving.
    ListenerServing(ListenerId),
    /// A hook the machine asked to run has ended.
    HookFinished {
        /// Which hook.
        hook: HookId,
        /// How it ended.
        outcome: HookOutcome,
    },
    /// A readiness-of-routes signal fired (idempotent).
    MuxSignalFired(MuxSignalId),
    /// Termination was requested.
    StopRequested(StopSource),
    /// The gate notified its listeners: a wait group may have drained. Cheap; send it
    /// whenever in doubt.
    DrainProgress,
    /// A listener stopped accepting (after [`Event::StopListening`], or because it failed).
    ListenerStopped(ListenerId),
    /// A listener's server finished: every connection closed.
    ServerStopped(ListenerId),
    /// The runtime ended this listener's connections on its own (a shutdown timeout of its
    /// own, say) while lameduck still allowed them to run. Termination starts if it has
    /// not, and the exit code will be 1.
    ConnectionsCut(ListenerId),
}

/// An output of the machine; see [`Machine::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A lifecycle signal fired. Log it (`[graceful-termination] shutdown event name=…`).
    Signal {
        /// Which.
        signal: Signal,
        /// When.
        at: Instant,
    },
    /// Every listener serves: tell systemd `READY=1`.
    NotifyReady,
    /// Run every post-start hook concurrently; report each with [`Input::HookFinished`].
    RunPostStartHooks,
    /// Tell systemd `STOPPING=1`.
    NotifyStopping,
    /// Run every pre-shutdown hook concurrently; report each with [`Input::HookFinished`].
    RunPreShutdownHooks,
    /// The gate closed (`NotAcceptingNewRequest`). End keep-alive on every connection after
    /// its current response (HTTP/1 `Connection: close`, HTTP/2 GOAWAY); long-running
    /// handlers learn it through [`Shared::signal_fired`]. Wait on the gate and send
    /// [`Input::DrainProgress`] when it notifies.
    DrainStarted(DrainPlan),
    /// Drain progress, about once a second while draining: log it.
    DrainProgress {
        /// Normal requests still in flight.
        normal_in_flight: usize,
        /// Long-running requests still in flight.
        long_running_in_flight: usize,
    },
    /// The normal drain ended.
    NormalDrainFinished {
        /// Requests still in flight (non-zero only when the deadline passed).
        remaining: usize,
        /// Whether it ended at its deadline.
        timed_out: bool,
    },
    /// The long-running drain ended.
    LongRunningDrainFinished {
        /// Long-running requests in flight when it began.
        before: usize,
        /// Still in flight when it ended.
        after: usize,
        /// Whether it ended at the grace deadline.
        timed_out: bool,
        /// Whether it was not waited for at all (grace period 0).
        skipped: bool,
    },
    /// Stop every listener (close the listening sockets) and shut the servers down
    /// gracefully: close idle connections, end keep-alive (HTTP/1 `Connection: close`,
    /// HTTP/2 GOAWAY) and let active connections finish. The machine waits for
    /// [`Input::ServerStopped`] until `shutdown_deadline`.
    StopListening {
        /// The HTTP shutdown deadline (`None`: unbounded).
        shutdown_deadline: Option<Instant>,
    },
    /// The HTTP shutdown timeout passed before every server stopped. The machine stops
    /// waiting for the servers and **closes nothing**: active connections (a long-running
    /// stream inside its grace period, say) keep being served, bounded by their own
    /// deadlines. Log it.
    HttpShutdownTimedOut,
    /// A runtime ended connections of this listener before lameduck's bounds allowed it
    /// (reported with [`Input::ConnectionsCut`]): the drain is not complete, and the exit
    /// code will be 1.
    ConnectionsCut(ListenerId),
    /// Run every after-drain hook; report each with [`Input::HookFinished`].
    RunAfterDrainHooks,
    /// A hook failed or panicked; the process will exit 1 at the end.
    HookFailed {
        /// Which hook ([`Machine::hook_name`] names it).
        hook: HookId,
        /// How.
        outcome: HookOutcome,
    },
    /// A listener stopped before it was asked to; termination starts and the exit code
    /// will be 1.
    ListenerFailed(ListenerId),
    /// Run the destroy hooks, once, one after the other in registration order; report each
    /// with [`Input::HookFinished`]. [`Event::Exit`] follows once they have all finished, or
    /// [`DESTROY_HOOKS_TIMEOUT`] after this event, or at once on a second stop signal.
    RunDestroyHooks,
    /// Exit the process with `code`.
    Exit {
        /// 0 or 1.
        code: u8,
        /// Why.
        reason: ExitReason,
    },
}

/// An error from registration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Registration is closed (hooks and checks: after prepare; listeners: after start).
    #[error("unable to add {what} {name:?} because registrations are closed")]
    AlreadyPrepared {
        /// What was being added.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The name is empty or malformed.
    #[error("invalid {what} name {name:?}")]
    InvalidName {
        /// What was being added.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The name is taken.
    #[error("unable to add {what} {name:?} because it is already registered")]
    Duplicate {
        /// What was being added.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// More than 65,535 registrations of one kind.
    #[error("too many {what} registrations")]
    TooMany {
        /// What was being added.
        what: &'static str,
    },
}

/// An input that is illegal in the machine's current state. The machine is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The input needs another phase.
    #[error("{input} is not legal in phase {phase:?}")]
    WrongPhase {
        /// The input's name.
        input: &'static str,
        /// The machine's phase.
        phase: Phase,
    },
    /// No such hook.
    #[error("unknown hook {0:?}")]
    UnknownHook(HookId),
    /// The hook was not asked to run, or already reported.
    #[error("hook {0:?} is not running")]
    HookNotRunning(HookId),
    /// No such listener.
    #[error("unknown listener {0:?}")]
    UnknownListener(ListenerId),
    /// The listener already reported this.
    #[error("listener {listener:?} already reported {input}")]
    ListenerRepeated {
        /// Which.
        listener: ListenerId,
        /// The input's name.
        input: &'static str,
    },
    /// A server cannot stop before its listener.
    #[error("server {0:?} stopped before its listener")]
    ServerBeforeListener(ListenerId),
    /// No such readiness-of-routes signal.
    #[error("unknown readiness-of-routes signal {0:?}")]
    UnknownMuxSignal(MuxSignalId),
}

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

#[derive(Default, Clone, Copy)]
struct ListenerState {
    serving: bool,
    stopped: bool,
    server_stopped: bool,
}

struct PendingCheck {
    name: String,
    endpoints: EndpointSet,
    check: CheckFn,
}

/// The machine's timers, one deadline slot each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    /// `ShutdownInitiated + shutdown_delay`: `AfterShutdownDelayDuration`.
    ShutdownDelay,
    /// `NotAcceptingNewRequest + request_timeout`: the normal drain gives up.
    NormalDrain,
    /// `NotAcceptingNewRequest + grace`: the long-running drain gives up.
    LongRunningDrain,
    /// The HTTP shutdown timeout: stop waiting for the servers (closing nothing).
    HttpShutdown,
    /// The next drain progress report.
    DrainProgress,
    /// After the drain, the end of the wait for connections to close
    /// ([`CONNECTION_CLOSE_LINGER`]).
    CloseLinger,
    /// The destroy hooks' time is up.
    DestroyHooks,
}

impl Timer {
    const COUNT: usize = 7;
}

/// One optional deadline per [`Timer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TimerTable([Option<Instant>; Timer::COUNT]);

impl TimerTable {
    fn set(&mut self, timer: Timer, at: Option<Instant>) {
        self.0[timer as usize] = at;
    }

    fn stop(&mut self, timer: Timer) {
        self.0[timer as usize] = None;
    }

    fn is_armed(&self, timer: Timer) -> bool {
        self.0[timer as usize].is_some()
    }

    fn is_due(&self, timer: Timer, now: Instant) -> bool {
        self.0[timer as usize].is_some_and(|d| d <= now)
    }

    fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }

    fn clear(&mut self) {
        self.0 = [None; Timer::COUNT];
    }
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

/// The lifecycle state machine. See the [module docs](self).
pub struct Machine {
    config: Config,
    phase_gate: Stage,
    hooks: Vec<Hook>,
    listener_names: Vec<String>,
    listeners: Vec<ListenerState>,
    mux_names: Vec<String>,
    mux_fired: Vec<bool>,
    pending_checks: Vec<PendingCheck>,
    shared: Option<Arc<Shared>>,
    timers: TimerTable,
    events: VecDeque<Event>,
    // Facts the DAG is computed from. Signals themselves live in `Shared`.
    stop_requested: bool,
    /// A stop was requested from outside (an OS signal or the API): a further OS signal
    /// exits at once.
    stop_event_seen: bool,
    failed: bool,
    announced_serving: bool,
    normal_drained: bool,
    long_running_drained: bool,
    long_running_before: usize,
    server_wait: ServerWait,
    /// The exit decided once the termination completed, while the destroy hooks run.
    exiting: Option<(u8, ExitReason)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Configuring,
    Prepared,
    Running,
    Exited,
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

fn id16(len: usize, what: &'static str) -> Result<u16, RegisterError> {
    u16::try_from(len).map_err(|_| RegisterError::TooMany { what })
}

impl Machine {
    /// A machine in [`Phase::Configuring`].
    #[must_use]
    pub fn new(config: Config) -> Self {
        Machine {
            config,
            phase_gate: Stage::Configuring,
            hooks: Vec::new(),
            listener_names: Vec::new(),
            listeners: Vec::new(),
            mux_names: Vec::new(),
            mux_fired: Vec::new(),
            pending_checks: Vec::new(),
            shared: None,
            timers: TimerTable::default(),
            events: VecDeque::new(),
            stop_requested: false,
            stop_event_seen: false,
            failed: false,
            announced_serving: false,
            normal_drained: false,
            long_running_drained: false,
            long_running_before: 0,
            server_wait: ServerWait::NotStarted,
            exiting: None,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn check_configuring(&self, what: &'static str, name: &str) -> Result<(), RegisterError> {
        if self.phase_gate != Stage::Configuring {
            return Err(RegisterError::AlreadyPrepared {
                what,
                name: name.into(),
            });
        }
        if !is_valid_check_name(name) {
            return Err(RegisterError::InvalidName {
                what,
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Registers a hook of `kind` named `name`.
    pub fn add_hook(&mut self, kind: HookKind, name: &str) -> Result<HookId, RegisterError> {
        let what = kind.name();
        self.check_configuring(what, name)?;
        if self.hooks.iter().any(|h| h.kind == kind && h.name == name) {
            return Err(RegisterError::Duplicate {
                what,
                name: name.into(),
            });
        }
        if kind == HookKind::PostStart {
            self.check_name_free_for_check(&post_start_check_name(name), what)?;
        }
        let id = HookId(id16(self.hooks.len(), what)?);
        let post_start_slot = self
            .hooks
            .iter()
            .filter(|h| h.kind == HookKind::PostStart)
            .count();
        self.hooks.push(Hook {
            name: name.into(),
            kind,
            state: HookState::Registered,
            post_start_slot,
        });
        Ok(id)
    }

    fn check_name_free_for_check(
        &self,
        name: &str,
        what: &'static str,
    ) -> Result<(), RegisterError> {
        let taken = matches!(name, "ping" | "shutdown")
            || self.pending_checks.iter().any(|c| c.name == name)
            || self
                .hooks
                .iter()
                .any(|h| h.kind == HookKind::PostStart && post_start_check_name(&h.name) == name);
        if taken {
            return Err(RegisterError::Duplicate {
                what,
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Registers a listener (one server of this lifecycle). Legal while configuring and
    /// once prepared (servers are usually built from the prepared shared state), not after
    /// start.
    pub fn add_listener(&mut self, name: &str) -> Result<ListenerId, RegisterError> {
        if self.phase_gate == Stage::Prepared {
            if !is_valid_check_name(name) {
                return Err(RegisterError::InvalidName {
                    what: "listener",
                    name: name.into(),
                });
            }
        } else {
            self.check_configuring("listener", name)?;
        }
        if self.listener_names.iter().any(|n| n == name) {
            return Err(RegisterError::Duplicate {
                what: "listener",
                name: name.into(),
            });
        }
        let id = ListenerId(id16(self.listeners.len(), "listener")?);
        self.listener_names.push(name.into());
        self.listeners.push(ListenerState::default());
        Ok(id)
    }

    /// Registers a readiness-of-routes signal.
    pub fn add_mux_signal(&mut self, name: &str) -> Result<MuxSignalId, RegisterError> {
        self.check_configuring("readiness-of-routes signal", name)?;
        if self.mux_names.iter().any(|n| n == name) {
            return Err(RegisterError::Duplicate {
                what: "readiness-of-routes signal",
                name: name.into(),
            });
        }
        let id = MuxSignalId(id16(self.mux_names.len(), "readiness-of-routes signal")?);
        self.mux_names.push(name.into());
        self.mux_fired.push(false);
        Ok(id)
    }

    /// Registers a user health check on `endpoints`. Checks run in registration order, after
    /// `ping` and the post-start hook checks registered before them, and before `shutdown`.
    pub fn add_health_check(
        &mut self,
        name: &str,
        endpoints: EndpointSet,
        check: CheckFn,
    ) -> Result<(), RegisterError> {
        self.check_configuring("health check", name)?;
        self.check_name_free_for_check(name, "health check")?;
        self.pending_checks.push(PendingCheck {
            name: name.into(),
            endpoints,
            check,
        });
        Ok(())
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

    /// The name of a readiness-of-routes signal.
    #[must_use]
    pub fn mux_signal_name(&self, id: MuxSignalId) -> Option<&str> {
        self.mux_names.get(id.index()).map(String::as_str)
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

    /// Whether `signal` has fired.
    #[must_use]
    pub fn has_fired(&self, signal: Signal) -> bool {
        self.shared.as_ref().is_some_and(|s| s.has_fired(signal))
    }

    /// When `signal` fired.
    #[must_use]
    pub fn fired_at(&self, signal: Signal) -> Option<Instant> {
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
        if self.phase_gate == Stage::Running {
            self.advance(now);
        }
    }

    /// Feeds one input at `now`. Illegal inputs return an error and change nothing.
    pub fn handle_input(&mut self, input: Input, now: Instant) -> Result<(), InputError> {
        let phase = self.phase();
        let wrong = |input: &'static str| Err(InputError::WrongPhase { input, phase });
        match input {
            Input::Prepare => {
                if self.phase_gate != Stage::Configuring {
                    return wrong("Prepare");
                }
                let _shared = self.prepare();
                return Ok(());
            }
            Input::Start => {
                if self.phase_gate != Stage::Prepared {
                    return wrong("Start");
                }
                self.start(now);
                return Ok(());
            }
            _ if self.phase_gate != Stage::Running => return wrong(input_name(&input)),
            Input::ListenerServing(id) => {
                let l = self.listener_mut(id)?;
                if l.serving || l.stopped {
                    return Err(InputError::ListenerRepeated {
                        listener: id,
                        input: "ListenerServing",
                    });
                }
                l.serving = true;
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
                        self.stop_requested = true;
                    }
                }
            }
            Input::MuxSignalFired(id) => {
                let fired = self
                    .mux_fired
                    .get_mut(id.index())
                    .ok_or(InputError::UnknownMuxSignal(id))?;
                *fired = true;
            }
            Input::StopRequested(source) => {
                if self.stop_event_seen {
                    if source == StopSource::Signal {
                        // The second stop event: exit at once, no hooks, no drain.
                        self.exit(1, ExitReason::SecondSignal);
                    }
                    // A repeated `request_shutdown()` changes nothing.
                    return Ok(());
                }
                self.stop_event_seen = true;
                self.stop_requested = true;
            }
            Input::DrainProgress => {}
            Input::ListenerStopped(id) => {
                let sent = self.server_wait != ServerWait::NotStarted;
                let l = self.listener_mut(id)?;
                if l.stopped {
                    return Err(InputError::ListenerRepeated {
                        listener: id,
                        input: "ListenerStopped",
                    });
                }
                l.stopped = true;
                if !sent {
                    // The listener died on its own: terminate, and exit 1 at the end.
                    self.failed = true;
                    self.stop_requested = true;
                    self.events.push_back(Event::ListenerFailed(id));
                }
            }
            Input::ServerStopped(id) => {
                let l = self.listener_mut(id)?;
                if !l.stopped {
                    return Err(InputError::ServerBeforeListener(id));
                }
                if l.server_stopped {
                    return Err(InputError::ListenerRepeated {
                        listener: id,
                        input: "ServerStopped",
                    });
                }
                l.server_stopped = true;
            }
            Input::ConnectionsCut(id) => {
                self.listener_mut(id)?;
                self.failed = true;
                self.stop_requested = true;
                self.events.push_back(Event::ConnectionsCut(id));
            }
        }
        self.advance(now);
        Ok(())
    }

    fn listener_mut(&mut self, id: ListenerId) -> Result<&mut ListenerState, InputError> {
        self.listeners
            .get_mut(id.index())
            .ok_or(InputError::UnknownListener(id))
    }

    /// Starts running. Only called in [`Stage::Prepared`] (checked by `handle_input`, or by
    /// the typestate API's types).
    pub(crate) fn start(&mut self, now: Instant) {
        self.phase_gate = Stage::Running;
        if let Some(s) = &self.shared {
            s.set_started(now);
        }
        self.advance(now);
    }

    /// Freezes the registrations and builds the shared state. Only called in
    /// [`Stage::Configuring`] (checked by `handle_input`, or by the typestate API's types).
    pub(crate) fn prepare(&mut self) -> Arc<Shared> {
        // Check order as kube-apiserver: ping, post-start hooks and user checks in
        // registration order, then `shutdown` (readyz only) last.
        let mut checks = Vec::with_capacity(self.pending_checks.len() + self.hooks.len() + 2);
        checks.push(Check {
            name: "ping".into(),
            endpoints: EndpointSet::ALL,
            kind: CheckKind::Ping,
        });
        for h in self.hooks.iter().filter(|h| h.kind == HookKind::PostStart) {
            checks.push(Check {
                name: post_start_check_name(&h.name),
                endpoints: EndpointSet::ALL,
                kind: CheckKind::PostStartHook {
                    slot: h.post_start_slot,
                },
            });
        }
        for c in self.pending_checks.drain(..) {
            checks.push(Check {
                name: c.name,
                endpoints: c.endpoints,
                kind: CheckKind::User(c.check),
            });
        }
        checks.push(Check {
            name: "shutdown".into(),
            endpoints: EndpointSet::READYZ,
            kind: CheckKind::Shutdown,
        });
        let post_start = self
            .hooks
            .iter()
            .filter(|h| h.kind == HookKind::PostStart)
            .count();
        let shared = Arc::new(Shared::new(self.config.clone(), checks, post_start));
        self.shared = Some(Arc::clone(&shared));
        self.phase_gate = Stage::Prepared;
        shared
    }

    fn fire(&mut self, signal: Signal, now: Instant) {
        let Some(shared) = &self.shared else { return };
        if shared.fire(signal, now) {
            self.events.push_back(Event::Signal { signal, at: now });
        }
    }

    fn timer_due(&self, t: Timer, now: Instant) -> bool {
        self.timers.is_due(t, now)
    }

    fn hooks_of(&self, kind: HookKind) -> impl Iterator<Item = &Hook> {
        self.hooks.iter().filter(move |h| h.kind == kind)
    }

    fn start_hooks(&mut self, kind: HookKind) -> bool {
        let mut any = false;
        for h in self.hooks.iter_mut().filter(|h| h.kind == kind) {
            h.state = HookState::Running;
            any = true;
        }
        any
    }

    fn all_done(&self, kind: HookKind) -> bool {
        self.hooks_of(kind)
            .all(|h| matches!(h.state, HookState::Done(_)))
    }

    /// Computes the DAG: fires every signal and emits every event whose preconditions hold
    /// at `now`, until nothing more changes.
    fn advance(&mut self, now: Instant) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let gate = shared.gate();
        let fired = |s: Signal| shared.has_fired(s);

        // Start-up.
        if !fired(Signal::MuxAndDiscoveryComplete)
            && !fired(Signal::ShutdownInitiated)
            && !self.stop_requested
            && self.mux_fired.iter().all(|f| *f)
        {
            self.fire(Signal::MuxAndDiscoveryComplete, now);
        }
        if !self.announced_serving && self.listeners.iter().all(|l| l.serving) {
            self.announced_serving = true;
            shared.set_run_stage(RunStage::Serving);
            self.events.push_back(Event::NotifyReady);
            if self.start_hooks(HookKind::PostStart) {
                self.events.push_back(Event::RunPostStartHooks);
            }
        }

        // The lame-duck window.
        if self.stop_requested && !fired(Signal::ShutdownInitiated) {
            self.fire(Signal::ShutdownInitiated, now);
            self.events.push_back(Event::NotifyStopping);
            self.timers.set(
                Timer::ShutdownDelay,
                Some(now + self.config.shutdown_delay()),
            );
            if self.start_hooks(HookKind::PreShutdown) {
                self.events.push_back(Event::RunPreShutdownHooks);
            }
        }
        if fired(Signal::ShutdownInitiated)
            && !fired(Signal::AfterShutdownDelayDuration)
            && self.timer_due(Timer::ShutdownDelay, now)
        {
            self.timers.stop(Timer::ShutdownDelay);
            self.fire(Signal::AfterShutdownDelayDuration, now);
        }
        if fired(Signal::ShutdownInitiated)
            && !fired(Signal::PreShutdownHooksStopped)
            && self.all_done(HookKind::PreShutdown)
        {
            self.fire(Signal::PreShutdownHooksStopped, now);
        }

        // Stop accepting.
        if fired(Signal::AfterShutdownDelayDuration)
            && fired(Signal::PreShutdownHooksStopped)
            && !fired(Signal::NotAcceptingNewRequest)
        {
            self.begin_drain(&shared, now);
        }

        // The drains.
        if fired(Signal::NotAcceptingNewRequest) && !fired(Signal::InFlightRequestsDrained) {
            if !self.normal_drained {
                let timed_out = self.timer_due(Timer::NormalDrain, now);
                if gate.normal_drained() || timed_out {
                    self.normal_drained = true;
                    self.timers.stop(Timer::NormalDrain);
                    self.events.push_back(Event::NormalDrainFinished {
                        remaining: gate.normal_in_flight(),
                        timed_out: timed_out && !gate.normal_drained(),
                    });
                }
            }
            if !self.long_running_drained {
                let timed_out = self.timer_due(Timer::LongRunningDrain, now);
                if gate.long_running_drained() || timed_out {
                    self.long_running_drained = true;
                    self.timers.stop(Timer::LongRunningDrain);
                    self.events.push_back(Event::LongRunningDrainFinished {
                        before: self.long_running_before,
                        after: gate.long_running_in_flight(),
                        timed_out: timed_out && !gate.long_running_drained(),
                        skipped: false,
                    });
                }
            }
            if self.timer_due(Timer::DrainProgress, now) {
                self.timers
                    .set(Timer::DrainProgress, Some(now + DRAIN_PROGRESS_INTERVAL));
                self.events.push_back(Event::DrainProgress {
                    normal_in_flight: gate.normal_in_flight(),
                    long_running_in_flight: gate.long_running_in_flight(),
                });
            }
            if self.normal_drained && self.long_running_drained {
                self.timers.stop(Timer::DrainProgress);
                self.fire(Signal::InFlightRequestsDrained, now);
                if self.start_hooks(HookKind::AfterDrain) {
                    self.events.push_back(Event::RunAfterDrainHooks);
                }
                if self.config.mode() == ShutdownMode::SendRetryAfter {
                    self.stop_listening(now);
                }
                if self.server_wait == ServerWait::TimedOut {
                    self.arm_close_linger(now);
                }
            }
        }

        // The listeners and their servers.
        if self.server_wait != ServerWait::NotStarted
            && !fired(Signal::HTTPServerStoppedListening)
            && self.listeners.iter().all(|l| l.stopped)
        {
            self.fire(Signal::HTTPServerStoppedListening, now);
        }
        if matches!(self.server_wait, ServerWait::Waiting | ServerWait::TimedOut)
            && self.listeners.iter().all(|l| l.server_stopped)
        {
            self.server_wait = ServerWait::Done;
            self.timers.stop(Timer::HttpShutdown);
            self.timers.stop(Timer::CloseLinger);
        }
        if self.server_wait == ServerWait::Waiting && self.timer_due(Timer::HttpShutdown, now) {
            // Go's `Server.Shutdown(ctx)` at its deadline: stop waiting, close nothing.
            self.timers.stop(Timer::HttpShutdown);
            self.server_wait = ServerWait::TimedOut;
            self.events.push_back(Event::HttpShutdownTimedOut);
        }
        if self.timer_due(Timer::CloseLinger, now) {
            self.timers.stop(Timer::CloseLinger);
        }

        // Exit: destroy hooks, then the exit itself.
        let servers_done = match self.server_wait {
            ServerWait::Done => true,
            ServerWait::TimedOut => !self.timers.is_armed(Timer::CloseLinger),
            ServerWait::NotStarted | ServerWait::Waiting => false,
        };
        if self.exiting.is_none()
            && fired(Signal::InFlightRequestsDrained)
            && fired(Signal::HTTPServerStoppedListening)
            && servers_done
            && self.all_done(HookKind::AfterDrain)
        {
            let decided = if self.failed {
                (1, ExitReason::Failure)
            } else {
                (0, ExitReason::Graceful)
            };
            self.exiting = Some(decided);
            if self.start_hooks(HookKind::Destroy) {
                self.events.push_back(Event::RunDestroyHooks);
                self.timers
                    .set(Timer::DestroyHooks, Some(now + DESTROY_HOOKS_TIMEOUT));
            }
        }
        if let Some((code, reason)) = self.exiting {
            if self.all_done(HookKind::Destroy) || self.timer_due(Timer::DestroyHooks, now) {
                self.exit(code, reason);
            }
        }
    }

    /// After the drain, with the HTTP shutdown timeout passed: give the connections
    /// [`CONNECTION_CLOSE_LINGER`] to close, but never past
    /// `NotAcceptingNewRequest + max(request_timeout, grace)`.
    fn arm_close_linger(&mut self, now: Instant) {
        let Some(n) = self.fired_at(Signal::NotAcceptingNewRequest) else {
            return;
        };
        let bound = n + self
            .config
            .request_timeout()
            .max(self.config.shutdown_watch_termination_grace_period());
        let until = (now + CONNECTION_CLOSE_LINGER).min(bound);
        if until > now {
            self.timers.set(Timer::CloseLinger, Some(until));
        }
    }

    fn begin_drain(&mut self, shared: &Shared, now: Instant) {
        // Close the gate and start pacing *before* publishing NotAcceptingNewRequest: a
        // long-running handler woken by the signal must already find its paced slot.
        let gate = shared.gate();
        let (normal, long_running) = gate.close();
        self.long_running_before = long_running;
        let request_timeout = self.config.request_timeout();
        // Every normal request is released at the latest `request_timeout` after its
        // admission (504 or abort), so the normal drain ends by then.
        let normal_deadline = (!request_timeout.is_zero()).then(|| now + request_timeout);
        self.timers.set(Timer::NormalDrain, normal_deadline);

        let grace = self.config.shutdown_watch_termination_grace_period();
        let mut plan = DrainPlan {
            normal_in_flight: normal,
            long_running_in_flight: long_running,
            normal_deadline,
            long_running_deadline: None,
            pacing_interval: None,
        };
        if !grace.is_zero() {
            let deadline = now + grace;
            let interval = pacing_interval(long_running, grace, self.config.min_watch_drain_qps());
            gate.start_pacing(now, interval, deadline);
            self.timers.set(Timer::LongRunningDrain, Some(deadline));
            plan.long_running_deadline = Some(deadline);
            plan.pacing_interval = Some(interval);
        }
        self.fire(Signal::NotAcceptingNewRequest, now);
        if grace.is_zero() {
            // Not waited for (kube-apiserver: "not going to wait for active watch
            // request(s) to drain"). They are still told to end through the signal.
            self.long_running_drained = true;
            self.events.push_back(Event::LongRunningDrainFinished {
                before: long_running,
                after: long_running,
                timed_out: false,
                skipped: true,
            });
        }
        self.timers
            .set(Timer::DrainProgress, Some(now + DRAIN_PROGRESS_INTERVAL));
        self.events.push_back(Event::DrainStarted(plan));
        if self.config.mode() == ShutdownMode::CloseListener {
            self.stop_listening(now);
        }
    }

    fn stop_listening(&mut self, now: Instant) {
        if self.server_wait != ServerWait::NotStarted {
            return;
        }
        self.server_wait = ServerWait::Waiting;
        let timeout = self.config.http_shutdown_timeout();
        let shutdown_deadline = (!timeout.is_zero()).then(|| now + timeout);
        self.timers.set(Timer::HttpShutdown, shutdown_deadline);
        self.events
            .push_back(Event::StopListening { shutdown_deadline });
    }

    fn exit(&mut self, code: u8, reason: ExitReason) {
        self.phase_gate = Stage::Exited;
        if let Some(shared) = &self.shared {
            shared.set_run_stage(RunStage::Exited);
        }
        self.timers.clear();
        self.events.push_back(Event::Exit { code, reason });
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

fn post_start_check_name(hook: &str) -> String {
    let mut s = String::from("poststarthook/");
    s.push_str(hook);
    s
}

fn input_name(input: &Input) -> &'static str {
    match input {
        Input::Prepare => "Prepare",
        Input::Start => "Start",
        Input::ListenerServing(_) => "ListenerServing",
        Input::HookFinished { .. } => "HookFinished",
        Input::MuxSignalFired(_) => "MuxSignalFired",
        Input::StopRequested(_) => "StopRequested",
        Input::DrainProgress => "DrainProgress",
        Input::ListenerStopped(_) => "ListenerStopped",
        Input::ServerStopped(_) => "ServerStopped",
        Input::ConnectionsCut(_) => "ConnectionsCut",
    }
}
