//! The run loop: feeds the core lifecycle its inputs (reports from server tasks, hooks and
//! signals, drain notifications from the gate, its own deadlines) and turns every
//! [`Event`] it emits into its effect. It holds no policy: when to do what is decided by
//! [`lameduck::Machine`].

pub(crate) mod hooks;
pub(crate) mod os_signals;
pub(crate) mod report;
pub(crate) mod succession;

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use futures_channel::mpsc;
use futures_util::{FutureExt, StreamExt};
use lameduck::machine::{HookKind, InputError};
use lameduck::{
    Event, Input, Lifecycle, LifecycleSignal, LifecycleSignalFired, Phase, Prepared, Running,
    Shared, StdClock,
};

use lameduck::connection::CutKind;

use crate::connection::context::{ListenerContext, ServeControl, ServeTask};
use crate::logging;
use crate::run::hooks::{spawn_destroy_hooks, spawn_hooks, Hooks};
use crate::run::report::Report;
use crate::run::succession::{notify_systemd, Succession};
use crate::runtime::Runtime;

/// The running lifecycle and what its events act on.
pub(crate) struct RunLoop<R: Runtime> {
    lc: Lifecycle<Running>,
    shared: Arc<Shared>,
    runtime: R,
    clock: StdClock,
    /// The hooks not run yet.
    hooks: Hooks,
    /// The broadcast to the server tasks and their connections.
    control: Arc<ServeControl>,
    /// A clone for every task that reports back; the run loop holds the receiver.
    tx: mpsc::UnboundedSender<Input>,
    /// `HasBeenReady` fires in a request task (the first 200 from `/readyz`); the run loop
    /// logs it, once, while this is `Some`.
    has_been_ready: Option<LifecycleSignalFired>,
    /// The termination summary and the metrics.
    report: Report,
    /// Hand-overs to a successor, and the predecessor to tell once up.
    succession: Succession,
}

/// What woke the run loop.
enum Wake {
    /// A report from a task (`None`: every sender is gone).
    Input(Option<Input>),
    /// The gate notified: requests were released.
    Gate,
    /// `HasBeenReady` fired.
    Ready,
    /// The lifecycle's next deadline passed.
    Timer,
}

impl<R: Runtime> RunLoop<R> {
    /// Starts the lifecycle.
    pub(crate) fn start(
        lifecycle: Lifecycle<Prepared>,
        runtime: R,
        clock: StdClock,
        hooks: Hooks,
        control: Arc<ServeControl>,
        tx: mpsc::UnboundedSender<Input>,
    ) -> Self {
        let shared = Arc::clone(lifecycle.shared());
        logging::waiting_for_shutdown();
        let lc = lifecycle.start(clock.instant(runtime.now()));
        RunLoop {
            lc,
            shared,
            runtime,
            clock,
            hooks,
            control,
            tx,
            has_been_ready: None,
            report: Report::default(),
            succession: Succession::default(),
        }
    }

    /// Hands over with `succession`'s target and sockets, and reports to its predecessor.
    pub(crate) fn with_succession(mut self, succession: Succession) -> Self {
        self.succession = succession;
        self
    }

    /// Starts a server task with its [`ListenerContext`].
    pub(crate) fn spawn_server(&self, task: ServeTask<R>) {
        let ctx = ListenerContext::new(
            task.id,
            task.name,
            self.runtime.clone(),
            Arc::clone(&self.shared),
            Arc::clone(&self.control),
            self.tx.clone(),
        );
        self.runtime.spawn((task.serve)(ctx));
    }

    /// The current time on the core's clock.
    fn now(&self) -> lameduck::Instant {
        self.clock.instant(self.runtime.now())
    }

