//! Logging for the example servers: tracing to stderr, `info` by default (`RUST_LOG`
//! overrides).

/// Installs a plain-text tracing subscriber writing to stderr.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
