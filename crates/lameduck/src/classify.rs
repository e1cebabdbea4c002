//! Request classes: normal, long-running or exempt (see the repository's
//! `docs/design.md#vocabulary`).

/// How the admission layer treats a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestClass {
    /// Tracked by the normal wait group; bounded by `request_timeout`.
    Normal,
    /// A watch, SSE or WebSocket request: tracked by the long-running wait group, signalled
    /// at `NotAcceptingNewRequest` and drained at a paced rate within the grace period.
    LongRunning,
    /// Health and metrics paths: never rejected. Tracked in the normal drain, with the request
    /// timeout, when admitted before the gate closes; served untracked after that.
    Exempt,
}

/// The parts of a request classification looks at, borrowed from the adapter's request type.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestInfo<'a> {
    /// The URL path, e.g. `/api/v1/pods`.
    pub path: &'a str,
    /// The raw query string without `?`, if any.
    pub query: Option<&'a str>,
    /// The `Accept` header, if present and valid UTF-8.
    pub accept: Option<&'a str>,
    /// Whether the request carries an `Upgrade` header (WebSocket and friends).
    pub upgrade: bool,
}

/// The default long-running predicate: query `watch=true` or `watch=1`,
/// `Accept: text/event-stream`, or an `Upgrade` header.
///
/// Inlined where it is called, up to the request's first fact that needs a closer look: a
/// request without `Accept` header and query, the common case, costs three comparisons.
#[must_use]
#[inline]
pub fn default_is_long_running(req: &RequestInfo<'_>) -> bool {
    req.upgrade || ((req.accept.is_some() || req.query.is_some()) && streams_or_watches(req))
}

/// Whether `req` accepts an event stream or asks for a watch (the part of
/// [`default_is_long_running`] that reads the `Accept` header and the query).
#[inline(never)]
fn streams_or_watches(req: &RequestInfo<'_>) -> bool {
    if let Some(accept) = req.accept {
        if accept
            .split(',')
            .any(|v| media_type(v).eq_ignore_ascii_case("text/event-stream"))
        {
            return true;
        }
    }
    req.query.is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1" | "watch=True" | "watch=TRUE"))
    })
}

fn media_type(v: &str) -> &str {
    v.split(';').next().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info<'a>(path: &'a str, query: Option<&'a str>, accept: Option<&'a str>) -> RequestInfo<'a> {
        RequestInfo {
            path,
            query,
            accept,
            upgrade: false,
        }
    }

    #[test]
    fn default_predicate() {
        assert!(default_is_long_running(&info(
            "/x",
            Some("a=1&watch=true"),
            None
        )));
        assert!(default_is_long_running(&info("/x", Some("watch=1"), None)));
        assert!(!default_is_long_running(&info(
            "/x",
            Some("watch=false"),
            None
        )));
        assert!(!default_is_long_running(&info(
            "/x",
            Some("nowatch=true"),
            None
        )));
        assert!(default_is_long_running(&info(
            "/x",
            None,
            Some("text/html, text/event-stream;q=0.9")
        )));
        assert!(!default_is_long_running(&info(
            "/x",
            None,
            Some("application/json")
        )));
        let mut ws = info("/ws", None, None);
        ws.upgrade = true;
        assert!(default_is_long_running(&ws));
    }
}
