//! What the layer counts: retries by reason, retryable failures returned because the attempts
//! ran out, and retryable failures returned without a retry (and why), through the `metrics`
//! facade and in a [`RetryStats`] the application can read.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `lameduck_client_retries_total{reason}`: retries made.
pub const RETRIES_TOTAL: &str = "lameduck_client_retries_total";
/// `lameduck_client_retries_exhausted_total{reason}`: retryable failures returned because
/// the request had used its attempts.
pub const EXHAUSTED_TOTAL: &str = "lameduck_client_retries_exhausted_total";
/// `lameduck_client_retries_skipped_total{reason,why}`: retryable failures returned without
/// a retry for another reason (the budget, the body, the method, the wait).
pub const SKIPPED_TOTAL: &str = "lameduck_client_retries_skipped_total";

/// Why a request was retried: what the server (or the connection) said about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RetryReason {
    /// Never sent: hyper cancelled it on a connection that was closing.
    Unsent,
    /// HTTP/2: refused by a GOAWAY (a stream above its last-stream-id, or one opened as it came).
    Refused,
    /// HTTP/2: the server reset the stream with `REFUSED_STREAM`.
    RefusedStream,
    /// The connection could not be opened (refused): nothing was sent.
    Connect,
    /// The connection closed or was reset before the response's head (idempotent or marked
    /// requests only).
    Closed,
    /// `429` or `503` with `Retry-After`.
    RetryAfter,
    /// gRPC `UNAVAILABLE` with `grpc-retry-pushback-ms`.
    Pushback,
}

impl RetryReason {
    /// Every reason, in the order of [`RetryStats::retries_by_reason`].
    pub const ALL: [RetryReason; 7] = [
        RetryReason::Unsent,
        RetryReason::Refused,
        RetryReason::RefusedStream,
        RetryReason::Connect,
        RetryReason::Closed,
        RetryReason::RetryAfter,
        RetryReason::Pushback,
    ];

    /// The reason's label in the metrics (`unsent`, `refused`, `refused_stream`, `connect`,
    /// `closed`, `retry_after`, `pushback`).
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryReason::Unsent => "unsent",
            RetryReason::Refused => "refused",
            RetryReason::RefusedStream => "refused_stream",
            RetryReason::Connect => "connect",
            RetryReason::Closed => "closed",
            RetryReason::RetryAfter => "retry_after",
            RetryReason::Pushback => "pushback",
        }
    }

    /// Whether the server provably did not process the request, so that any method may be
    /// sent again (RFC 9113 section 8.7); otherwise only idempotent or marked requests are.
    pub const fn unprocessed(self) -> bool {
        matches!(
            self,
            RetryReason::Unsent
                | RetryReason::Refused
                | RetryReason::RefusedStream
                | RetryReason::Connect
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a retryable failure was returned without a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// The retry budget was empty.
    Budget,
    /// The request's body cannot be sent again (a stream, or over the body limit).
    Body,
    /// The method is not idempotent and the request was not marked [`Retryable`](crate::Retryable).
    NotIdempotent,
    /// The server asked for a longer wait than the configured maximum.
    WaitTooLong,
}

impl SkipReason {
    /// Every reason, in the order of [`RetryStats::skipped_by_reason`].
    pub const ALL: [SkipReason; 4] = [
        SkipReason::Budget,
        SkipReason::Body,
        SkipReason::NotIdempotent,
        SkipReason::WaitTooLong,
    ];

    /// The reason's `why` label in the metrics (`budget`, `body`, `not_idempotent`,
    /// `wait_too_long`).
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::Budget => "budget",
            SkipReason::Body => "body",
            SkipReason::NotIdempotent => "not_idempotent",
            SkipReason::WaitTooLong => "wait_too_long",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Default)]
struct Counters {
    retries: [AtomicU64; 7],
    exhausted: [AtomicU64; 7],
    skipped: [AtomicU64; 4],
}

/// The counts of one [`RetryLayer`](crate::RetryLayer) and of every service it made, shared by
/// their clones: the same counts as the metrics, readable without a metrics recorder. Touched
/// only when a failure is retryable, never on a request that needs no retry.
#[derive(Clone, Default)]
pub struct RetryStats {
    counters: Arc<Counters>,
}

impl RetryStats {
    /// Retries made for `reason`.
    pub fn retries(&self, reason: RetryReason) -> u64 {
        self.counters.retries[reason.index()].load(Ordering::Relaxed)
    }

    /// Retries made, by reason (every reason, in [`RetryReason::ALL`]'s order).
    pub fn retries_by_reason(&self) -> Vec<(RetryReason, u64)> {
        RetryReason::ALL
            .iter()
            .map(|&r| (r, self.retries(r)))
            .collect()
    }

    /// Retryable failures for `reason` returned because the request had used its attempts.
    pub fn exhausted(&self, reason: RetryReason) -> u64 {
        self.counters.exhausted[reason.index()].load(Ordering::Relaxed)
    }

    /// Retryable failures returned without a retry, by why (every reason, in
    /// [`SkipReason::ALL`]'s order).
    pub fn skipped_by_reason(&self) -> Vec<(SkipReason, u64)> {
        SkipReason::ALL
            .iter()
            .map(|&s| (s, self.counters.skipped[s as usize].load(Ordering::Relaxed)))
            .collect()
    }

    pub(crate) fn retried(&self, reason: RetryReason) {
        self.counters.retries[reason.index()].fetch_add(1, Ordering::Relaxed);
        metrics::counter!(RETRIES_TOTAL, "reason" => reason.as_str()).increment(1);
    }

    pub(crate) fn exhaust(&self, reason: RetryReason) {
        self.counters.exhausted[reason.index()].fetch_add(1, Ordering::Relaxed);
        metrics::counter!(EXHAUSTED_TOTAL, "reason" => reason.as_str()).increment(1);
    }

    pub(crate) fn skip(&self, reason: RetryReason, why: SkipReason) {
        self.counters.skipped[why as usize].fetch_add(1, Ordering::Relaxed);
        metrics::counter!(SKIPPED_TOTAL, "reason" => reason.as_str(), "why" => why.as_str())
            .increment(1);
    }
}

impl fmt::Debug for RetryStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryStats")
            .field("retries", &self.retries_by_reason())
            .field("skipped", &self.skipped_by_reason())
            .finish()
    }
}

/// Describes the layer's three series to the installed `metrics` recorder (call it once,
/// after installing the recorder): `lameduck_client_retries_total{reason}`,
/// `lameduck_client_retries_exhausted_total{reason}` and
/// `lameduck_client_retries_skipped_total{reason,why}`.
pub fn describe_metrics() {
    metrics::describe_counter!(
        RETRIES_TOTAL,
        "Requests sent again by lameduck-client, by reason (what the server or the connection said)."
    );
    metrics::describe_counter!(
        EXHAUSTED_TOTAL,
        "Retryable failures returned to the caller because the request had used its attempts."
    );
    metrics::describe_counter!(
        SKIPPED_TOTAL,
        "Retryable failures returned without a retry: budget, body, not_idempotent or wait_too_long."
    );
}
