//! Whether events were spread over a window or came in one burst.

use tokio::time::Instant;

/// The number of instants of `at` in each 100 ms bucket from `start` (the first bucket is
/// `[start, start + 100 ms)`); the buckets run up to the last instant's.
pub fn buckets(start: Instant, at: &[Instant]) -> Vec<usize> {
    let mut buckets = Vec::new();
    for t in at {
        let bucket = usize::try_from(t.duration_since(start).as_millis() / 100).unwrap();
        if buckets.len() <= bucket {
            buckets.resize(bucket + 1, 0);
        }
        buckets[bucket] += 1;
    }
    buckets
}
