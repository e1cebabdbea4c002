//! The future of one request through the layer: its attempts, the waits between them, and
//! the decision after each.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Extensions, HeaderMap, Method, Request, Response, Uri, Version};
use tower_service::Service;

use crate::body::ReplayBody;
use crate::classify::{classify_error, classify_response};
use crate::config::Policy;
use crate::stats::{RetryReason, SkipReason};

/// What a retry needs: a clone of the service and the request's head and body, kept only for
/// a request whose body can be sent again.
pub(crate) struct RetryState<S, B: ReplayBody> {
    service: S,
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    saved: B::Saved,
    attempts: u32,
}

impl<S, B: ReplayBody> RetryState<S, B> {
    pub(crate) fn new(service: S, parts: &http::request::Parts, saved: B::Saved) -> Self {
        RetryState {
            service,
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            // An empty map is made anew, cheaper than its clone.
            headers: if parts.headers.is_empty() {
                HeaderMap::new()
            } else {
                parts.headers.clone()
            },
            extensions: parts.extensions.clone(),
            saved,
            attempts: 1,
        }
    }

    fn request(&self) -> Request<B> {
        let mut request = Request::new(B::replay(&self.saved));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        *request.extensions_mut() = self.extensions.clone();
        request
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Attempt { #[pin] future: F },
        Waiting { sleep: Pin<Box<dyn Future<Output = ()> + Send>> },
        Ready,
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Retry`](crate::Retry): the inner service's response, or its
    /// error, after the retries the layer made.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
        B: ReplayBody,
    {
        #[pin]
        state: State<S::Future>,
        retry: Option<RetryState<S, B>>,
        policy: Arc<Policy>,
        grpc: bool,
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
    B: ReplayBody,
{
    pub(crate) fn new(
        first: S::Future,
        retry: Option<RetryState<S, B>>,
        policy: &Arc<Policy>,
        grpc: bool,
    ) -> Self {
        ResponseFuture {
            state: State::Attempt { future: first },
            retry,
            policy: Arc::clone(policy),
            grpc,
        }
    }
}

impl<S, B, ResB> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: std::error::Error + 'static,
    B: ReplayBody,
{
    type Output = Result<Response<ResB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Attempt { future } => {
                    let result = ready!(future.poll(cx));
                    let (reason, wait) = match &result {
                        Ok(response) => match classify_response(
                            response.status(),
                            response.headers(),
                            *this.grpc,
                        ) {
                            Some((reason, wait)) => (reason, Some(wait)),
                            None => return Poll::Ready(result),
                        },
                        Err(error) => match classify_error(error) {
                            Some(reason) => (reason, None),
                            None => return Poll::Ready(result),
                        },
                    };
                    let Some(delay) = decide(this.policy, this.retry.as_mut(), reason, wait) else {
                        return Poll::Ready(result);
                    };
                    // The failed attempt's response (a 429, 503 or UNAVAILABLE) is dropped
                    // unread.
                    drop(result);
                    if delay.is_zero() {
                        this.state.set(State::Ready);
                    } else {
                        let sleep = this.policy.timer.sleep(delay);
                        this.state.set(State::Waiting { sleep });
                    }
                }
                StateProj::Waiting { sleep } => {
                    ready!(sleep.as_mut().poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    // `decide` allows a retry only with the state a retry needs.
                    let Some(retry) = this.retry.as_mut() else {
                        unreachable!("a retry without its request");
                    };
                    if let Err(e) = ready!(retry.service.poll_ready(cx)) {
                        return Poll::Ready(Err(e));
                    }
                    let request = retry.request();
                    let future = retry.service.call(request);
                    this.state.set(State::Attempt { future });
                }
            }
        }
    }
}

/// Whether a failed attempt for `reason` is retried, and after how long (the server's `wait`,
/// or the backoff); counts and logs the decision.
fn decide<S, B: ReplayBody>(
    policy: &Policy,
    retry: Option<&mut RetryState<S, B>>,
    reason: RetryReason,
    wait: Option<Duration>,
) -> Option<Duration> {
    let stats = &policy.stats;
    let Some(retry) = retry else {
        if policy.max_attempts <= 1 {
            stats.exhaust(reason);
        } else {
            stats.skip(reason, SkipReason::Body);
        }
        return None;
    };
    if !reason.unprocessed() && !policy.idempotent(&retry.method, &retry.uri, &retry.extensions) {
        stats.skip(reason, SkipReason::NotIdempotent);
        return None;
    }
    if retry.attempts >= policy.max_attempts {
        stats.exhaust(reason);
        return None;
    }
    if wait.is_some_and(|w| w > policy.max_wait) {
        stats.skip(reason, SkipReason::WaitTooLong);
        return None;
    }
    if !policy.withdraw() {
        stats.skip(reason, SkipReason::Budget);
        return None;
    }
    let delay = wait.unwrap_or_else(|| policy.backoff(retry.attempts));
    retry.attempts += 1;
    stats.retried(reason);
    tracing::debug!(
        reason = reason.as_str(),
        attempt = retry.attempts,
        wait_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        method = %retry.method,
        uri = %retry.uri,
        "lameduck-client: retrying a request"
    );
    Some(delay)
}
