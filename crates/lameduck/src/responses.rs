//! The canned HTTP responses adapters send on behalf of the lifecycle, byte for byte as
//! kube-apiserver sends them (see the repository's `docs/design.md#client-view`).

/// A fixed response: status, headers and body. Adapters copy these bytes out.
#[derive(Debug, PartialEq, Eq)]
pub struct CannedResponse {
    /// HTTP status code.
    pub status: u16,
    /// Header names and values, in order.
    pub headers: &'static [(&'static str, &'static str)],
    /// The body.
    pub body: &'static str,
    /// Whether the connection must close after this response (`Connection: close`; on HTTP/2
    /// the adapter sends GOAWAY instead).
    pub close_connection: bool,
}

/// Close-listener mode after `NotAcceptingNewRequest`: a request that still reaches the
/// admission layer (kube-apiserver's `WithWaitGroup`).
pub const SHUTTING_DOWN: CannedResponse = CannedResponse {
    status: 503,
    headers: &[
        ("Retry-After", "1"),
        ("Connection", "close"),
        ("Content-Type", "application/json"),
        ("X-Content-Type-Options", "nosniff"),
    ],
    body: "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"apiserver is shutting down\",\"reason\":\"ServiceUnavailable\",\"code\":503}\n\n",
    close_connection: true,
};

/// Retry-after mode from `NotAcceptingNewRequest` until the drain ends (kube-apiserver's
/// `WithRetryAfter`).
pub const RETRY_AFTER: CannedResponse = CannedResponse {
    status: 429,
    headers: &[
        ("Retry-After", "5"),
        ("Connection", "close"),
        ("Content-Type", "text/plain; charset=utf-8"),
        ("X-Content-Type-Options", "nosniff"),
    ],
    body: "The apiserver is shutting down, please try again later.\n",
    close_connection: true,
};

/// A normal request that ran past `request_timeout` (kube-apiserver's timeout filter).
pub const REQUEST_TIMEOUT: CannedResponse = CannedResponse {
    status: 504,
    headers: &[
        ("Content-Type", "application/json"),
        ("X-Content-Type-Options", "nosniff"),
    ],
    body: "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n",
    close_connection: false,
};

/// An unknown path before `MuxAndDiscoveryComplete` (kube-apiserver's `notfoundhandler`).
pub const ROUTES_NOT_READY: CannedResponse = CannedResponse {
    status: 503,
    headers: &[
        ("Retry-After", "5"),
        ("Content-Type", "application/json"),
        ("X-Content-Type-Options", "nosniff"),
    ],
    body: "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the request has been made before all known HTTP paths have been installed, please try again\",\"reason\":\"ServiceUnavailable\",\"details\":{\"retryAfterSeconds\":5},\"code\":503}\n",
    close_connection: false,
};

impl CannedResponse {
    /// The value of `name` among the headers (case-insensitive), if present.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&'static str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_values_match_kube() {
        assert_eq!(SHUTTING_DOWN.header("retry-after"), Some("1"));
        assert_eq!(SHUTTING_DOWN.header("Connection"), Some("close"));
        assert_eq!(RETRY_AFTER.header("Retry-After"), Some("5"));
        assert_eq!(RETRY_AFTER.header("Connection"), Some("close"));
        assert_eq!(ROUTES_NOT_READY.header("Retry-After"), Some("5"));
        assert!(SHUTTING_DOWN.body.ends_with("}\n\n"));
        assert_eq!(REQUEST_TIMEOUT.status, 504);
    }
}
