//! What the run loop reports besides the effects of events: the termination summary it logs
//! at the exit, and (feature `metrics`) the lifecycle's series at every event. Nothing here
//! runs per request; the run loop calls it for each input it receives and each event the
//! machine emits.

use std::time::Duration;

use lameduck::summary::{SummaryRecord, TerminationSummary};
use lameduck::{Event, Input, Instant, LifecycleSignal, Machine, Shared};

/// The run loop's observer: it follows the termination to summarise it, and records metrics.
#[derive(Debug, Default)]
pub(crate) struct Report {
    summary: TerminationSummary,
    /// Whether the late-connections warning was logged.
    warned_late: bool,
}

impl Report {
    /// Notes an input the run loop hands the machine.
    pub(crate) fn input(&mut self, input: &Input, machine: &Machine) {
        self.summary.observe_input(input);
        #[cfg(feature = "metrics")]
        if let Input::HookFinished { hook, outcome } = *input {
            if let (Some(kind), Some(name)) = (machine.hook_kind(hook), machine.hook_name(hook)) {
                lameduck::metrics::record_hook(kind, name, outcome);
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = machine;
    }

    /// Notes an event the machine emitted, handled at `now`.
    pub(crate) fn event(&mut self, event: &Event, now: Instant, machine: &Machine) {
        let kind = match event {
            Event::HookFailed { hook, .. } => machine.hook_kind(*hook),
            _ => None,
        };
        self.summary.observe(event, now, kind);
        #[cfg(feature = "metrics")]
        {
            if let Some(shared) = machine.shared() {
                lameduck::metrics::record_state(shared);
            }
            match *event {
                Event::DrainStarted(plan) => lameduck::metrics::record_drain_remaining(
                    plan.normal_in_flight,
                    plan.long_running_in_flight,
                ),
                Event::DrainProgress {
                    normal_in_flight,
                    long_running_in_flight,
                } => lameduck::metrics::record_drain_remaining(
                    normal_in_flight,
                    long_running_in_flight,
                ),
                Event::NormalDrainFinished { .. }
                | Event::LongRunningDrainFinished { .. }
                | Event::Exit { .. } => {
                    let record = match machine.shared() {
                        Some(shared) => self.summary.record_shared(shared),
                        None => self.summary.record(Default::default(), Default::default()),
                    };
                    lameduck::metrics::record_summary(&record);
                }
                _ => {}
            }
        }
    }

    /// Notes that `signal` fired at `at` (logged at `now`); returns the time since
    /// `ShutdownInitiated` for the log line, for the signals after it.
    pub(crate) fn signal(
        &mut self,
        signal: LifecycleSignal,
        at: Instant,
        now: Instant,
    ) -> Option<Duration> {
        #[cfg(feature = "metrics")]
        {
            let unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .saturating_sub(now.saturating_duration_since(at));
            lameduck::metrics::record_signal(signal, unix.as_secs_f64());
        }
        #[cfg(not(feature = "metrics"))]
        let _ = now;
        match signal {
            LifecycleSignal::ShutdownInitiated
            | LifecycleSignal::HasBeenReady
            | LifecycleSignal::MuxAndDiscoveryComplete => None,
            _ => self.summary.since_initiated(at),
        }
    }

    /// The time from `NotAcceptingNewRequest` to `now`, for the drain lines.
    pub(crate) fn since_not_accepting(&self, shared: &Shared, now: Instant) -> Option<Duration> {
        shared
            .fired_at(LifecycleSignal::NotAcceptingNewRequest)
            .map(|at| now.saturating_duration_since(at))
    }

    /// The summary of the termination, with the rejection and arrival counts of `shared`.
    pub(crate) fn summary(&self, shared: &Shared) -> SummaryRecord {
        self.summary.record_shared(shared)
    }

    /// Logs the late-connections warning once, if connections arrived late: called at
    /// `NotAcceptingNewRequest`, and at the exit for those accepted after it.
    pub(crate) fn warn_late_connections(&mut self, shared: &Shared) {
        let arrivals = shared.counters().arrivals();
        if !self.warned_late && arrivals.has_late_connections() {
            self.warned_late = true;
            crate::logging::late_connections(&arrivals, shared.config());
        }
    }
}
