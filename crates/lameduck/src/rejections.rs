//! Counts of the requests the lifecycle turned away, by reason.
//!
//! The counting happens on the rejection paths only (a closed gate, a request timeout, an
//! unknown path before the routes are ready), never on the path of a served request, so it
//! costs a request that is served nothing. The counts feed the exit summary
//! (`summary::TerminationSummary`, feature `summary`) and, with the `metrics`
//! feature, the `lameduck_rejected_requests_total` counter.

use core::fmt;

use crate::gate::Rejection;
use crate::sync::{AtomicU64, Ordering};

/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectionReason {
    /// Close-listener mode: the gate was closed (`NotAcceptingNewRequest`); answered 503 with
    /// `Retry-After: 1`.
    NotAccepting,
    /// Retry-after mode: the gate was closed; answered 429 with `Retry-After: 5`.
    RetryAfter,
    /// A normal request ran past `request_timeout`: answered 504, or its response aborted if
    /// it had begun.
    RequestTimeout,
    /// An unknown path before `MuxAndDiscoveryComplete`: answered 503 with `Retry-After: 5`.
    RoutesNotReady,
}

impl RejectionReason {
    /// Every reason, in the order of [`RejectionReason::index`].
    pub const ALL: [RejectionReason; 4] = [
        RejectionReason::NotAccepting,
        RejectionReason::RetryAfter,
        RejectionReason::RequestTimeout,
        RejectionReason::RoutesNotReady,
    ];

    /// The reason's label: `not_accepting`, `retry_after`, `request_timeout` or
    /// `routes_not_ready` (the `reason` label of `lameduck_rejected_requests_total`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            RejectionReason::NotAccepting => "not_accepting",
            RejectionReason::RetryAfter => "retry_after",
            RejectionReason::RequestTimeout => "request_timeout",
            RejectionReason::RoutesNotReady => "routes_not_ready",
        }
    }

    /// The reason's position in [`RejectionReason::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl From<Rejection> for RejectionReason {
    fn from(rejection: Rejection) -> Self {
        match rejection {
            Rejection::NotAccepting => RejectionReason::NotAccepting,
            Rejection::RetryAfter => RejectionReason::RetryAfter,
        }
    }
}

impl fmt::Display for RejectionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many requests were turned away, by reason; see
/// [`Counters::rejections`](crate::shared::counters::Counters::rejections).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RejectionCounts {
    counts: [u64; 4],
}

impl RejectionCounts {
    /// The count for `reason`.
    #[must_use]
    pub const fn get(&self, reason: RejectionReason) -> u64 {
        self.counts[reason.index()]
    }

    /// The sum over every reason.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Counts with `reason` set to `count` (for tests and parsers).
    #[must_use]
    pub const fn with(mut self, reason: RejectionReason, count: u64) -> Self {
        self.counts[reason.index()] = count;
        self
    }
}

/// The live counters, one per reason.
pub(crate) struct RejectionCounters([AtomicU64; 4]);

impl RejectionCounters {
    pub(crate) fn new() -> Self {
        RejectionCounters(core::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// Counts one rejection. `Relaxed`: the counts publish nothing else.
    #[cold]
    #[inline(never)]
    pub(crate) fn count(&self, reason: RejectionReason) {
        self.0[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RejectionCounts {
        RejectionCounts {
            counts: core::array::from_fn(|i| self.0[i].load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_reason() {
        let c = RejectionCounters::new();
        c.count(RejectionReason::RetryAfter);
        c.count(RejectionReason::RetryAfter);
        c.count(RejectionReason::RoutesNotReady);
        let s = c.snapshot();
        assert_eq!(s.get(RejectionReason::RetryAfter), 2);
        assert_eq!(s.get(RejectionReason::RoutesNotReady), 1);
        assert_eq!(s.get(RejectionReason::NotAccepting), 0);
        assert_eq!(s.total(), 3);
        for (i, r) in RejectionReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        assert_eq!(
            RejectionReason::from(Rejection::NotAccepting),
            RejectionReason::NotAccepting
        );
    }
}
