//! The health checks a lifecycle answers `/readyz`, `/livez` and `/healthz` with: the built-in
//! ones (`ping`, `shutdown`, one per post-start hook) and the user's.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Shared, NOT_YET};
use crate::health::{self, CheckOutcome, Endpoint, HealthQuery, HealthResponse, HealthTarget};
use crate::signal::LifecycleSignal;
use crate::sync::Ordering;
use crate::time::Instant;

/// A user health check: `Ok(())` when healthy, or the reason it is not.
pub type CheckFn = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Which endpoints a health check is installed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointSet(u8);

impl EndpointSet {
    /// `/readyz` only.
    pub const READYZ: EndpointSet = EndpointSet(1);
    /// `/livez` only.
    pub const LIVEZ: EndpointSet = EndpointSet(2);
    /// `/healthz` only.
    pub const HEALTHZ: EndpointSet = EndpointSet(4);
    /// All three, like kube-apiserver's `AddHealthChecks`.
    pub const ALL: EndpointSet = EndpointSet(7);

    /// The union of two sets.
    #[must_use]
    pub const fn union(self, other: EndpointSet) -> EndpointSet {
        EndpointSet(self.0 | other.0)
    }

    /// Whether `endpoint` is in the set.
    #[must_use]
    pub const fn contains(self, endpoint: Endpoint) -> bool {
        let bit = match endpoint {
            Endpoint::Readyz => 1,
            Endpoint::Livez => 2,
            Endpoint::Healthz => 4,
        };
        self.0 & bit != 0
    }
}

/// What a check consults.
pub(crate) enum CheckKind {
    Ping,
    /// Fails from `ShutdownInitiated` on.
    Shutdown,
    /// `poststarthook/<name>`: fails `not finished` until the hook returns.
    PostStartHook {
        slot: usize,
    },
    User(CheckFn),
}

pub(crate) struct Check {
    pub(crate) name: String,
    pub(crate) endpoints: EndpointSet,
    pub(crate) kind: CheckKind,
}

/// State of a post-start hook, as its health check sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PostStartState {
    Pending = 0,
    Succeeded = 1,
    Failed = 2,
}

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
                self.health_root(endpoint, &query, now)
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

    fn health_root(&self, endpoint: Endpoint, query: &HealthQuery, now: Instant) -> HealthResponse {
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
        if endpoint == Endpoint::Readyz && response.status == 200 {
            self.fire_unless(
                LifecycleSignal::HasBeenReady,
                LifecycleSignal::ShutdownInitiated,
                now,
            );
        }
        response
    }
}
