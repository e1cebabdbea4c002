//! The machine's timers: one deadline slot per kind, as quinn-proto's `TimerTable`.

use crate::time::Instant;

/// The machine's timers, one deadline slot each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
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
    pub(super) const COUNT: usize = 7;
}

/// One optional deadline per [`Timer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct TimerTable([Option<Instant>; Timer::COUNT]);

impl TimerTable {
    pub(super) fn set(&mut self, timer: Timer, at: Option<Instant>) {
        self.0[timer as usize] = at;
    }

    pub(super) fn stop(&mut self, timer: Timer) {
        self.0[timer as usize] = None;
    }

    pub(super) fn is_armed(&self, timer: Timer) -> bool {
        self.0[timer as usize].is_some()
    }

    pub(super) fn is_due(&self, timer: Timer, now: Instant) -> bool {
        self.0[timer as usize].is_some_and(|d| d <= now)
    }

    pub(super) fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }

    pub(super) fn clear(&mut self) {
        self.0 = [None; Timer::COUNT];
    }
}
