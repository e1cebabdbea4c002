//! The idle-close spread: off by default, shorter than the HTTP shutdown timeout, and its
//! delays cover the window evenly.

use super::super::*;
use alloc::string::ToString;

#[test]
fn idle_close_spread_is_off_by_default_and_shorter_than_the_http_shutdown_timeout() {
    assert_eq!(Config::default().idle_close_spread(), Duration::ZERO);
    assert_eq!(Config::default().idle_close_delay(u32::MAX), Duration::ZERO);
    let mut builder = Config::builder();
    builder.set(ConfigOption::IdleCloseSpread, "2s").unwrap();
    let config = builder.build().unwrap();
    assert_eq!(config.idle_close_spread(), Duration::from_secs(2));

    // Close-listener mode: shorter than the request timeout, when there is one.
    let secs = |s| Duration::from_secs(s);
    let spread = |spread, timeout, retry_after| {
        Config::builder()
            .idle_close_spread(spread)
            .request_timeout(timeout)
            .shutdown_send_retry_after(retry_after)
            .build()
    };
    assert!(spread(secs(59), secs(60), false).is_ok());
    assert!(spread(secs(100), Duration::ZERO, false).is_ok());
    let err = spread(secs(60), secs(60), false).unwrap_err();
    assert_eq!(
        err,
        ConfigError::SpreadNotShorter {
            option: ConfigOption::IdleCloseSpread,
            value: secs(60),
            http_shutdown_timeout: secs(60),
        }
    );
    assert_eq!(err.option(), Some(ConfigOption::IdleCloseSpread));
    assert_eq!(
        err.to_string(),
        "--idle-close-spread (1m0s) must be shorter than the HTTP shutdown timeout (1m0s: \
         --request-timeout, or 2s in retry-after mode)"
    );
    // Retry-after mode: shorter than its fixed 2 s, whatever the request timeout.
    assert!(spread(Duration::from_millis(1999), Duration::ZERO, true).is_ok());
    assert!(matches!(
        spread(secs(2), Duration::ZERO, true),
        Err(ConfigError::SpreadNotShorter { .. })
    ));
    // Zero is off, and always valid.
    assert!(spread(Duration::ZERO, Duration::ZERO, true).is_ok());
}

#[test]
fn idle_close_delays_cover_the_window_evenly() {
    let config = Config::builder()
        .idle_close_spread(Duration::from_secs(1))
        .build()
        .unwrap();
    assert_eq!(config.idle_close_delay(0), Duration::ZERO);
    assert_eq!(config.idle_close_delay(1 << 31), Duration::from_millis(500));
    assert_eq!(config.idle_close_delay(1 << 30), Duration::from_millis(250));
    // The largest sample stays inside the window.
    let last = config.idle_close_delay(u32::MAX);
    assert!(last < Duration::from_secs(1), "{last:?}");
    assert_eq!(last, Duration::from_nanos(999_999_999));
    // Evenly spaced samples give delays evenly spread over ten 100 ms buckets.
    let mut buckets = [0u32; 10];
    let n = 10_000u32;
    for i in 0..n {
        let sample = u32::try_from(u64::from(i) * (1u64 << 32) / u64::from(n)).unwrap();
        let ms = config.idle_close_delay(sample).as_millis();
        buckets[usize::try_from(ms / 100).unwrap()] += 1;
    }
    // (Each edge may round one sample into its neighbour.)
    assert!(
        buckets.iter().all(|&b| b.abs_diff(n / 10) <= 1),
        "{buckets:?}"
    );
    // The longest window a configuration can hold does not overflow.
    let long = Config::builder()
        .request_timeout(Duration::ZERO)
        .idle_close_spread(MAX_CONFIG_DURATION)
        .build()
        .unwrap();
    assert!(long.idle_close_delay(u32::MAX) < MAX_CONFIG_DURATION);
}
