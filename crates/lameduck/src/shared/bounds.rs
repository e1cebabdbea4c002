//! Peers cannot hold a termination: how long a connection an adapter stopped may stay
//! whatever its peer does.
//!
//! The rule: a connection holds the exit only while it carries work in flight within that
//! work's own bound (a normal request within the request timeout, a long-running one within
//! the grace period). Without work in flight it is closed at most [`SILENT_PEER_TIMEOUT`]
//! after the adapter stopped it, or after its last work ended if that is later, whether or
//! not its peer takes the goodbye (acknowledges the GOAWAY's PING, finishes a TLS handshake,
//! sends the rest of a request head, reads a response). The adapters keep one timer per
//! stopped connection at [`Shared::connection_bound`] and count each connection closed there
//! ([`Counters::count_connection_cut`]); the termination summary reports the count and when
//! the last connection closed ([`Counters::peer_counts`]).
//!
//! [`Counters::count_connection_cut`]: super::counters::Counters::count_connection_cut
//! [`Counters::peer_counts`]: super::counters::Counters::peer_counts

use super::Shared;
use crate::connection::{ConnectionWork, SILENT_PEER_TIMEOUT};
use crate::signal::LifecycleSignal;
use crate::time::Instant;

impl Shared {
    /// When a connection the adapter stopped at `stopped_at` (it said goodbye: HTTP/1
    /// `Connection: close` or closed when idle, HTTP/2 the first GOAWAY; or, for a TLS
    /// connection, the handshake was still running) is to be closed whatever its peer does,
    /// given what it is doing: `None` when no bound applies (normal work with a request
    /// timeout of zero, which the user asked to be unbounded).
    ///
    /// - Without work in flight: [`SILENT_PEER_TIMEOUT`] after `stopped_at` or after the work
    ///   ended, whichever is later.
    /// - With work in flight: the work's own bound, at least [`SILENT_PEER_TIMEOUT`] after
    ///   `stopped_at`. Work admitted before the gate closed is bounded by the drain:
    ///   `NotAcceptingNewRequest` plus the request timeout (normal) or the grace period
    ///   (long-running), the very instant the drain stops waiting for it; work admitted after
    ///   it by its own deadline (`late_until`) plus [`SILENT_PEER_TIMEOUT`], so that its own
    ///   504 or abort comes first. Past its bound, the work's response has been aborted, or
    ///   its client stopped reading it: the connection is cut.
    ///
    /// Ask again whenever the work changes; the answer only depends on the arguments and on
    /// when `NotAcceptingNewRequest` fired (`stopped_at` stands for it before it fires).
    #[must_use]
    pub fn connection_bound(&self, stopped_at: Instant, work: ConnectionWork) -> Option<Instant> {
        match work {
            ConnectionWork::Idle { since } => {
                Some(core::cmp::max(stopped_at, since) + SILENT_PEER_TIMEOUT)
            }
            ConnectionWork::Busy {
                normal,
                long_running,
                late_until,
            } => {
                let config = self.config();
                let gate_closed = self
                    .fired_at(LifecycleSignal::NotAcceptingNewRequest)
                    .unwrap_or(stopped_at);
                // Work whose bound passed before the stop still gets the peer's second.
                let mut until = stopped_at + SILENT_PEER_TIMEOUT;
                if normal {
                    let timeout = config.request_timeout();
                    if timeout.is_zero() {
                        return None;
                    }
                    until = core::cmp::max(until, gate_closed + timeout);
                }
                if long_running {
                    let grace = config.shutdown_watch_termination_grace_period();
                    until = core::cmp::max(until, gate_closed + grace);
                }
                if let Some(late) = late_until {
                    // Its own deadline answers first (504, or the aborted response).
                    until = core::cmp::max(until, late + SILENT_PEER_TIMEOUT);
                }
                Some(until)
            }
        }
    }

    /// When a connection that reached its [maximum age](crate::Config::max_connection_age)
    /// at `aged_at` (the adapter then said goodbye: HTTP/1 `Connection: close` on its next
    /// response, or closed it when idle; HTTP/2 the first GOAWAY) is to be closed whatever
    /// its peer does: without work in flight, [`SILENT_PEER_TIMEOUT`] after `aged_at` or
    /// after the work ended; with work in flight, at the end of
    /// [`Config::max_connection_age_grace`](crate::Config::max_connection_age_grace) (`None`
    /// when the grace is zero: the requests keep only their own bounds). Should the lifecycle
    /// stop the connection too, the earlier of this and [`Shared::connection_bound`] applies.
    #[must_use]
    pub fn aged_connection_bound(&self, aged_at: Instant, work: ConnectionWork) -> Option<Instant> {
        match work {
            ConnectionWork::Idle { since } => {
                Some(core::cmp::max(aged_at, since) + SILENT_PEER_TIMEOUT)
            }
            ConnectionWork::Busy { .. } => {
                let grace = self.config().max_connection_age_grace();
                (!grace.is_zero()).then(|| aged_at + grace)
            }
        }
    }
}
