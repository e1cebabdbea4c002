//! The body type of every route and the plain-text answer, shared by [`crate::routes`] and
//! [`crate::websocket`].

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

/// The body type of every route.
pub type RouteBody = UnsyncBoxBody<Bytes, Infallible>;

/// A text response.
#[must_use]
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<RouteBody> {
    let mut res = Response::new(Full::new(body.into()).boxed_unsync());
    *res.status_mut() = status;
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}