    /// Runs until the lifecycle exits; returns the exit code. `rx` receives what every task
    /// sends on the run loop's channel.
    pub(crate) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Input>) -> u8 {
        self.has_been_ready = Some(self.shared.signal_fired(LifecycleSignal::HasBeenReady));
        loop {
            while let Some(event) = self.lc.poll_event() {
                if let Some(code) = self.on_event(event) {
                    return code;
                }
            }
            self.succession.tell_predecessor_when_up(self.lc.machine());

            // Wait for an input, a deadline or a drain notification. The gate listener is
            // created before the machine re-checks the counts, so no release is missed.
            let draining = self.lc.phase() == Phase::Draining;
            let mut gate_listener = draining.then(|| self.shared.gate().listen());
            if draining {
                let now = self.now();
                let _ = self.lc.handle_input(Input::DrainProgress, now);
                if self.lc.machine().has_pending_events() {
                    continue;
                }
            }
            let deadline = self.lc.poll_timeout().map(|d| self.clock.to_std(d));
            let mut sleep = pin!(deadline.map(|d| self.runtime.sleep_until(d)));
            let has_been_ready = &mut self.has_been_ready;
            let woke = poll_fn(|cx| {
                // HasBeenReady first: it fired before anything queued behind it.
                if let Some(ready) = has_been_ready.as_mut() {
                    if ready.poll_unpin(cx).is_ready() {
                        *has_been_ready = None;
                        return Poll::Ready(Wake::Ready);
                    }
                }
                if let Poll::Ready(input) = rx.poll_next_unpin(cx) {
                    return Poll::Ready(Wake::Input(input));
                }
                if let Some(l) = gate_listener.as_mut() {
                    if l.poll_unpin(cx).is_ready() {
                        return Poll::Ready(Wake::Gate);
                    }
                }
                if let Some(s) = sleep.as_mut().as_pin_mut() {
                    if s.poll(cx).is_ready() {
                        return Poll::Ready(Wake::Timer);
                    }
                }
                Poll::Pending
            })
            .await;
            let now = self.now();
            let result = match woke {
                Wake::Input(Some(input)) => {
                    self.report.input(&input, self.lc.machine());
                    self.lc.handle_input(input, now)
                }
                // Every sender lives in this function too; cannot happen while it runs.
                Wake::Input(None) => Ok(()),
                Wake::Gate => self.lc.handle_input(Input::DrainProgress, now),
                Wake::Ready => {
                    let at = self
                        .shared
                        .fired_at(LifecycleSignal::HasBeenReady)
                        .unwrap_or(now);
                    self.log_signal(LifecycleSignal::HasBeenReady, at, now);
                    Ok(())
                }
                Wake::Timer => {
                    self.lc.handle_timeout(now);
                    Ok(())
                }
            };
            match result {
                Ok(()) => {}
                // The operator asked for it: say why nothing happens.
                Err(e @ (InputError::HandOverInProgress | InputError::HandOverAfterStop)) => {
                    logging::hand_over_failed(&e);
                }
                Err(e) => logging::input_ignored(&e),
            }
        }
    }

    /// Turns one event into its effect; `Some(code)` on [`Event::Exit`].
    fn on_event(&mut self, event: Event) -> Option<u8> {
        let now = self.now();
        self.report.event(&event, now, self.lc.machine());
        match event {
            Event::Signal { signal, at } => {
                // HasBeenReady can only fire before ShutdownInitiated; if it did and is not
                // logged yet, log it first so the log keeps the real order.
                if signal == LifecycleSignal::ShutdownInitiated
                    && self.has_been_ready.is_some()
                    && self.shared.has_fired(LifecycleSignal::HasBeenReady)
                {
                    self.has_been_ready = None;
                    let ready_at = self
                        .shared
                        .fired_at(LifecycleSignal::HasBeenReady)
                        .unwrap_or(at);
                    self.log_signal(LifecycleSignal::HasBeenReady, ready_at, now);
                }
                self.log_signal(signal, at, now);
                if signal == LifecycleSignal::ShutdownInitiated && self.shared.sockets_outlive() {
                    // Another process accepts on the sockets: this one stops, and drains.
                    self.succession.release_sockets();
                    self.control.accepting_elsewhere.set();
                }
            }
            Event::NotifyReady => notify_systemd(&[sd_notify::NotifyState::Ready]),
            Event::NotifyStopping => notify_systemd(&[sd_notify::NotifyState::Stopping]),
            Event::RunPostStartHooks => self.spawn_hooks(HookKind::PostStart),
            Event::RunPreShutdownHooks => self.spawn_hooks(HookKind::PreShutdown),
            Event::RunAfterDrainHooks => self.spawn_hooks(HookKind::AfterDrain),
            Event::DrainStarted(plan) => logging::drain_started(&plan),
            Event::DrainProgress {
                normal_in_flight,
                long_running_in_flight,
            } => logging::drain_progress(normal_in_flight, long_running_in_flight),
            Event::NormalDrainFinished {
                remaining,
                timed_out,
            } => logging::normal_drain_finished(
                remaining,
                timed_out,
                self.report.since_not_accepting(&self.shared, now),
            ),
            Event::LongRunningDrainFinished {
                before,
                after,
                timed_out,
                skipped,
            } => logging::long_running_drain_finished(
                before,
                after,
                timed_out,
                skipped,
                self.report.since_not_accepting(&self.shared, now),
            ),
            Event::StopListening { shutdown_deadline } => {
                logging::stopping_listeners(
                    shutdown_deadline.map(|d| d.saturating_duration_since(now)),
                );
                let spread = self.shared.config().idle_close_spread();
                if !spread.is_zero() {
                    logging::idle_close_spread(spread);
                }
                self.succession.release_sockets();
                self.control.stop.set();
            }
            Event::HandOverListeners => self.succession.start(&self.tx),
            Event::HandedOver => {
                logging::handed_over(self.succession.successor());
                self.succession.release_sockets();
            }
            // The reason was logged where the hand-over failed.
            Event::HandOverFailed => {}
            Event::HttpShutdownTimedOut => logging::http_shutdown_timed_out(),
            Event::ConnectionsCut(id) => {
                logging::connections_cut(self.lc.machine().listener_name(id).unwrap_or("?"));
            }
            Event::HookFailed { hook, outcome } => {
                let machine = self.lc.machine();
                logging::hook_failed(
                    machine.hook_name(hook).unwrap_or("?"),
                    machine.hook_kind(hook).map_or("?", HookKind::name),
                    outcome,
                );
            }
            Event::ListenerFailed(id) => {
                logging::listener_failed(self.lc.machine().listener_name(id).unwrap_or("?"));
            }
            Event::RunDestroyHooks => {
                logging::running_destroy_hooks();
                spawn_destroy_hooks(&self.runtime, &self.lc, &mut self.hooks, &self.tx);
            }
            Event::Exit { code, reason } => {
                self.report.warn_late_connections(&self.shared);
                // Connections past their bound that the exit closes were cut at it.
                let summary = self.report.summary(&self.shared);
                let gave_up = summary.requests_remaining + summary.streams_remaining > 0;
                let unregistered = if gave_up {
                    CutKind::UnreadResponse
                } else {
                    CutKind::RequestHead
                };
                for kind in self.control.bounds.take_passed(now, unregistered) {
                    self.shared.counters().count_connection_cut(kind);
                }
                logging::silent_peers(&self.shared.counters().peer_counts());
                logging::summary(&self.report.summary(&self.shared));
                logging::exiting(code, reason);
                return Some(code);
            }
            // An event a newer core adds (the enum is non-exhaustive): logged by the report
            // above, no effect here until this driver knows it.
            _ => {}
        }
        None
    }

    /// Logs (and records) that `signal` fired at `at`.
    fn log_signal(
        &mut self,
        signal: LifecycleSignal,
        at: lameduck::Instant,
        now: lameduck::Instant,
    ) {
        let elapsed = self.report.signal(signal, at, now);
        logging::signal(signal, elapsed);
        if signal == LifecycleSignal::NotAcceptingNewRequest {
            self.report.warn_late_connections(&self.shared);
        }
    }

    fn spawn_hooks(&mut self, kind: HookKind) {
        spawn_hooks(&self.runtime, &self.lc, kind, &mut self.hooks, &self.tx);
    }
}
