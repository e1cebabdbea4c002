//! The admission layer's settings: the lifecycle it admits into, the runtime and clock its
//! answers are dated by, the long-running classifier and whether it answers the health
//! endpoints. What it decides per request is in the `admission` module.

use std::fmt;
use std::sync::Arc;

use lameduck::config::GoawayChance;
use lameduck::{RequestInfo, Shared, StdClock};

use crate::runtime::Runtime;

/// Decides whether a request is long-running (watch, SSE, WebSocket).
pub type Classifier = Arc<dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync>;

/// The admission layer: classifies each request, admits or rejects it through the gate,
/// bounds it by the request timeout, answers the health endpoints, and keeps it counted until
/// its response body ends. See [`decide`](crate::adapter::decide) for the decision it applies.
#[derive(Clone)]
pub struct AdmissionLayer<R: Runtime> {
    pub(crate) shared: Arc<Shared>,
    pub(crate) runtime: R,
    pub(crate) clock: StdClock,
    /// The user's long-running classifier; `None`: [`lameduck::default_is_long_running`],
    /// called directly (inlined up to the first fact that needs a closer look) instead of
    /// through an `Arc<dyn Fn>`.
    pub(crate) classifier: Option<Classifier>,
    pub(crate) serve_health: bool,
    /// The lifecycle's [`lameduck::Config::goaway_chance`], copied for the hot path.
    pub(crate) goaway_chance: GoawayChance,
}

impl<R: Runtime> fmt::Debug for AdmissionLayer<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionLayer")
            .field("serve_health", &self.serve_health)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> AdmissionLayer<R> {
    /// A layer for `shared`'s lifecycle, classifying with
    /// [`lameduck::default_is_long_running`] and answering the health endpoints itself.
    #[must_use]
    pub fn new(shared: Arc<Shared>, runtime: R, clock: StdClock) -> Self {
        AdmissionLayer {
            goaway_chance: shared.config().goaway_chance(),
            shared,
            runtime,
            clock,
            classifier: None,
            serve_health: true,
        }
    }

    /// Uses `is_long_running` to pick long-running requests.
    #[must_use]
    pub fn long_running(
        mut self,
        is_long_running: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.classifier = Some(Arc::new(is_long_running));
        self
    }

    /// Whether the layer answers `/readyz`, `/livez` and `/healthz` itself (default: yes).
    #[must_use]
    pub fn serve_health(mut self, serve: bool) -> Self {
        self.serve_health = serve;
        self
    }

    /// The lifecycle's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
