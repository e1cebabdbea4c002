//! The responses the lifecycle answers by itself, the core's canned responses (429, 503,
//! 504) and its health answers, turned into `http` responses in one place.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use lameduck::health::HealthResponse;
use lameduck::responses::CannedResponse;

/// A response the lifecycle writes itself: one of the core's [`CannedResponse`]s or a
/// [`HealthResponse`], each a status, headers and a body. Every framework turns one into its
/// own response type with one function: [`http_response`] for `http` (hyper, tower, axum),
/// and one in the actix-web adapter.
pub trait LifecycleResponse {
    /// The status code.
    fn status(&self) -> u16;
    /// The headers, in order.
    fn headers(&self) -> &'static [(&'static str, &'static str)];
    /// Whether the connection must close after this response.
    fn close_connection(&self) -> bool;
    /// The body.
    fn into_body(self) -> Bytes;
}

impl LifecycleResponse for &CannedResponse {
    fn status(&self) -> u16 {
        self.status
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        self.headers
    }

    fn close_connection(&self) -> bool {
        self.close_connection
    }

    fn into_body(self) -> Bytes {
        Bytes::from_static(self.body.as_bytes())
    }
}

/// With kube-apiserver's health headers ([`lameduck::health::HEADERS`]).
impl LifecycleResponse for HealthResponse {
    fn status(&self) -> u16 {
        self.status
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &lameduck::health::HEADERS
    }

    fn close_connection(&self) -> bool {
        false
    }

    fn into_body(self) -> Bytes {
        Bytes::from(self.body)
    }
}

/// The `http` response for `response`, with any body made from its bytes (`Bytes`,
/// `http_body_util::Full`, [`LameduckBody`](crate::LameduckBody)).
///
/// [`LifecycleResponse::close_connection`] needs nothing here: the 429 and the 503 carry
/// `Connection: close` among their headers (which the driver turns into a GOAWAY on HTTP/2).
pub fn http_response<B: From<Bytes>>(response: impl LifecycleResponse) -> Response<B> {
    let status =
        StatusCode::from_u16(response.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers();
    let mut res = Response::new(B::from(response.into_body()));
    *res.status_mut() = status;
    let map = res.headers_mut();
    for (name, value) in headers {
        if let Ok(name) = header::HeaderName::from_bytes(name.as_bytes()) {
            map.insert(name, HeaderValue::from_static(value));
        }
    }
    res
}
