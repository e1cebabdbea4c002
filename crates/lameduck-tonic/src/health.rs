//! `grpc.health.v1` driven by the lifecycle: tonic-health's reporter says `SERVING` while the
//! server's `/readyz` would answer 200 and `NOT_SERVING` from `ShutdownInitiated` on, for
//! the empty service name (the whole server) and for every service named.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::FutureExt;
use lameduck::{LifecycleSignal, Shared, StdClock};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// How often readiness is re-evaluated while serving (a post-start hook finishing, a user
/// check changing). `ShutdownInitiated` is not polled for: it is reported at once.
pub const READINESS_INTERVAL: Duration = Duration::from_millis(250);

/// Drives a [`HealthReporter`] from the lifecycle: `SERVING` while the server's `/readyz`
/// would answer 200, `NOT_SERVING` from `ShutdownInitiated` on, for the empty service name
/// and every service named. Made by
/// [`Grpc::health`](crate::Grpc::health); [`HealthDriver::run`] is the task.
#[derive(Clone, Debug)]
pub struct HealthDriver {
    reporter: HealthReporter,
    services: Vec<String>,
    shared: Arc<Shared>,
    clock: StdClock,
}

impl HealthDriver {
    /// A driver of `reporter` for `shared`'s lifecycle (`clock` as the server's), reporting
    /// the empty service name and `services`. Sets their status at once, so that no call is
    /// answered from tonic-health's initial state.
    #[must_use]
    pub fn new(
        reporter: HealthReporter,
        services: impl IntoIterator<Item = impl Into<String>>,
        shared: Arc<Shared>,
        clock: StdClock,
    ) -> Self {
        let mut names = vec![String::new()];
        for s in services {
            let s = s.into();
            if !names.contains(&s) {
                names.push(s);
            }
        }
        let driver = HealthDriver {
            reporter,
            services: names,
            shared,
            clock,
        };
        // The reporter's lock is free before serving: this completes on its first poll.
        let _ = driver.set_all(driver.status_now()).now_or_never();
        driver
    }

    /// The status the lifecycle says now: `SERVING` when `/readyz` answers 200.
    fn status_now(&self) -> ServingStatus {
        if self.shared.has_fired(LifecycleSignal::ShutdownInitiated) {
            return ServingStatus::NotServing;
        }
        let now = self.clock.instant(tokio::time::Instant::now().into_std());
        // Not a probe: the balancer's probes are the gRPC health checks it sends.
        if self.shared.readyz_is_ready(now) {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    }

    async fn set_all(&self, status: ServingStatus) {
        for name in &self.services {
            self.reporter.set_service_status(name, status).await;
        }
    }

    /// The task: re-evaluates readiness every [`READINESS_INTERVAL`] and sets `NOT_SERVING`
    /// as soon as `ShutdownInitiated` fires; returns then.
    pub async fn run(self) {
        let mut shutdown = pin!(self.shared.signal_fired(LifecycleSignal::ShutdownInitiated));
        let mut last = None;
        loop {
            let status = self.status_now();
            if last != Some(status) {
                self.set_all(status).await;
                last = Some(status);
            }
            let tick = pin!(tokio::time::sleep(READINESS_INTERVAL));
            if let Either::Left(_) = select(shutdown.as_mut(), tick).await {
                break;
            }
        }
        self.set_all(ServingStatus::NotServing).await;
        tracing::info!(
            "grpc.health.v1: NOT_SERVING for {} service name(s) from ShutdownInitiated",
            self.services.len()
        );
    }

    /// Runs [`HealthDriver::run`] on the current tokio runtime.
    pub fn spawn(self) {
        tokio::spawn(self.run());
    }
}
