//! The DAG: every signal and event the facts allow at `now`, computed in one place
//! (`Machine::advance`), with the drains, the wait for the servers and the exit.

use super::io::{DrainPlan, Event, ExitReason, HookKind};
use super::timer::Timer;
use super::{
    pacing_interval, DrainState, Hook, HookState, ListenerState, Machine, ServerWait, StopRequest,
    CONNECTION_CLOSE_LINGER, DESTROY_HOOKS_TIMEOUT, DRAIN_PROGRESS_INTERVAL,
};
use crate::config::ShutdownMode;
use crate::phase::Progress;
use crate::shared::Shared;
use crate::signal::LifecycleSignal;
use crate::time::Instant;

impl Machine {
    fn fire(&mut self, signal: LifecycleSignal, now: Instant) {
        let Some(shared) = &self.shared else { return };
        if shared.fire(signal, now) {
            self.events.push_back(Event::Signal { signal, at: now });
        }
    }

    fn timer_due(&self, t: Timer, now: Instant) -> bool {
        self.timers.is_due(t, now)
    }

    pub(super) fn hooks_of(&self, kind: HookKind) -> impl Iterator<Item = &Hook> {
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
    ///
    /// The signals' edges are also written in `trace::predecessors`, the reference model
    /// that `check_trace` applies to any observed trace. The two forms are kept apart on
    /// purpose: an oracle derived from this code would agree with it by construction, so a
    /// wrong edge here would pass every test. `tests/dag_edges.rs` checks them against each
    /// other instead (every listed predecessor fires first, each is required, and this code
    /// adds none).
    pub(super) fn advance(&mut self, now: Instant) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let gate = shared.gate();
        let fired = |s: LifecycleSignal| shared.has_fired(s);
        // A hand-over asked for before serving is dropped once termination starts.
        self.start_pending_hand_over();

        // Start-up.
        if !fired(LifecycleSignal::MuxAndDiscoveryComplete)
            && !fired(LifecycleSignal::ShutdownInitiated)
            && self.stop == StopRequest::NotRequested
            && self.routes_ready_flags.iter().all(|f| *f)
        {
            self.fire(LifecycleSignal::MuxAndDiscoveryComplete, now);
        }
        if !shared.has_progressed(Progress::Serving)
            && self.listeners.iter().all(|l| l.has_served())
        {
            shared.record_progress(Progress::Serving);
            self.events.push_back(Event::NotifyReady);
            if self.start_hooks(HookKind::PostStart) {
                self.events.push_back(Event::RunPostStartHooks);
            }
            self.start_pending_hand_over();
        }

        // The lame-duck window.
        if self.stop != StopRequest::NotRequested && !fired(LifecycleSignal::ShutdownInitiated) {
            self.fire(LifecycleSignal::ShutdownInitiated, now);
            if shared.sockets_outlive() {
                // Clients move to the process that keeps the sockets during the delay.
                shared.end_keep_alive();
            }
            self.events.push_back(Event::NotifyStopping);
            self.timers.set(
                Timer::ShutdownDelay,
                Some(now + self.config.shutdown_delay()),
            );
            if self.start_hooks(HookKind::PreShutdown) {
                self.events.push_back(Event::RunPreShutdownHooks);
            }
        }
        if fired(LifecycleSignal::ShutdownInitiated)
            && !fired(LifecycleSignal::AfterShutdownDelayDuration)
            && self.timer_due(Timer::ShutdownDelay, now)
        {
            self.timers.stop(Timer::ShutdownDelay);
            self.fire(LifecycleSignal::AfterShutdownDelayDuration, now);
        }
        if fired(LifecycleSignal::ShutdownInitiated)
            && !fired(LifecycleSignal::PreShutdownHooksStopped)
            && self.all_done(HookKind::PreShutdown)
        {
            self.fire(LifecycleSignal::PreShutdownHooksStopped, now);
        }

        // Stop accepting.
        if fired(LifecycleSignal::AfterShutdownDelayDuration)
            && fired(LifecycleSignal::PreShutdownHooksStopped)
            && !fired(LifecycleSignal::NotAcceptingNewRequest)
        {
            self.begin_drain(&shared, now);
        }

        // The drains.
        if fired(LifecycleSignal::NotAcceptingNewRequest)
            && !fired(LifecycleSignal::InFlightRequestsDrained)
        {
            if let DrainState::Running { .. } = self.normal_drain {
                let timed_out = self.timer_due(Timer::NormalDrain, now);
                if gate.normal_drained() || timed_out {
                    self.normal_drain = DrainState::Finished;
                    self.timers.stop(Timer::NormalDrain);
                    self.events.push_back(Event::NormalDrainFinished {
                        remaining: gate.normal_in_flight(),
                        timed_out: timed_out && !gate.normal_drained(),
                    });
                }
            }
            if let DrainState::Running { before } = self.long_running_drain {
                let timed_out = self.timer_due(Timer::LongRunningDrain, now);
                if gate.long_running_drained() || timed_out {
                    self.long_running_drain = DrainState::Finished;
                    self.timers.stop(Timer::LongRunningDrain);
                    self.events.push_back(Event::LongRunningDrainFinished {
                        before,
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
            if self.normal_drain == DrainState::Finished
                && self.long_running_drain == DrainState::Finished
            {
                self.timers.stop(Timer::DrainProgress);
                self.fire(LifecycleSignal::InFlightRequestsDrained, now);
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
            && !fired(LifecycleSignal::HTTPServerStoppedListening)
            && self.listeners.iter().all(|l| l.is_stopped())
        {
            self.fire(LifecycleSignal::HTTPServerStoppedListening, now);
        }
        if matches!(self.server_wait, ServerWait::Waiting | ServerWait::TimedOut)
            && self
                .listeners
                .iter()
                .all(|l| matches!(l, ListenerState::ServerStopped { .. }))
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
            && fired(LifecycleSignal::InFlightRequestsDrained)
            && fired(LifecycleSignal::HTTPServerStoppedListening)
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
        let Some(n) = self.fired_at(LifecycleSignal::NotAcceptingNewRequest) else {
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
        // long-running handler woken by the signal must already find its paced turn.
        let gate = shared.gate();
        let (normal, long_running) = gate.close();
        shared.end_keep_alive();
        self.normal_drain = DrainState::Running { before: normal };
        self.long_running_drain = DrainState::Running {
            before: long_running,
        };
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
        self.fire(LifecycleSignal::NotAcceptingNewRequest, now);
        if grace.is_zero() {
            // Not waited for (kube-apiserver: "not going to wait for active watch
            // request(s) to drain"). They are still told to end through the signal.
            self.long_running_drain = DrainState::Finished;
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

    pub(super) fn exit(&mut self, code: u8, reason: ExitReason) {
        if let Some(shared) = &self.shared {
            shared.record_progress(Progress::Exited);
        }
        self.timers.clear();
        self.events.push_back(Event::Exit { code, reason });
    }
}
