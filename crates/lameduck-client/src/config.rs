//! The layer's configuration: its builder, its checks, and the policy every service of one
//! layer shares.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use tower::retry::budget::{Budget, TpsBudget};

use crate::stats::RetryStats;
use crate::timer::{Timer, TokioTimer};
use crate::Retryable;

/// Attempts of one request by default: the first and two retries.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The longest wait a server may ask for (`Retry-After`, `grpc-retry-pushback-ms`) that is
/// honoured by default; a longer one is not retried.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(10);
/// The largest request body replayed by default.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;
/// The backoff where the server gave no time, by default: the first retry within 10 to 20 ms,
/// each next one twice as long, up to 1 s.
pub const DEFAULT_BACKOFF: (Duration, Duration) =
    (Duration::from_millis(20), Duration::from_secs(1));
/// The budget by default, as tower's `TpsBudget::default()`: retries up to 20 % of the
/// requests of the last 10 s, plus 10 retries a second.
pub const DEFAULT_BUDGET: (Duration, u32, f32) = (Duration::from_secs(10), 10, 0.2);

/// A configuration the builder refuses.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_attempts(0)`: a request has at least its first attempt.
    #[error("max_attempts must be at least 1 (the first attempt)")]
    ZeroAttempts,
    /// The budget's window is outside 1 s ..= 60 s.
    #[error("the budget's window must be within 1 s and 60 s, got {0:?}")]
    BudgetWindow(Duration),
    /// The budget's retry ratio is outside 0 ..= 1000 (or not a number).
    #[error("the budget's retry ratio must be within 0 and 1000, got {0}")]
    BudgetRatio(f32),
    /// The budget's minimum of retries per second is `i32::MAX` or more.
    #[error("the budget's minimum of retries per second must be below 2147483647, got {0}")]
    BudgetMinimum(u32),
    /// The backoff's base is longer than its maximum.
    #[error("the backoff's base {base:?} is longer than its maximum {max:?}")]
    Backoff {
        /// The base given.
        base: Duration,
        /// The maximum given.
        max: Duration,
    },
    /// An idempotent path prefix that does not start with `/`.
    #[error("an idempotent path prefix must start with '/', got {0:?}")]
    PathPrefix(String),
    /// A gRPC service name that is empty or holds a `/`.
    #[error("a gRPC service name must be non-empty and hold no '/', got {0:?}")]
    GrpcService(String),
}

/// How the retry budget is made.
enum BudgetChoice {
    Tps(Duration, u32, f32),
    Custom(Arc<dyn Budget + Send + Sync>),
    Unlimited,
}

/// The builder of a [`RetryLayer`](crate::RetryLayer): `RetryLayer::builder()...build()`.
/// Every setting has a default ([`RetryLayer::default`](crate::RetryLayer::default) is the
/// builder's defaults).
pub struct RetryLayerBuilder {
    max_attempts: u32,
    max_wait: Duration,
    budget: BudgetChoice,
    backoff: (Duration, Duration),
    body_limit: usize,
    idempotent_methods: Vec<Method>,
    idempotent_paths: Vec<String>,
    timer: Arc<dyn Timer>,
}

impl Default for RetryLayerBuilder {
    fn default() -> Self {
        RetryLayerBuilder {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_wait: DEFAULT_MAX_WAIT,
            budget: BudgetChoice::Tps(DEFAULT_BUDGET.0, DEFAULT_BUDGET.1, DEFAULT_BUDGET.2),
            backoff: DEFAULT_BACKOFF,
            body_limit: DEFAULT_BODY_LIMIT,
            // RFC 9110 section 9.2.2.
            idempotent_methods: vec![
                Method::GET,
                Method::HEAD,
                Method::OPTIONS,
                Method::TRACE,
                Method::PUT,
                Method::DELETE,
            ],
            idempotent_paths: Vec::new(),
            timer: Arc::new(TokioTimer),
        }
    }
}

impl RetryLayerBuilder {
    /// Attempts of one request, the first included (default 3). `1` retries nothing.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The longest wait a server may ask for with `Retry-After` or `grpc-retry-pushback-ms`
    /// that the layer honours (default 10 s). A response asking for longer is returned as it
    /// came: retrying sooner than the server asked would go against what it said.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// The retry budget: tower's `TpsBudget` over a window of `window` (1 s to 60 s), which
    /// allows retries up to `retry_ratio` of the requests made in the window (0 to 1000;
    /// 0.2: one retry per five requests) plus `min_per_sec` retries a second. Each request
    /// deposits, each retry withdraws. Default: 10 s, 10 a second, 0.2.
    pub fn budget(mut self, window: Duration, min_per_sec: u32, retry_ratio: f32) -> Self {
        self.budget = BudgetChoice::Tps(window, min_per_sec, retry_ratio);
        self
    }

    /// A budget of the application's (any tower `Budget`, shared with other layers if the
    /// application wishes).
    pub fn custom_budget(mut self, budget: Arc<dyn Budget + Send + Sync>) -> Self {
        self.budget = BudgetChoice::Custom(budget);
        self
    }

    /// No budget: only the maximum of attempts bounds the retries.
    pub fn unlimited_budget(mut self) -> Self {
        self.budget = BudgetChoice::Unlimited;
        self
    }

