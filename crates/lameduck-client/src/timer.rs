//! The layer's only clock: the waits before a retry. A small seam, so that the layer runs on
//! tokio's timer by default and tests can record the waits the layer asks for.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// What the layer waits with before a retry. Called only on the retry path, so the boxed
/// future costs nothing to a request that needs no retry.
pub trait Timer: Send + Sync + 'static {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// tokio's timer (`tokio::time::sleep`): the default, and the one tokio's paused clock
/// controls in tests. Needs a tokio runtime with its time driver when a retry waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioTimer;

impl Timer for TokioTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(duration))
    }
}
