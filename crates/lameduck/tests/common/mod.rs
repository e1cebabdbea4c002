//! Scenario-test conveniences over [`lameduck::sim::Simulator`]: inputs that must be legal
//! are unwrapped, so a test fails at the first illegal one.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use lameduck::machine::{HookId, HookOutcome};
use lameduck::sim::Simulator;
use lameduck::trace::TraceSummary;
use lameduck::{Config, Input, Instant, LifecycleSignal, Machine, ShutdownMode};

/// The configuration of `mode` with the shutdown delay `delay`.
pub fn config(mode: ShutdownMode, delay: Duration) -> Config {
    Config::builder()
        .shutdown_send_retry_after(mode == ShutdownMode::SendRetryAfter)
        .shutdown_delay(delay)
        .build()
        .expect("valid")
}

/// A [`Simulator`] whose inputs are expected to be legal.
pub struct Sim(pub Simulator);

impl Deref for Sim {
    type Target = Simulator;
    fn deref(&self) -> &Simulator {
        &self.0
    }
}

impl DerefMut for Sim {
    fn deref_mut(&mut self) -> &mut Simulator {
        &mut self.0
    }
}

impl Sim {
    /// One listener `api` serving at T+0, after `setup` registered more.
    pub fn serving(config: Config, setup: impl FnOnce(&mut Machine)) -> Sim {
        Sim(Simulator::serving(config, setup).expect("starts"))
    }

    pub fn input(&mut self, input: Input) {
        self.0.input(input).expect("legal input");
    }

    pub fn stop(&mut self) {
        self.0.stop().expect("legal stop");
    }

    pub fn finish_hook(&mut self, hook: HookId, outcome: HookOutcome) {
        self.0
            .finish_hook(hook, outcome)
            .expect("legal hook report");
    }

    pub fn fired_at(&self, signal: LifecycleSignal) -> Option<Instant> {
        self.0.machine.fired_at(signal)
    }

    pub fn shared(&self) -> std::sync::Arc<lameduck::Shared> {
        self.0.shared().expect("prepared")
    }

    /// The trace so far is legal for the reference model.
    pub fn check(&self) -> TraceSummary {
        self.0.check_trace().expect("trace is legal")
    }
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}
