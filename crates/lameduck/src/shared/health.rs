//! The health answers of a lifecycle: its checks run for `/readyz`, `/livez` and `/healthz`.

use alloc::string::String;
use alloc::vec::Vec;

use super::checks::{Check, CheckKind, PostStartState};
use super::{Shared, NOT_YET};
use crate::health::{self, CheckOutcome, Endpoint, HealthQuery, HealthResponse, HealthTarget};
use crate::signal::LifecycleSignal;
use crate::sync::Ordering;
use crate::time::Instant;

impl Shared {
    pub(crate) fn set_post_start(&self, slot: usize, state: PostStartState) {
        if let Some(s) = self.post_start.get(slot) {
            s.store(state as u8, Ordering::Release);
        }
    }

    /// The names of the checks installed on `endpoint`, in evaluation order.
    pub fn check_names(&self, endpoint: Endpoint) -> impl Iterator<Item = &str> {
        self.checks
            .iter()
            .filter(move |c| c.endpoints.contains(endpoint))
            .map(|c| c.name.as_str())
    }

    fn run_check(&self, check: &Check, endpoint: Endpoint, now: Instant) -> Result<(), String> {
        match &check.kind {
            CheckKind::Ping => Ok(()),
            CheckKind::Shutdown => {
                if self.has_fired(LifecycleSignal::ShutdownInitiated) {
                    Err(String::from("process is shutting down"))
                } else {
                    Ok(())
                }
            }
            CheckKind::PostStartHook { slot } => {
                let state = self
                    .post_start
                    .get(*slot)
                    .map_or(PostStartState::Pending as u8, |s| s.load(Ordering::Acquire));
                if state == PostStartState::Succeeded as u8 {
                    return Ok(());
                }
                if endpoint == Endpoint::Livez && self.in_livez_grace(now) {
                    return Ok(());
                }
                if state == PostStartState::Failed as u8 {
                    Err(String::from("hook failed"))
                } else {
                    Err(String::from("not finished"))
                }
            }
            CheckKind::User(f) => f(),
        }
    }

    /// `now <= start + livez_grace_period` (kube-apiserver's `delayedHealthCheck`).
    fn in_livez_grace(&self, now: Instant) -> bool {
        match self.started_at.load(Ordering::Acquire) {
            NOT_YET => true,
            start => now <= Instant::from_nanos(start) + self.config.livez_grace_period(),
        }
    }

    /// Answers a health request: `path` as received, `query` the raw query string.
    ///
    /// Returns `None` when the path is not a health path. A 200 from the root `/readyz`
    /// fires [`LifecycleSignal::HasBeenReady`] the first time.
    #[must_use]
    pub fn health(&self, path: &str, query: Option<&str>, now: Instant) -> Option<HealthResponse> {
        let target = health::route(path)?;
        Some(match target {
            HealthTarget::Root(endpoint) => {
                let query = health::parse_query(query);
                self.health_root(endpoint, &query, now, Probe::Request)
            }
            HealthTarget::Check(endpoint, name) => {
                let check = self
                    .checks
                    .iter()
                    .find(|c| c.endpoints.contains(endpoint) && c.name == name);
                match check {
                    None => health::render_check(None),
                    Some(c) => {
                        let result = self.run_check(c, endpoint, now);
                        let outcome = CheckOutcome {
                            name: &c.name,
                            result: result.as_ref().map(|_| ()).map_err(String::as_str),
                        };
                        health::render_check(Some(&outcome))
                    }
                }
            }
        })
    }

    /// Whether the root `/readyz` would answer 200 now, for an adapter's own readiness
    /// reporting (the gRPC health service's status). It acts as a `/readyz` request does (a
    /// 200 fires [`LifecycleSignal::HasBeenReady`]) but is no probe: it is not counted in the
    /// probe period nor in the failed probes of [`crate::shared::counters::ArrivalCounts`].
    #[must_use]
    pub fn readyz_is_ready(&self, now: Instant) -> bool {
        let query = health::parse_query(None);
        self.health_root(Endpoint::Readyz, &query, now, Probe::Internal)
            .status
            == 200
    }

    fn health_root(
        &self,
        endpoint: Endpoint,
        query: &HealthQuery,
        now: Instant,
        probe: Probe,
    ) -> HealthResponse {
        let results: Vec<(&str, Result<(), String>)> = self
            .checks
            .iter()
            .filter(|c| c.endpoints.contains(endpoint))
            .map(|c| {
                let excluded = query.is_excluded(&c.name);
                // Excluded checks are not run, as in kube-apiserver.
                let r = if excluded {
                    Ok(())
                } else {
                    self.run_check(c, endpoint, now)
                };
                (c.name.as_str(), r)
            })
            .collect();
        let outcomes: Vec<CheckOutcome<'_>> = results
            .iter()
            .map(|(name, r)| CheckOutcome {
                name,
                result: r.as_ref().map(|_| ()).map_err(String::as_str),
            })
            .collect();
        let response = health::render_root(endpoint, &outcomes, query);
        if endpoint == Endpoint::Readyz {
            let shutting_down = self.has_fired(LifecycleSignal::ShutdownInitiated);
            if probe == Probe::Request {
                self.arrivals
                    .readyz_probe(now, shutting_down, response.status == 200);
            }
            if response.status == 200 {
                self.fire_unless(
                    LifecycleSignal::HasBeenReady,
                    LifecycleSignal::ShutdownInitiated,
                    now,
                );
            } else if !shutting_down {
                // A readiness probe said "not ready": requests from now until the first
                // "ready" are traffic before ready.
                self.arrivals
                    .not_ready_answer(|| self.has_fired(LifecycleSignal::HasBeenReady));
            }
        }
        response
    }
}

/// Who asks for `/readyz`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// A request: a balancer's or a kubelet's probe.
    Request,
    /// The adapter itself ([`Shared::readyz_is_ready`]).
    Internal,
}
