//! The gRPC form of the lifecycle's answers (`docs/design.md#grpc`): a gRPC caller gets a
//! gRPC status, never a bare HTTP error. A rejection is `UNAVAILABLE` with
//! `grpc-retry-pushback-ms` carrying the Retry-After; a call past its deadline is
//! `DEADLINE_EXCEEDED`. Both are *trailers-only* responses: HTTP 200 whose one header block
//! carries the status and ends the stream.
//!
//! Nothing here runs for a request that is served: the content-type is read only when a
//! rejection is built.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use lameduck::responses::CannedResponse;

/// The gRPC status code `DEADLINE_EXCEEDED`.
pub const DEADLINE_EXCEEDED: u8 = 4;
/// The gRPC status code `UNAVAILABLE`.
pub const UNAVAILABLE: u8 = 14;

/// The `grpc-message` of a rejection after the gate closed.
pub const SHUTTING_DOWN_MESSAGE: &str = "the server is shutting down, please try again later";
/// The `grpc-message` of a call past its deadline.
pub const DEADLINE_MESSAGE: &str = "the call did not complete within the allotted timeout";

/// Whether `headers` say the request is a gRPC call: a `content-type` of
/// `application/grpc`, alone or followed by `+` (a codec) or `;` (parameters).
#[must_use]
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| is_grpc_content_type(v.as_bytes()))
}

fn is_grpc_content_type(value: &[u8]) -> bool {
    const PREFIX: &[u8] = b"application/grpc";
    value.len() >= PREFIX.len()
        && value[..PREFIX.len()].eq_ignore_ascii_case(PREFIX)
        && matches!(value.get(PREFIX.len()), None | Some(b'+' | b';'))
}

/// A trailers-only gRPC response: HTTP 200, `content-type: application/grpc`,
/// `grpc-status: code`, `grpc-message: message` (printable ASCII, sent as it is) and an empty
/// body, so that the header block ends the stream.
#[must_use]
pub fn trailers_only<B: From<Bytes>>(code: u8, message: &'static str) -> Response<B> {
    let mut res = Response::new(B::from(Bytes::new()));
    *res.status_mut() = StatusCode::OK;
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from(u16::from(code)));
    headers.insert("grpc-message", HeaderValue::from_static(message));
    res
}

/// The gRPC form of a rejection (close-listener mode's 503, retry-after mode's 429):
/// `UNAVAILABLE`, with `grpc-retry-pushback-ms` set to the canned response's `Retry-After` in
/// milliseconds, and,
/// when the canned response closes its connection (both do), `Connection: close`, which the
/// server turns into a GOAWAY on HTTP/2 as it does for the HTTP answers.
#[must_use]
pub fn rejection<B: From<Bytes>>(canned: &CannedResponse) -> Response<B> {
    let mut res = trailers_only(UNAVAILABLE, SHUTTING_DOWN_MESSAGE);
    let headers = res.headers_mut();
    if let Some(ms) = canned
        .header("Retry-After")
        .and_then(|s| s.parse::<u64>().ok())
        .and_then(|s| s.checked_mul(1000))
    {
        headers.insert("grpc-retry-pushback-ms", HeaderValue::from(ms));
    }
    if canned.close_connection {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

/// The answer to a request the gate rejected with `canned`: its gRPC form for a gRPC call,
/// the HTTP response otherwise. Off the hot path: called only for rejected requests.
#[cold]
#[must_use]
pub fn rejection_for<B: From<Bytes>>(headers: &HeaderMap, canned: &CannedResponse) -> Response<B> {
    if is_grpc(headers) {
        rejection(canned)
    } else {
        crate::request::response::http_response(canned)
    }
}

/// The gRPC form of a deadline passed: `DEADLINE_EXCEEDED`, trailers-only.
#[must_use]
pub fn deadline_exceeded<B: From<Bytes>>() -> Response<B> {
    trailers_only(DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lameduck::responses::{RETRY_AFTER, SHUTTING_DOWN};

    fn headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        h
    }

    #[test]
    fn grpc_content_types() {
        for ct in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC+json",
            "application/grpc; charset=utf-8",
        ] {
            assert!(is_grpc(&headers(ct)), "{ct}");
        }
        for ct in [
            "application/grpc-web",
            "application/json",
            "application/grp",
            "",
        ] {
            assert!(!is_grpc(&headers(ct)), "{ct}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn retry_after_mode_rejection_is_unavailable_with_pushback_and_close() {
        let res: Response<Bytes> = rejection_for(&headers("application/grpc"), &RETRY_AFTER);
        assert_eq!(res.status(), StatusCode::OK);
        let h = res.headers();
        assert_eq!(h["grpc-status"], "14");
        assert_eq!(h["grpc-retry-pushback-ms"], "5000");
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["connection"], "close");
        assert!(res.body().is_empty());
    }

    #[test]
    fn close_listener_mode_rejection_has_one_second_pushback() {
        let res: Response<Bytes> = rejection_for(&headers("application/grpc"), &SHUTTING_DOWN);
        assert_eq!(res.headers()["grpc-retry-pushback-ms"], "1000");
        assert_eq!(res.headers()["connection"], "close");
    }

    #[test]
    fn http_rejection_unchanged() {
        let res: Response<Bytes> = rejection_for(&headers("text/plain"), &RETRY_AFTER);
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()["retry-after"], "5");
    }

    #[test]
    fn deadline_is_status_4() {
        let res: Response<Bytes> = deadline_exceeded();
        assert_eq!(res.headers()["grpc-status"], "4");
        assert_eq!(res.status(), StatusCode::OK);
    }
}
