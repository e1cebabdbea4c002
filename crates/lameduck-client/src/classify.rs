//! How a failed attempt is read: an error from the transport (hyper's, h2's, the socket's,
//! found anywhere in the error's source chain), or a response that asks to be retried later.

use std::error::Error;
use std::io;
use std::time::{Duration, SystemTime};

use http::header::{HeaderName, RETRY_AFTER};
use http::{HeaderMap, StatusCode};

use crate::stats::RetryReason;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_PUSHBACK: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// Why the error of a failed attempt allows a retry, or `None` when it does not. The error
/// and its sources are read outermost first; the first that says something decides:
///
/// - hyper's `is_canceled`: the request was never sent (hyper cancels the requests queued on
///   a connection that is closing): [`RetryReason::Unsent`];
/// - h2's GOAWAY from the server with `NO_ERROR`: h2 fails a request with it only when its
///   stream is above the GOAWAY's last-stream-id or was being opened as the GOAWAY came, so
///   the server did not process it (RFC 9113 section 6.8): [`RetryReason::Refused`];
/// - h2's `RST_STREAM` from the server with `REFUSED_STREAM` (RFC 9113 section 8.7):
///   [`RetryReason::RefusedStream`];
/// - the socket's `ConnectionRefused`: nothing was sent: [`RetryReason::Connect`];
/// - hyper's `is_incomplete_message` (HTTP/1: the connection closed before the response's
///   head was read whole), or the socket's reset, abort, broken pipe or unexpected end:
///   [`RetryReason::Closed`], which only idempotent or marked requests are retried for
///   (the server may have read the request).
///
/// Any other h2 error (a GOAWAY with an error code, another reset) and every other error is
/// final. The layer reads only errors of the response's future, which come before the
/// response's head: an error of a response's body is never the layer's.
pub fn classify_error(error: &(dyn Error + 'static)) -> Option<RetryReason> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<hyper::Error>() {
            if e.is_canceled() {
                return Some(RetryReason::Unsent);
            }
            if e.is_incomplete_message() {
                return Some(RetryReason::Closed);
            }
        } else if let Some(e) = e.downcast_ref::<h2::Error>() {
            if let Some(io) = e.get_io() {
                return classify_io(io);
            }
            let remote = e.is_remote();
            return match e.reason() {
                Some(h2::Reason::NO_ERROR) if e.is_go_away() && remote => {
                    Some(RetryReason::Refused)
                }
                Some(h2::Reason::REFUSED_STREAM) if e.is_reset() && remote => {
                    Some(RetryReason::RefusedStream)
                }
                _ => None,
            };
        } else if let Some(io) = e.downcast_ref::<io::Error>() {
            if let Some(reason) = classify_io(io) {
                return Some(reason);
            }
            // An io::Error's source skips the error it wraps: read that one next.
            if let Some(inner) = io.get_ref() {
                next = Some(inner);
                continue;
            }
        }
        next = e.source();
    }
    None
}

fn classify_io(e: &io::Error) -> Option<RetryReason> {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Some(RetryReason::Connect),
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => Some(RetryReason::Closed),
        _ => None,
    }
}

/// Why a response asks to be retried, and after how long, or `None`:
///
/// - `429 Too Many Requests` or `503 Service Unavailable` with a `Retry-After` of seconds or
///   an HTTP-date (RFC 9110 section 10.2.3): [`RetryReason::RetryAfter`];
/// - a gRPC `UNAVAILABLE` (`grpc-status: 14` in the response's headers: a trailers-only
///   response) with `grpc-retry-pushback-ms` of a non-negative number of milliseconds (gRPC's
///   retry design, A6): [`RetryReason::Pushback`].
///
/// Without the header, or with one that does not parse, the response is final.
pub fn retry_after(status: StatusCode, headers: &HeaderMap) -> Option<(RetryReason, Duration)> {
    classify_response(status, headers, true)
}

