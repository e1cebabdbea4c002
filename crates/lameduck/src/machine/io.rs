//! The machine's vocabulary: what goes in ([`Input`], registrations and their ids), what
//! comes out ([`Event`]) and the errors of both.

use alloc::string::String;
use core::fmt;
use core::time::Duration;

use crate::phase::Phase;
use crate::signal::LifecycleSignal;
use crate::time::Instant;

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

/// A registered routes-ready report: a named part of the routes that says when it is ready
/// (`MuxAndDiscoveryComplete` waits for every one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoutesReadyId(pub(crate) u16);

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

impl RoutesReadyId {
    /// An id from its raw index, for fuzzers and reference-model tests. The machine rejects
    /// ids that were not registered with a typed error.
    #[must_use]
    pub const fn from_raw(index: u16) -> Self {
        RoutesReadyId(index)
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
    OsSignal,
    /// `request_shutdown()` from code; repeating it changes nothing.
    Api,
}

/// How a hand-over of the listening sockets to a successor process ended; see
/// [`Input::HandOverFinished`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandOverOutcome {
    /// The successor holds every listening socket and reported ready: this process
    /// terminates, through the same DAG as on SIGTERM.
    SuccessorReady,
    /// No successor took the sockets, or it went away or timed out before it was ready:
    /// this process keeps serving.
    Failed,
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
#[non_exhaustive]
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
    /// A routes-ready report came in: those routes are ready (idempotent).
    RoutesReady(RoutesReadyId),
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
    /// Hand the listening sockets to a successor process (a hot upgrade, asked for by a
    /// signal or from code). Legal before termination has started; the machine answers
    /// [`Event::HandOverListeners`] once every listener serves.
    HandOverRequested,
    /// The hand-over asked for by [`Event::HandOverListeners`] ended.
    HandOverFinished(HandOverOutcome),
}

/// An output of the machine; see [`Machine::poll_event`](crate::Machine::poll_event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A lifecycle signal fired. Log it (`[graceful-termination] shutdown event name=…`).
    Signal {
        /// Which.
        signal: LifecycleSignal,
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
    /// handlers learn it through
    /// [`Shared::signal_fired`](crate::Shared::signal_fired). Wait on the gate and send
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
    /// Send every listening socket to the successor and wait, bounded, for it to report
    /// ready, while this process keeps serving; report with [`Input::HandOverFinished`].
    HandOverListeners,
    /// The successor is ready with every listening socket: termination starts now
    /// ([`LifecycleSignal::ShutdownInitiated`] follows), as on SIGTERM. Log it.
    HandedOver,
    /// The hand-over failed: this process keeps serving, and a later hand-over may be
    /// asked for. Log why (the driver knows).
    HandOverFailed,
    /// Run every after-drain hook; report each with [`Input::HookFinished`].
    RunAfterDrainHooks,
    /// A hook failed or panicked; the process will exit 1 at the end.
    HookFailed {
        /// Which hook ([`Machine::hook_name`](crate::Machine::hook_name) names it).
        hook: HookId,
        /// How.
        outcome: HookOutcome,
    },
    /// A listener stopped before it was asked to; termination starts and the exit code
    /// will be 1.
    ListenerFailed(ListenerId),
    /// Run the destroy hooks, once, one after the other in registration order; report each
    /// with [`Input::HookFinished`]. [`Event::Exit`] follows once they have all finished, or
    /// [`DESTROY_HOOKS_TIMEOUT`](crate::machine::DESTROY_HOOKS_TIMEOUT) after this event, or at once on a second stop signal.
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
#[non_exhaustive]
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
#[non_exhaustive]
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
    /// No such routes-ready report.
    #[error("unknown routes-ready report {0:?}")]
    UnknownRoutesReady(RoutesReadyId),
    /// A hand-over was asked for while another one is under way.
    #[error("a hand-over is already under way")]
    HandOverInProgress,
    /// A hand-over was asked for after termination started.
    #[error("cannot hand the listeners over once termination has started")]
    HandOverAfterStop,
    /// A hand-over's end was reported, but none was under way.
    #[error("no hand-over is under way")]
    NoHandOver,
}

impl Input {
    /// The input's name, for errors.
    pub(crate) const fn name(&self) -> &'static str {
        match self {
            Input::Prepare => "Prepare",
            Input::Start => "Start",
            Input::ListenerServing(_) => "ListenerServing",
            Input::HookFinished { .. } => "HookFinished",
            Input::RoutesReady(_) => "RoutesReady",
            Input::StopRequested(_) => "StopRequested",
            Input::DrainProgress => "DrainProgress",
            Input::ListenerStopped(_) => "ListenerStopped",
            Input::ServerStopped(_) => "ServerStopped",
            Input::ConnectionsCut(_) => "ConnectionsCut",
            Input::HandOverRequested => "HandOverRequested",
            Input::HandOverFinished(_) => "HandOverFinished",
        }
    }
}
