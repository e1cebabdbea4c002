//! Unit tests of [`crate::config`].

use super::*;
use crate::duration::DurationError;
use alloc::string::ToString;
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

#[test]
fn string_setter_parses_every_option() {
    let mut builder = Config::builder();
    builder
        .set(ConfigOption::ShutdownDelay, "1m30s")
        .unwrap()
        .set(ConfigOption::ShutdownSendRetryAfter, "TRUE")
        .unwrap()
        .set(ConfigOption::ShutdownWatchTerminationGracePeriod, "0")
        .unwrap()
        .set(ConfigOption::RequestTimeout, "500ms")
        .unwrap()
        .set(ConfigOption::LivezGracePeriod, "1.5h")
        .unwrap()
        .set(ConfigOption::MinWatchDrainQps, "0")
        .unwrap()
        .set(ConfigOption::ExemptPathPrefixes, "/a,/b/c")
        .unwrap()
        .set(ConfigOption::MaxConnectionAge, "30m")
        .unwrap()
        .set(ConfigOption::MaxConnectionAgeGrace, "1m30s")
        .unwrap();
    let config = builder.build().unwrap();
    assert_eq!(config.shutdown_delay(), Duration::from_secs(90));
    assert!(config.shutdown_send_retry_after());
    assert_eq!(
        config.shutdown_watch_termination_grace_period(),
        Duration::ZERO
    );
    assert_eq!(config.request_timeout(), Duration::from_millis(500));
    assert_eq!(config.livez_grace_period(), Duration::from_secs(5400));
    assert_eq!(config.min_watch_drain_qps(), 0);
    assert_eq!(config.exempt_path_prefixes(), ["/a", "/b/c"]);
    assert_eq!(config.max_connection_age(), Duration::from_secs(1800));
    assert_eq!(config.max_connection_age_grace(), Duration::from_secs(90));

    let mut builder = Config::builder();
    for (text, want) in [("1", true), ("0", false), ("True", true), ("fAlSe", false)] {
        builder
            .set(ConfigOption::ShutdownSendRetryAfter, text)
            .unwrap();
        assert_eq!(
            builder.clone().build().unwrap().shutdown_send_retry_after(),
            want
        );
    }
    builder.set(ConfigOption::ExemptPathPrefixes, "").unwrap();
    assert!(builder.build().unwrap().exempt_path_prefixes().is_empty());
}

#[test]
fn failed_set_leaves_the_builder_unchanged() {
    let mut builder = Config::builder();
    for option in ConfigOption::ALL {
        assert!(builder.set(option, "bogus").is_err());
    }
    assert!(builder
        .set(ConfigOption::ExemptPathPrefixes, "/ok,bad")
        .is_err());
    assert_eq!(builder.build(), Ok(Config::default()));
}

#[test]
fn every_error_message_names_the_flag() {
    for option in ConfigOption::ALL {
        let err = Config::builder().set(option, "bogus").unwrap_err();
        assert_eq!(err.option(), Some(option));
        let msg = err.to_string();
        assert!(msg.contains(option.flag()), "{msg}");
        assert!(msg.contains("\"bogus\""), "{msg}");
    }
}

#[test]
fn error_messages() {
    let msg = |option, value: &str| {
        Config::builder()
            .set(option, value)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        msg(ConfigOption::ShutdownDelay, "abc"),
        r#"invalid value "abc" for --shutdown-delay: expected numbers with units, such as 500ms, 2s or 1m30s"#
    );
    assert_eq!(
        msg(ConfigOption::ShutdownDelay, "-1s"),
        r#"--shutdown-delay can not be a negative value (got "-1s")"#
    );
    assert_eq!(
        msg(ConfigOption::RequestTimeout, "10"),
        r#"invalid value "10" for --request-timeout: missing unit (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        msg(ConfigOption::LivezGracePeriod, "9999999999h"),
        r#"invalid value "9999999999h" for --livez-grace-period: longer than the maximum 2562047h47m16.854775807s"#
    );
    assert_eq!(
        msg(ConfigOption::ShutdownSendRetryAfter, "yes"),
        r#"invalid value "yes" for --shutdown-send-retry-after: expected true, false, 1 or 0"#
    );
    assert_eq!(
        msg(ConfigOption::MinWatchDrainQps, "-5"),
        r#"invalid value "-5" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
    );
    assert_eq!(
        msg(ConfigOption::MinWatchDrainQps, "4294967296"),
        r#"invalid value "4294967296" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
    );
    assert_eq!(
        msg(ConfigOption::ExemptPathPrefixes, "/a,,/b"),
        r#"invalid value "" for --exempt-path-prefix: a path prefix must start with '/'"#
    );
    assert_eq!(
        msg(ConfigOption::ExemptPathPrefixes, "/a, /b"),
        r#"invalid value " /b" for --exempt-path-prefix: a path prefix must start with '/'"#
    );
    let err = Config::builder()
        .set(ConfigOption::ShutdownDelay, "-1s")
        .unwrap_err();
    assert!(matches!(
        err,
        ConfigError::InvalidDuration {
            option: ConfigOption::ShutdownDelay,
            source: DurationError::Negative { .. },
            ..
        }
    ));
}

