//! Connection tracking: a server counts its live connections, so it reports
//! `ServerStopped` the moment its last connection ends.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use event_listener::Event as Notify;

/// Counts a server's live connections and wakes waiters when none is left, so a server
/// reports `ServerStopped` the moment its last connection ends.
#[derive(Clone, Default)]
pub struct ConnectionTracker {
    inner: Arc<TrackerInner>,
}

#[derive(Default)]
struct TrackerInner {
    count: AtomicUsize,
    zero: Notify,
}

impl fmt::Debug for ConnectionTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionTracker")
            .field("live", &self.live())
            .finish()
    }
}

/// One live connection; dropping it ends it for the [`ConnectionTracker`].
#[derive(Debug)]
pub struct ConnectionGuard(ConnectionTracker);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let inner = &self.0.inner;
        if inner.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.zero.notify(usize::MAX);
        }
    }
}

impl ConnectionTracker {
    /// A tracker with no connection.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a new connection until the guard drops.
    #[must_use]
    pub fn open(&self) -> ConnectionGuard {
        self.inner.count.fetch_add(1, Ordering::AcqRel);
        ConnectionGuard(self.clone())
    }

    /// Live connections.
    #[must_use]
    pub fn live(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    /// Resolves once no connection is live.
    pub async fn wait_zero(&self) {
        loop {
            if self.live() == 0 {
                return;
            }
            let l = self.inner.zero.listen();
            if self.live() == 0 {
                return;
            }
            l.await;
        }
    }
}
