//! The health checks a lifecycle answers `/readyz`, `/livez` and `/healthz` with: the built-in
//! ones (`ping`, `shutdown`, one per post-start hook) and the user's. (Running them is in
//! `health.rs`.)

use alloc::boxed::Box;
use alloc::string::String;

use crate::health::Endpoint;

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