#[test]
fn build_rejects_too_large_and_bad_prefixes() {
    let max = MAX_CONFIG_DURATION;
    let over = max + Duration::from_nanos(1);
    assert!(Config::builder()
        .shutdown_delay(max)
        .request_timeout(max)
        .build()
        .is_ok());
    let setters: [fn(ConfigBuilder, Duration) -> ConfigBuilder; 7] = [
        ConfigBuilder::shutdown_delay,
        ConfigBuilder::shutdown_watch_termination_grace_period,
        ConfigBuilder::request_timeout,
        ConfigBuilder::livez_grace_period,
        ConfigBuilder::idle_close_spread,
        ConfigBuilder::max_connection_age,
        ConfigBuilder::max_connection_age_grace,
    ];
    let options: Vec<_> = ConfigOption::ALL
        .into_iter()
        .filter(|o| o.is_duration())
        .collect();
    assert_eq!(options.len(), setters.len());
    let options = ConfigOption::ALL.into_iter().filter(|o| o.is_duration());
    for (setter, option) in setters.into_iter().zip(options) {
        let err = setter(Config::builder(), over).build().unwrap_err();
        assert_eq!(
            err,
            ConfigError::TooLarge {
                option,
                value: over,
                max
            }
        );
        assert!(err.to_string().starts_with(option.flag()), "{err}");
    }
    assert_eq!(
        Config::builder().request_timeout(Duration::MAX).build().unwrap_err().to_string(),
        "--request-timeout can not be longer than 2562047h47m16.854775807s, got 5124095576030431h0m15.999999999s"
    );
    assert_eq!(
        Config::builder()
            .exempt_path_prefixes(["/ok", "nope"])
            .build(),
        Err(ConfigError::InvalidPathPrefix {
            option: ConfigOption::ExemptPathPrefixes,
            value: "nope".to_string()
        })
    );
    assert!(Config::builder()
        .exempt_path_prefixes([""])
        .build()
        .is_err());
    let zero = Config::builder()
        .shutdown_delay(Duration::ZERO)
        .request_timeout(Duration::ZERO)
        .min_watch_drain_qps(0)
        .build()
        .unwrap();
    assert_eq!(zero.http_shutdown_timeout(), Duration::ZERO);
}

#[test]
fn option_names() {
    let flags = [
        "--shutdown-delay",
        "--shutdown-send-retry-after",
        "--shutdown-watch-termination-grace-period",
        "--request-timeout",
        "--livez-grace-period",
        "--min-watch-drain-qps",
        "--exempt-path-prefix",
        "--goaway-chance",
        "--idle-close-spread",
        "--max-connection-age",
        "--max-connection-age-grace",
    ];
    let fields = [
        "shutdown_delay",
        "shutdown_send_retry_after",
        "shutdown_watch_termination_grace_period",
        "request_timeout",
        "livez_grace_period",
        "min_watch_drain_qps",
        "exempt_path_prefixes",
        "goaway_chance",
        "idle_close_spread",
        "max_connection_age",
        "max_connection_age_grace",
    ];
    assert_eq!(ConfigOption::ALL.len(), flags.len());
    for ((option, flag), field) in ConfigOption::ALL.into_iter().zip(flags).zip(fields) {
        assert_eq!(option.flag(), flag);
        assert_eq!(option.field(), field);
        assert_eq!(option.to_string(), flag);
        assert_eq!(flag.parse(), Ok(option));
        assert_eq!(flag[2..].parse(), Ok(option));
        assert_eq!(field.parse(), Ok(option));
        assert!(!option.help().is_empty());
    }
    assert_eq!(
        "--shutdown-delay-duration".parse(),
        Ok(ConfigOption::ShutdownDelay)
    );
    assert_eq!(
        "exempt-path-prefixes".parse(),
        Ok(ConfigOption::ExemptPathPrefixes)
    );
    for bad in [
        "",
        "--",
        "-shutdown-delay",
        "--shutdown_delay_x",
        "Shutdown-Delay",
        "--listen",
    ] {
        assert_eq!(
            bad.parse::<ConfigOption>(),
            Err(ConfigError::UnknownOption {
                name: bad.to_string()
            })
        );
    }
    assert_eq!(
        "--listen".parse::<ConfigOption>().unwrap_err().to_string(),
        r#"unknown option "--listen""#
    );
    assert_eq!(ConfigOption::ALL.iter().filter(|o| o.is_bool()).count(), 1);
}

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

