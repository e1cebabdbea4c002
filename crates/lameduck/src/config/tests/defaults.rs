//! The defaults: the design table's values, what the options' default strings parse to,
//! the HTTP shutdown timeout of each mode, and the exempt path prefixes.

use super::super::*;
use alloc::string::String;
use alloc::vec::Vec;

#[test]
fn defaults_match_the_design_table() {
    let config = Config::default();
    assert_eq!(config.shutdown_delay(), Duration::ZERO);
    assert!(!config.shutdown_send_retry_after());
    assert_eq!(config.mode(), ShutdownMode::CloseListener);
    assert_eq!(config.goaway_chance(), GoawayChance::OFF);
    assert_eq!(
        config.shutdown_watch_termination_grace_period(),
        Duration::ZERO
    );
    assert_eq!(config.request_timeout(), Duration::from_secs(60));
    assert_eq!(config.livez_grace_period(), Duration::ZERO);
    assert_eq!(config.min_watch_drain_qps(), 200);
    assert_eq!(config.http_shutdown_timeout(), Duration::from_secs(60));
    assert_eq!(config.idle_close_spread(), Duration::ZERO);
    assert_eq!(config.max_connection_age(), Duration::ZERO);
    assert_eq!(config.max_connection_age_grace(), Duration::ZERO);
    assert_eq!(
        config.exempt_path_prefixes(),
        ["/readyz", "/livez", "/healthz", "/metrics"]
    );
    assert_eq!(Config::builder().build(), Ok(config.clone()));
    assert_eq!(config.to_builder().build(), Ok(config));
    assert_eq!(ShutdownMode::default(), ShutdownMode::CloseListener);
}

#[test]
fn default_values_parse_back_to_the_defaults() {
    let mut builder = Config::builder()
        .shutdown_delay(Duration::from_secs(1))
        .shutdown_send_retry_after(true)
        .shutdown_watch_termination_grace_period(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(1))
        .livez_grace_period(Duration::from_secs(1))
        .min_watch_drain_qps(1)
        .exempt_path_prefixes(["/x"])
        .goaway_chance(GoawayChance::MAX)
        .idle_close_spread(Duration::from_millis(500))
        .max_connection_age(Duration::from_secs(1))
        .max_connection_age_grace(Duration::from_secs(1));
    for option in ConfigOption::ALL {
        builder.set(option, option.default_value()).unwrap();
    }
    assert_eq!(builder.build(), Ok(Config::default()));
}

#[test]
fn http_shutdown_timeout_per_mode() {
    let a = Config::builder()
        .request_timeout(Duration::from_secs(7))
        .build()
        .unwrap();
    assert_eq!(a.mode(), ShutdownMode::CloseListener);
    assert_eq!(a.http_shutdown_timeout(), Duration::from_secs(7));
    let b = a
        .to_builder()
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    assert_eq!(b.mode(), ShutdownMode::SendRetryAfter);
    assert_eq!(b.http_shutdown_timeout(), MODE_B_HTTP_SHUTDOWN_TIMEOUT);
    assert_eq!(b.http_shutdown_timeout(), Duration::from_secs(2));
}

#[test]
fn exempt_paths_are_plain_prefixes() {
    let config = Config::default();
    for path in [
        "/readyz",
        "/livez",
        "/healthz",
        "/metrics",
        "/healthzx",
        "/readyz/shutdown",
        "/livez?verbose",
    ] {
        assert!(config.is_exempt_path(path), "{path}");
    }
    for path in ["/api", "/", "", "/Healthz", "healthz", "/v1/healthz"] {
        assert!(!config.is_exempt_path(path), "{path}");
    }
    let none = Config::builder()
        .exempt_path_prefixes(Vec::<String>::new())
        .build()
        .unwrap();
    assert!(!none.is_exempt_path("/healthz"));
    let custom = Config::builder()
        .exempt_path_prefixes(["/status"])
        .build()
        .unwrap();
    assert!(custom.is_exempt_path("/status/ok"));
    assert!(!custom.is_exempt_path("/healthz"));
}
