//! The draw behind [`Config::goaway_chance`](lameduck::Config::goaway_chance): whether an
//! admitted request ends its connection gracefully after its response; its generator also
//! draws each connection's point in the idle-close spread.
//!
//! Each thread has its own small generator (xorshift64*), seeded once from the standard
//! library's per-process random keys: a draw is a few arithmetic instructions on a
//! thread-local word, with no syscall, lock or shared atomic. The draws need to be spread,
//! not unpredictable: they only decide which connections a client re-dials.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

use lameduck::config::GoawayChance;

thread_local! {
    /// This thread's generator state; zero until its first draw.
    static STATE: Cell<u64> = const { Cell::new(0) };
}

/// Whether a request admitted now ends its connection, at `chance` (always false when the
/// chance is off, without touching the generator).
#[inline]
pub(crate) fn draw(chance: GoawayChance) -> bool {
    !chance.is_off() && chance.closes(next_u32())
}

/// The next number of this thread's generator (also the idle-close spread's draw, see
/// [`spread_close_at`](crate::connection::linger::spread_close_at)).
pub(crate) fn next_u32() -> u32 {
    STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            x = seed();
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        // The high half of xorshift64*'s output is its best-mixed part.
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    })
}

/// A non-zero seed: the standard library's random keys (fresh for each `RandomState`).
fn seed() -> u64 {
    RandomState::new().hash_one(0x6c61_6d65_6475_636b_u64) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_closes_and_max_closes_about_one_in_fifty() {
        assert!((0..10_000).all(|_| !draw(GoawayChance::OFF)));
        let draws = 200_000;
        let closed = (0..draws).filter(|_| draw(GoawayChance::MAX)).count();
        // Expected 4,000; the binomial's standard deviation is about 63.
        assert!((3_500..=4_500).contains(&closed), "{closed} of {draws}");
    }

    #[test]
    fn threads_are_seeded_apart() {
        let firsts: Vec<u32> = (0..4)
            .map(|_| std::thread::spawn(next_u32).join().unwrap())
            .collect();
        let mut unique = firsts.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), firsts.len(), "{firsts:?}");
    }
}
