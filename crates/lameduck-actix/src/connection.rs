//! What lameduck keeps of each actix connection: its place in the server's connection count,
//! which notes its close for the termination summary ([`TrackedConnection`]), and its
//! [maximum age](lameduck::Config::max_connection_age), drawn when it is accepted
//! ([`draw_age`]) and kept in its connection data for the admission middleware ([`AgedAt`]).
//!
//! actix-http builds an HTTP/1 connection's graceful-shutdown signal from a closure that
//! sees nothing of the connection, right after it called the connection callback on the same
//! thread (`HttpServiceHandler::call`): the callback leaves the connection's age here
//! ([`hand_over_age`]) and the signal takes it ([`take_handed_over_age`]), so that an idle
//! HTTP/1 connection is closed at its age.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lameduck::{LifecycleSignal, Shared};
use lameduck_hyper::{ConnectionGuard, Runtime as _};
use lameduck_tokio::TokioRuntime;

/// The lifecycle's shared state and clock, as a server's connections see them.
pub(crate) type LifecycleRef = (Arc<Shared>, lameduck::StdClock);

/// A connection's place in the server's connection count, held until the connection is
/// dropped: then, after `ShutdownInitiated`, its close is noted for the termination summary
/// ([`Counters::note_connection_closed`]), before the count goes down.
///
/// [`Counters::note_connection_closed`]: lameduck::shared::counters::Counters::note_connection_closed
pub(crate) struct TrackedConnection {
    lifecycle: Option<LifecycleRef>,
    _guard: ConnectionGuard,
}

impl TrackedConnection {
    /// Counts a connection in `guard`'s tracker until dropped, noting its close in
    /// `lifecycle`.
    pub(crate) fn new(guard: ConnectionGuard, lifecycle: Option<&LifecycleRef>) -> Self {
        TrackedConnection {
            lifecycle: lifecycle.cloned(),
            _guard: guard,
        }
    }
}

impl Drop for TrackedConnection {
    fn drop(&mut self) {
        if let Some((shared, clock)) = &self.lifecycle {
            note_closed(shared, *clock);
        }
    }
}

impl std::fmt::Debug for TrackedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackedConnection").finish_non_exhaustive()
    }
}

/// Notes a connection closing now, once the termination has begun (the clock is not read
/// before).
pub(crate) fn note_closed(shared: &Shared, clock: lameduck::StdClock) {
    if shared.has_fired(LifecycleSignal::ShutdownInitiated) {
        shared
            .counters()
            .note_connection_closed(clock.instant(TokioRuntime.now()));
    }
}

/// When an HTTP/1 connection reaches its [maximum age](lameduck::Config::max_connection_age),
/// in its connection data: the admission middleware closes the connection after the first
/// response that ends past it (`Connection: close`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgedAt(pub(crate) Instant);

/// The maximum age of a connection accepted at `accepted_at`: when it reaches it, or `None`
/// when the lifecycle has no age (then nothing is drawn: one branch).
pub(crate) fn draw_age(shared: &Shared, accepted_at: Instant) -> Option<Instant> {
    let config = shared.config();
    if config.max_connection_age().is_zero() {
        return None;
    }
    let limit = config.connection_age_limit(age_sample())?;
    Some(
        accepted_at
            .checked_add(limit)
            .unwrap_or(accepted_at + MAX_AGE_LIMIT),
    )
}

/// [`draw_age`] for a connection accepted now; the clock is read only when the age is on.
#[inline]
pub(crate) fn age_from_now(shared: &Shared) -> Option<Instant> {
    if shared.config().max_connection_age().is_zero() {
        return None;
    }
    draw_age(shared, TokioRuntime.now())
}

/// The latest an age may put a connection's end at, for ages the clock cannot add.
const MAX_AGE_LIMIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A uniformly random `u32` for one connection's age. The standard library's per-thread
/// random keys hash a constant: each `RandomState` has fresh keys, so every call gives an
/// independent draw, at the cost of one SipHash of eight bytes per connection, and only when
/// the age is on.
fn age_sample() -> u32 {
    let hash = RandomState::new().hash_one(0x6167_655f_6472_6177_u64);
    // The high half is as well mixed as the low one; folding both keeps every bit.
    (hash ^ (hash >> 32)) as u32
}

thread_local! {
    /// The age the connection callback left for the HTTP/1 connection whose dispatcher
    /// actix-http builds next on this thread.
    static HANDED_OVER_AGE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Leaves `age` for the graceful-shutdown signal of the HTTP/1 connection actix-http builds
/// next on this thread (`None` for any other connection, so that no age outlives its
/// connection's callback).
pub(crate) fn hand_over_age(age: Option<Instant>) {
    HANDED_OVER_AGE.with(|cell| cell.set(age));
}

/// The age the connection callback left (see [`hand_over_age`]), taken.
pub(crate) fn take_handed_over_age() -> Option<Instant> {
    HANDED_OVER_AGE.with(Cell::take)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_off_without_a_configured_age_and_spread_around_it_with_one() {
        let now = Instant::now();
        let shared = |config| {
            let mut builder = lameduck_tokio::builder(config);
            builder.without_os_signals();
            std::sync::Arc::clone(builder.prepare().shared())
        };
        assert_eq!(draw_age(&shared(lameduck::Config::default()), now), None);
        let age = Duration::from_secs(10);
        let config = lameduck::Config::builder()
            .max_connection_age(age)
            .build()
            .unwrap();
        let on = shared(config);
        let ages: Vec<Duration> = (0..200)
            .map(|_| draw_age(&on, now).unwrap() - now)
            .collect();
        assert!(ages
            .iter()
            .all(|a| *a >= age * 9 / 10 && *a <= age * 11 / 10));
        let (low, high) = (ages.iter().min().unwrap(), ages.iter().max().unwrap());
        assert!(*high - *low > age / 10, "{low:?}..{high:?}: not spread");
    }

    #[test]
    fn a_handed_over_age_is_taken_once() {
        let at = Instant::now();
        hand_over_age(Some(at));
        assert_eq!(take_handed_over_age(), Some(at));
        assert_eq!(take_handed_over_age(), None);
        hand_over_age(Some(at));
        hand_over_age(None);
        assert_eq!(take_handed_over_age(), None);
    }
}
