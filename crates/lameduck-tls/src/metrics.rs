//! The series of TLS serving, through the `metrics` facade (the `metrics` feature); without
//! the feature these are empty functions.

use std::path::Path;

/// `lameduck_tls_reloads_total{file}`: files reloaded (`certificate` or `client_ca`).
#[cfg(feature = "metrics")]
pub(crate) fn reloaded(file: &'static str) {
    metrics::counter!("lameduck_tls_reloads_total", "file" => file).increment(1);
}

/// `lameduck_tls_reload_failures_total{path}`: reloads refused (the current pair was kept).
#[cfg(feature = "metrics")]
pub(crate) fn reload_failed(path: Option<&Path>) {
    let path = path.map(|p| p.display().to_string()).unwrap_or_default();
    metrics::counter!("lameduck_tls_reload_failures_total", "path" => path).increment(1);
}

/// `lameduck_tls_handshake_failures_total{reason}`.
#[cfg(feature = "metrics")]
pub(crate) fn handshake_failed(reason: &'static str) {
    metrics::counter!("lameduck_tls_handshake_failures_total", "reason" => reason).increment(1);
}

#[cfg(not(feature = "metrics"))]
pub(crate) fn reloaded(_file: &'static str) {}

#[cfg(not(feature = "metrics"))]
pub(crate) fn reload_failed(_path: Option<&Path>) {}

#[cfg(not(feature = "metrics"))]
pub(crate) fn handshake_failed(_reason: &'static str) {}
