//! Handshake failures, logged without flooding: a client failing a thousand handshakes a
//! second (a port scanner, a plaintext health check, a client with the wrong CA) writes one
//! line per [`LOG_WINDOW`] at info level, with the count of those not logged; every failure is
//! logged at debug level and counted.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one info line about failed handshakes per window.
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// No complete handshake within the handshake timeout.
    #[error("no complete handshake within {0:?}")]
    TimedOut(Duration),
    /// The client spoke plaintext HTTP to the TLS port; it was answered 400.
    #[error("plaintext HTTP on the TLS port (answered 400 Bad Request)")]
    PlaintextHttp,
    /// The client closed the connection before the handshake completed.
    #[error("the client closed the connection during the handshake")]
    Closed,
    /// TLS refused the client (no common protocol or cipher, a bad or missing client
    /// certificate, garbage), or the connection failed.
    #[error("{0}")]
    Failed(#[from] std::io::Error),
}

impl HandshakeError {
    /// A short, fixed name for the kind of failure (a metric label).
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            HandshakeError::TimedOut(_) => "timeout",
            HandshakeError::PlaintextHttp => "plaintext_http",
            HandshakeError::Closed => "closed",
            HandshakeError::Failed(_) => "tls",
        }
    }
}

/// The failures of one server's handshakes.
#[derive(Debug, Default)]
pub(crate) struct HandshakeFailures {
    total: AtomicU64,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// When the last info line was written.
    logged_at: Option<Instant>,
    /// Failures since then that were not logged at info.
    not_logged: u64,
}

impl HandshakeFailures {
    /// Counts and logs one failure.
    pub(crate) fn record(&self, peer: SocketAddr, error: &HandshakeError) {
        self.total.fetch_add(1, Ordering::Relaxed);
        crate::metrics::handshake_failed(error.kind());
        tracing::debug!(%peer, "TLS handshake failed: {error}");
        let now = Instant::now();
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let due = window
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_WINDOW);
        if !due {
            window.not_logged += 1;
            return;
        }
        let not_logged = std::mem::take(&mut window.not_logged);
        window.logged_at = Some(now);
        drop(window);
        tracing::info!(%peer, "TLS handshake failed: {error}{}", Suppressed(not_logged));
    }

    /// Failures so far.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// ` (N more since the last line)`, or nothing.
struct Suppressed(u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more failed since the last line like this)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_counted_whole_and_logged_once() {
        let failures = HandshakeFailures::default();
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        for _ in 0..1000 {
            failures.record(peer, &HandshakeError::Closed);
        }
        assert_eq!(failures.total(), 1000);
        let window = failures.window.lock().unwrap();
        assert!(window.logged_at.is_some());
        assert_eq!(window.not_logged, 999);
    }

    #[test]
    fn kinds_are_fixed_labels() {
        assert_eq!(HandshakeError::PlaintextHttp.kind(), "plaintext_http");
        assert_eq!(HandshakeError::TimedOut(Duration::ZERO).kind(), "timeout");
        let io = std::io::Error::other("x");
        assert_eq!(HandshakeError::from(io).kind(), "tls");
    }
}
