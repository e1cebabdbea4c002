//! Reports new connections and requests to the lifecycle's record of arrivals
//! ([`lameduck::Shared::arrivals`]): when they came during a termination, which were late, and
//! the requests that came while `/readyz` said "not ready". Every adapter calls these at each
//! accepted connection and each admitted request (health and metrics aside); they cost one
//! relaxed load unless the lifecycle watches arrivals, and read the clock only then.

use lameduck::{RequestArrival, Shared, StdClock};

use crate::logging;
use crate::runtime::Runtime;

/// A connection was accepted: noted, with the runtime's time, while the lifecycle watches
/// arrivals.
#[inline]
pub fn note_connection<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    if shared.watching_arrivals() {
        note_connection_now(shared, clock, runtime);
    }
}

#[cold]
#[inline(never)]
fn note_connection_now<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    shared.note_connection(clock.instant(runtime.now()));
}

/// A request (health and metrics aside) arrived: noted, with the runtime's time, while the
/// lifecycle watches arrivals; the first one before ready is logged.
#[inline]
pub fn note_request<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    if shared.watching_arrivals() {
        note_request_now(shared, clock, runtime);
    }
}

#[cold]
#[inline(never)]
fn note_request_now<R: Runtime>(shared: &Shared, clock: StdClock, runtime: &R) {
    if shared.note_request(clock.instant(runtime.now())) == RequestArrival::FirstBeforeReady {
        logging::requests_before_ready();
    }
}
