//! Reports new connections and requests to the lifecycle's record of arrivals
//! ([`Counters::arrivals`](lameduck::shared::counters::Counters::arrivals)): when they came during a
//! termination, which were late, and the requests that came while `/readyz` said "not
//! ready". Every adapter calls these at each accepted connection and each admitted request
//! (health and metrics aside); they cost one relaxed load unless the lifecycle watches
//! arrivals, and read the clock only then.
//!
//! A connection counts as new traffic only once it carries a request other than health and
//! metrics: a balancer's health checks open connections too (HAProxy one per check, a
//! Kubernetes probe likewise), and they must not make a correctly configured balancer look
//! late. So the instant a connection arrives is kept in the connection
//! ([`ConnectionArrival`]) and reported with its first such request.

use std::sync::atomic::{AtomicU64, Ordering};

use lameduck::shared::counters::RequestArrival;
use lameduck::{Instant, Shared, StdClock};

use crate::logging;
use crate::runtime::Runtime;

/// When a connection arrived while the lifecycle watched arrivals, kept in the connection
/// until its first request other than health and metrics reports it
/// ([`Counters::note_connection`](lameduck::shared::counters::Counters::note_connection)).
#[derive(Debug)]
pub struct ConnectionArrival {
    /// The instant's nanoseconds plus one; 0 once reported.
    accepted: AtomicU64,
}

impl ConnectionArrival {
    /// The arrival of a connection accepted now, if the lifecycle watches arrivals (one
    /// relaxed load otherwise).
    #[inline]
    pub fn accepted<R: Runtime>(
        shared: &Shared,
        clock: StdClock,
        runtime: &R,
    ) -> Option<ConnectionArrival> {
        if shared.counters().watching_arrivals() {
            Some(Self::accepted_now(clock, runtime))
        } else {
            None
        }
    }

    #[cold]
    #[inline(never)]
    fn accepted_now<R: Runtime>(clock: StdClock, runtime: &R) -> ConnectionArrival {
        let at = clock.instant(runtime.now());
        ConnectionArrival {
            accepted: AtomicU64::new(at.as_nanos().saturating_add(1)),
        }
    }

    /// A request other than health and metrics came on the connection: the first one reports
    /// the connection's arrival.
    #[inline]
    pub fn first_request(&self, shared: &Shared) {
        if self.accepted.load(Ordering::Relaxed) != 0 {
            let nanos = self.accepted.swap(0, Ordering::Relaxed);
            if nanos != 0 {
                shared
                    .counters()
                    .note_connection(Instant::from_nanos(nanos - 1));
            }
        }
    }
}

/// A request (health and metrics aside) arrived: noted, with the runtime's time, while the
/// lifecycle watches arrivals; the first one before ready is logged.
#[inline]
pub fn note_request<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    if shared.counters().watching_arrivals() {
        note_request_now(shared, clock, runtime);
    }
}

#[cold]
#[inline(never)]
fn note_request_now<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    if shared.counters().note_request(clock.instant(runtime.now()))
        == RequestArrival::FirstBeforeReady
    {
        logging::requests_before_ready();
    }
}