/// [`retry_after`], reading the gRPC headers only when `grpc` (the request was a gRPC call):
/// a response to any other request costs no look-up of a header that is not standard.
pub(crate) fn classify_response(
    status: StatusCode,
    headers: &HeaderMap,
    grpc: bool,
) -> Option<(RetryReason, Duration)> {
    match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            let wait = parse_retry_after(headers.get(RETRY_AFTER)?.to_str().ok()?)?;
            Some((RetryReason::RetryAfter, wait))
        }
        StatusCode::OK if grpc => {
            if headers.get(GRPC_STATUS)?.as_bytes() != b"14" {
                return None;
            }
            let ms = headers.get(GRPC_PUSHBACK)?.to_str().ok()?.trim();
            let ms: u64 = if ms.bytes().all(|b| b.is_ascii_digit()) && !ms.is_empty() {
                // A number too large for u64 is a wait longer than any maximum.
                ms.parse().unwrap_or(u64::MAX)
            } else {
                return None;
            };
            Some((RetryReason::Pushback, Duration::from_millis(ms)))
        }
        _ => None,
    }
}

/// `Retry-After`'s value: delay-seconds, or an HTTP-date (the wait until then, zero when
/// past).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Whether a request with `headers` is a gRPC call (`content-type: application/grpc...`).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    !headers.is_empty()
        && headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let h = headers(&[("retry-after", "5")]);
        assert_eq!(
            retry_after(StatusCode::TOO_MANY_REQUESTS, &h),
            Some((RetryReason::RetryAfter, Duration::from_secs(5)))
        );
        assert_eq!(
            retry_after(
                StatusCode::SERVICE_UNAVAILABLE,
                &headers(&[("retry-after", " 0 ")])
            ),
            Some((RetryReason::RetryAfter, Duration::ZERO))
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let (_, wait) = retry_after(
            StatusCode::SERVICE_UNAVAILABLE,
            &headers(&[("retry-after", &later)]),
        )
        .unwrap();
        assert!(
            wait > Duration::from_secs(27) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        let past = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            retry_after(
                StatusCode::TOO_MANY_REQUESTS,
                &headers(&[("retry-after", past)])
            ),
            Some((RetryReason::RetryAfter, Duration::ZERO))
        );
        let huge = "99999999999999999999999";
        assert_eq!(
            retry_after(
                StatusCode::TOO_MANY_REQUESTS,
                &headers(&[("retry-after", huge)])
            ),
            Some((RetryReason::RetryAfter, Duration::from_secs(u64::MAX)))
        );
    }

    #[test]
    fn what_is_final() {
        for (status, h) in [
            (StatusCode::TOO_MANY_REQUESTS, headers(&[])),
            (
                StatusCode::TOO_MANY_REQUESTS,
                headers(&[("retry-after", "-1")]),
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                headers(&[("retry-after", "soon")]),
            ),
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                headers(&[("retry-after", "1")]),
            ),
            (StatusCode::OK, headers(&[("retry-after", "1")])),
            (StatusCode::OK, headers(&[("grpc-status", "14")])),
            (
                StatusCode::OK,
                headers(&[("grpc-status", "13"), ("grpc-retry-pushback-ms", "5")]),
            ),
            (
                StatusCode::OK,
                headers(&[("grpc-status", "14"), ("grpc-retry-pushback-ms", "-1")]),
            ),
            (
                StatusCode::OK,
                headers(&[("grpc-status", "14"), ("grpc-retry-pushback-ms", "")]),
            ),
        ] {
            assert_eq!(retry_after(status, &h), None, "{status} {h:?}");
        }
    }

    #[test]
    fn grpc_pushback() {
        let h = headers(&[("grpc-status", "14"), ("grpc-retry-pushback-ms", "1000")]);
        assert_eq!(
            retry_after(StatusCode::OK, &h),
            Some((RetryReason::Pushback, Duration::from_secs(1)))
        );
    }

    #[test]
    fn socket_errors() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(classify_error(&e), Some(RetryReason::Connect));
        let e = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(classify_error(&e), Some(RetryReason::Closed));
        let e = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(classify_error(&e), None);
        // Found under another error.
        let e = io::Error::other(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(classify_error(&e), Some(RetryReason::Closed));
    }

    #[test]
    fn h2_errors() {
        let e = h2::Error::from(h2::Reason::REFUSED_STREAM);
        // A reason alone (not a reset from the server) is not a refusal.
        assert_eq!(classify_error(&e), None);
    }
}