#[test]
fn max_connection_age_and_grace_are_off_by_default_and_parsed_as_durations() {
    let config = Config::default();
    assert_eq!(config.max_connection_age(), Duration::ZERO);
    assert_eq!(config.max_connection_age_grace(), Duration::ZERO);
    for sample in [0, 1, 1 << 31, u32::MAX] {
        assert_eq!(config.connection_age_limit(sample), None);
    }
    let mut builder = Config::builder();
    builder
        .set(ConfigOption::MaxConnectionAge, "10m")
        .unwrap()
        .set("--max-connection-age-grace".parse().unwrap(), "30s")
        .unwrap();
    let config = builder.build().unwrap();
    assert_eq!(config.max_connection_age(), Duration::from_secs(600));
    assert_eq!(config.max_connection_age_grace(), Duration::from_secs(30));
    // Zero is valid for both: off, and no bound of its own.
    let mut zero = config.to_builder();
    zero.set(ConfigOption::MaxConnectionAge, "0")
        .unwrap()
        .set(ConfigOption::MaxConnectionAgeGrace, "0s")
        .unwrap();
    assert_eq!(zero.build(), Ok(Config::default()));
    // A grace without an age is valid too (it has nothing to bound).
    assert!(Config::builder()
        .max_connection_age_grace(Duration::from_secs(5))
        .build()
        .is_ok());
    // Neither has to be shorter than any other bound.
    assert!(Config::builder()
        .max_connection_age(MAX_CONFIG_DURATION)
        .max_connection_age_grace(MAX_CONFIG_DURATION)
        .shutdown_send_retry_after(true)
        .build()
        .is_ok());

    let msg = |option, value: &str| {
        Config::builder()
            .set(option, value)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        msg(ConfigOption::MaxConnectionAge, "-1s"),
        r#"--max-connection-age can not be a negative value (got "-1s")"#
    );
    assert_eq!(
        msg(ConfigOption::MaxConnectionAgeGrace, "-5m"),
        r#"--max-connection-age-grace can not be a negative value (got "-5m")"#
    );
    assert_eq!(
        msg(ConfigOption::MaxConnectionAge, "10"),
        r#"invalid value "10" for --max-connection-age: missing unit (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        msg(ConfigOption::MaxConnectionAgeGrace, "9999999999h"),
        r#"invalid value "9999999999h" for --max-connection-age-grace: longer than the maximum 2562047h47m16.854775807s"#
    );
    for option in [
        ConfigOption::MaxConnectionAge,
        ConfigOption::MaxConnectionAgeGrace,
    ] {
        assert!(option.is_duration());
        assert!(!option.is_bool());
        assert_eq!(option.default_value(), "0s");
        let err = Config::builder().set(option, "1x").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::InvalidDuration { option: o, .. } if o == option
        ));
        let over = MAX_CONFIG_DURATION + Duration::from_nanos(1);
        let builder = match option {
            ConfigOption::MaxConnectionAge => Config::builder().max_connection_age(over),
            _ => Config::builder().max_connection_age_grace(over),
        };
        assert_eq!(
            builder.build(),
            Err(ConfigError::TooLarge {
                option,
                value: over,
                max: MAX_CONFIG_DURATION
            })
        );
    }
}

/// The connection-age limit drawn with `sample` for an age of `age`.
fn age_limit_of(age: Duration, sample: u32) -> Duration {
    Config::builder()
        .request_timeout(Duration::ZERO)
        .max_connection_age(age)
        .build()
        .unwrap()
        .connection_age_limit(sample)
        .unwrap()
}