    /// The backoff where the server gave no time: retry `n` (from 1) waits a random time
    /// between half and all of `base * 2^(n-1)`, at most `max` (default 20 ms and 1 s).
    /// `Duration::ZERO` as the base retries at once.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff = (base, max);
        self
    }

    /// The largest request body replayed, in bytes (default 64 KiB). A body known whole and
    /// no larger is kept to be sent again; any other is sent once.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// The methods retried in the cases that need an idempotent request (replaces the
    /// default: GET, HEAD, OPTIONS, TRACE, PUT, DELETE; RFC 9110 section 9.2.2).
    pub fn idempotent_methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.idempotent_methods = methods.into_iter().collect();
        self
    }

    /// Requests whose path starts with `prefix` (which starts with `/`) count as idempotent,
    /// whatever their method.
    pub fn idempotent_path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.idempotent_paths.push(prefix.into());
        self
    }

    /// Every method of the gRPC service `service` (`package.Service`) counts as idempotent:
    /// its calls are retried after `UNAVAILABLE` with a pushback. Same as the path prefix
    /// `/package.Service/`.
    pub fn idempotent_grpc_service(mut self, service: &str) -> Self {
        // Checked in build(): kept as given until then.
        self.idempotent_paths.push(format!("grpc:{service}"));
        self
    }

    /// The timer of the waits (default [`TokioTimer`]).
    pub fn timer(mut self, timer: impl Timer) -> Self {
        self.timer = Arc::new(timer);
        self
    }

    /// The policy of the layer `build` makes, or what is wrong with the configuration.
    pub(crate) fn policy(self) -> Result<Policy, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::ZeroAttempts);
        }
        let (base, max) = self.backoff;
        if base > max {
            return Err(ConfigError::Backoff { base, max });
        }
        let mut paths = Vec::with_capacity(self.idempotent_paths.len());
        for p in self.idempotent_paths {
            if let Some(service) = p.strip_prefix("grpc:") {
                if service.is_empty() || service.contains('/') {
                    return Err(ConfigError::GrpcService(service.to_owned()));
                }
                paths.push(format!("/{service}/"));
            } else if p.starts_with('/') {
                paths.push(p);
            } else {
                return Err(ConfigError::PathPrefix(p));
            }
        }
        let budget: Option<Arc<dyn Budget + Send + Sync>> = match self.budget {
            BudgetChoice::Tps(window, min, ratio) => {
                // TpsBudget asserts these; checked here so that bad input is an error.
                if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&window) {
                    return Err(ConfigError::BudgetWindow(window));
                }
                if !(0.0..=1000.0).contains(&ratio) {
                    return Err(ConfigError::BudgetRatio(ratio));
                }
                if min >= i32::MAX as u32 {
                    return Err(ConfigError::BudgetMinimum(min));
                }
                Some(Arc::new(TpsBudget::new(window, min, ratio)))
            }
            BudgetChoice::Custom(b) => Some(b),
            BudgetChoice::Unlimited => None,
        };
        Ok(Policy {
            max_attempts: self.max_attempts,
            max_wait: self.max_wait,
            budget,
            backoff: self.backoff,
            body_limit: self.body_limit,
            idempotent_methods: self.idempotent_methods,
            idempotent_paths: paths,
            timer: self.timer,
            stats: RetryStats::default(),
        })
    }
}

/// What every service of one layer shares.
pub(crate) struct Policy {
    pub(crate) max_attempts: u32,
    pub(crate) max_wait: Duration,
    pub(crate) budget: Option<Arc<dyn Budget + Send + Sync>>,
    pub(crate) backoff: (Duration, Duration),
    pub(crate) body_limit: usize,
    pub(crate) idempotent_methods: Vec<Method>,
    pub(crate) idempotent_paths: Vec<String>,
    pub(crate) timer: Arc<dyn Timer>,
    pub(crate) stats: RetryStats,
}

impl Default for Policy {
    fn default() -> Self {
        let b = RetryLayerBuilder::default();
        let (window, min, ratio) = DEFAULT_BUDGET;
        Policy {
            max_attempts: b.max_attempts,
            max_wait: b.max_wait,
            budget: Some(Arc::new(TpsBudget::new(window, min, ratio))),
            backoff: b.backoff,
            body_limit: b.body_limit,
            idempotent_methods: b.idempotent_methods,
            idempotent_paths: Vec::new(),
            timer: b.timer,
            stats: RetryStats::default(),
        }
    }
}

impl Policy {
    /// Whether a request may be sent twice: marked [`Retryable`], an idempotent method, or a
    /// path configured idempotent.
    pub(crate) fn idempotent(
        &self,
        method: &Method,
        uri: &http::Uri,
        extensions: &http::Extensions,
    ) -> bool {
        extensions.get::<Retryable>().is_some()
            || self.idempotent_methods.contains(method)
            || self
                .idempotent_paths
                .iter()
                .any(|p| uri.path().starts_with(p.as_str()))
    }

    /// Deposits one request in the budget.
    pub(crate) fn deposit(&self) {
        if let Some(b) = &self.budget {
            b.deposit();
        }
    }

    /// Withdraws one retry from the budget; false when it is empty.
    pub(crate) fn withdraw(&self) -> bool {
        self.budget.as_ref().is_none_or(|b| b.withdraw())
    }

    /// The wait before retry `retry` (from 1) where the server gave none.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let (base, max) = self.backoff;
        let ceiling = base
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(max);
        let half = ceiling / 2;
        let nanos = u64::try_from((ceiling - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(fastrand::u64(0..=nanos))
    }
}
