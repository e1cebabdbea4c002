//! The deadline of a gRPC call, answered in gRPC form: `DEADLINE_EXCEEDED` (trailers-only,
//! HTTP 200) when the handler has not answered by the shorter of the client's `grpc-timeout`
//! and the server's request timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Request, Response};
use lameduck::Shared;
use lameduck_hyper::ShutdownNotice;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::body::GrpcBody;

/// The `grpc-timeout` header of a request, if present and well formed: at most 8 digits
/// and a unit (`H`, `M`, `S`, `m`, `u`, `n`), as the gRPC protocol over HTTP/2 defines it.
#[must_use]
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The tower layer [`Grpc::serve`](crate::Grpc::serve) puts around a tonic service (inside
/// the server's admission): gRPC deadlines in gRPC form, and streams that must end when the
/// server stops accepting (see [`GrpcService`]).
#[derive(Clone, Debug)]
pub struct GrpcLayer {
    shared: Arc<Shared>,
    end_at_notice: Arc<[String]>,
}

impl GrpcLayer {
    /// A layer for `shared`'s lifecycle; the long-running calls whose path is in
    /// `end_at_notice` are ended (status OK) when the server stops accepting, for handlers
    /// that do not end them themselves (tonic-health's `Watch`).
    #[must_use]
    pub fn new(shared: Arc<Shared>, end_at_notice: Arc<[String]>) -> Self {
        GrpcLayer {
            shared,
            end_at_notice,
        }
    }
}

impl<S> Layer<S> for GrpcLayer {
    type Service = GrpcService<S>;

    fn layer(&self, inner: S) -> GrpcService<S> {
        GrpcService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`GrpcLayer`] wraps around a tonic service. For a gRPC call (content-type
/// `application/grpc*`):
///
/// * a normal call whose handler has not answered by `min(grpc-timeout, request timeout)`
///   gets `DEADLINE_EXCEEDED`, trailers-only (the handler's future is dropped); a
///   long-running call is bounded by the client's `grpc-timeout` only;
/// * a long-running call listed as ended at the notice gets its stream ended with status OK
///   when the server stops accepting.
///
/// Other requests pass through untouched.
#[derive(Clone, Debug)]
pub struct GrpcService<S> {
    inner: S,
    layer: GrpcLayer,
}

impl<S, B, RB> Service<Request<B>> for GrpcService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    type Response = Response<GrpcBody<RB>>;
    type Error = S::Error;
    type Future = GrpcFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if !lameduck_hyper::grpc::is_grpc(req.headers()) {
            return GrpcFuture::new(self.inner.call(req), None, None);
        }
        let notice = req.extensions().get::<ShutdownNotice>().cloned();
        let client = grpc_timeout(req.headers());
        let server = match notice {
            Some(_) => None, // long-running: no request timeout
            None => lameduck_hyper::request_timeout(&self.layer.shared),
        };
        let timeout = match (client, server) {
            (Some(c), Some(s)) => Some(c.min(s)),
            (c, s) => c.or(s),
        };
        let end = notice.filter(|_| {
            let path = req.uri().path();
            self.layer.end_at_notice.iter().any(|p| p == path)
        });
        GrpcFuture::new(self.inner.call(req), timeout, end)
    }
}

pin_project! {
    /// The response future of [`GrpcService`].
    pub struct GrpcFuture<F> {
        #[pin]
        inner: F,
        deadline: Option<Pin<Box<tokio::time::Sleep>>>,
        end: Option<ShutdownNotice>,
    }
}

impl<F> GrpcFuture<F> {
    fn new(inner: F, timeout: Option<Duration>, end: Option<ShutdownNotice>) -> Self {
        GrpcFuture {
            inner,
            // Started now, before the server's own request timeout is anchored (at the
            // first wait of the admitted request): this one always fires first.
            deadline: timeout.map(|t| Box::pin(tokio::time::sleep(t))),
            end,
        }
    }
}

impl<F> std::fmt::Debug for GrpcFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcFuture")
            .field("deadline", &self.deadline.is_some())
            .finish_non_exhaustive()
    }
}

impl<F, RB, E> Future for GrpcFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    RB: Default,
{
    type Output = Result<Response<GrpcBody<RB>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.inner.poll(cx) {
            let end = this.end.take();
            return Poll::Ready(result.map(|res| res.map(|body| GrpcBody::new(body, end))));
        }
        if let Some(deadline) = this.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                let (parts, _) =
                    lameduck_hyper::grpc::deadline_exceeded::<bytes::Bytes>().into_parts();
                return Poll::Ready(Ok(Response::from_parts(
                    parts,
                    GrpcBody::new(RB::default(), None),
                )));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(v: &str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert("grpc-timeout", v.parse().unwrap());
        grpc_timeout(&h)
    }

    #[test]
    fn parses_every_unit() {
        assert_eq!(timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
    }

    #[test]
    fn rejects_malformed_values() {
        for v in ["", "S", "123456789S", "1x", "-1S", "1.5S", "１S"] {
            let mut h = HeaderMap::new();
            if let Ok(value) = v.parse() {
                h.insert("grpc-timeout", value);
            }
            assert_eq!(grpc_timeout(&h), None, "{v:?}");
        }
    }
}