#[test]
fn connection_age_limits_span_nine_to_eleven_tenths() {
    let ten_min = Duration::from_secs(600);
    // Both ends and the middle.
    assert_eq!(age_limit_of(ten_min, 0), Duration::from_secs(540));
    assert_eq!(age_limit_of(ten_min, u32::MAX), Duration::from_secs(660));
    let middle = age_limit_of(ten_min, 1 << 31);
    // `2³¹ / (2³² − 1)` is a hair over a half.
    assert!(middle >= ten_min, "{middle:?}");
    assert!(middle - ten_min < Duration::from_micros(1), "{middle:?}");
    assert_eq!(
        age_limit_of(ten_min, u32::MAX / 2),
        Duration::from_secs(600) - Duration::from_nanos(14)
    );
    // One nanosecond: 0.9 ns rounds down to nothing, 1.1 ns to one.
    assert_eq!(age_limit_of(Duration::from_nanos(1), 0), Duration::ZERO);
    assert_eq!(
        age_limit_of(Duration::from_nanos(1), u32::MAX),
        Duration::from_nanos(1)
    );
    // Evenly spaced samples give limits evenly spread over ten buckets of 0.02 × the age.
    let second = Duration::from_secs(1);
    let mut buckets = [0u32; 10];
    let n = 10_000u32;
    for i in 0..n {
        let sample = u32::try_from(u64::from(i) * (1u64 << 32) / u64::from(n)).unwrap();
        let ms = age_limit_of(second, sample).as_millis() - 900;
        buckets[usize::try_from(ms / 20).unwrap()] += 1;
    }
    assert!(
        buckets.iter().all(|&b| b.abs_diff(n / 10) <= 1),
        "{buckets:?}"
    );
}

#[test]
fn connection_age_limits_stay_in_bounds_and_grow_with_the_sample() {
    // Samples from both ends, the middle and spread between, in increasing order.
    let mut samples: Vec<u32> = (0..=64u64)
        .map(|i| u32::try_from(i * u64::from(u32::MAX) / 64).unwrap())
        .collect();
    samples.extend([1, 2, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, u32::MAX - 1]);
    samples.sort_unstable();
    // Ages from a nanosecond to the longest a configuration holds, odd ones among them.
    let mut ages = alloc::vec![
        Duration::from_nanos(1),
        Duration::from_nanos(7),
        Duration::from_nanos(10),
        Duration::from_nanos(999_999_999),
        Duration::from_millis(1),
        Duration::from_secs(1),
        Duration::new(3_600, 123_456_789),
        Duration::from_secs(86_400 * 365),
        MAX_CONFIG_DURATION - Duration::from_nanos(1),
        MAX_CONFIG_DURATION,
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..200 {
        // xorshift64: reproducible ages across every magnitude.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let nanos = (x >> (x % 64)) % (u64::try_from(MAX_CONFIG_DURATION.as_nanos()).unwrap() + 1);
        ages.push(Duration::from_nanos(nanos.max(1)));
    }
    for age in ages {
        let nanos = age.as_nanos();
        let (low, high) = (nanos * 9 / 10, nanos * 11 / 10);
        let mut previous = Duration::ZERO;
        for &sample in &samples {
            let limit = age_limit_of(age, sample);
            let got = limit.as_nanos();
            assert!(low <= got && got <= high, "{age:?} × {sample}: {limit:?}");
            assert!(
                limit >= previous,
                "{age:?}: {sample} gave {limit:?} < {previous:?}"
            );
            previous = limit;
        }
        assert_eq!(age_limit_of(age, 0).as_nanos(), low, "{age:?}");
        assert_eq!(age_limit_of(age, u32::MAX).as_nanos(), high, "{age:?}");
    }
}

#[test]
fn connection_age_draw_saturates_beyond_the_configurable_range() {
    // Past `MAX_CONFIG_DURATION` (which `build` rejects), the draw still neither panics nor
    // leaves its bounds, up to the longest `Duration`, where 1.1 × saturates.
    for age in [
        MAX_CONFIG_DURATION * 2,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(u64::MAX / 11 * 10),
        Duration::MAX - Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let low = draw::age_limit(age, 0);
        assert_eq!(low.as_nanos(), age.as_nanos() * 9 / 10, "{age:?}");
        let mut previous = low;
        for sample in [1, 1 << 16, 1 << 31, u32::MAX - 1, u32::MAX] {
            let limit = draw::age_limit(age, sample);
            assert!(limit >= previous, "{age:?} × {sample}: {limit:?}");
            let exact = age.as_nanos() * 11 / 10;
            assert!(limit.as_nanos() <= exact, "{age:?} × {sample}: {limit:?}");
            previous = limit;
        }
    }
    assert_eq!(draw::age_limit(Duration::MAX, u32::MAX), Duration::MAX);
    assert_eq!(
        draw::age_limit(Duration::from_secs(u64::MAX / 11 * 10), u32::MAX),
        Duration::from_secs(u64::MAX / 11 * 11)
    );
}
