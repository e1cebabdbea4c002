//! The maximum connection age and its grace: off by default, parsed as durations, and each
//! connection's limit drawn within 0.9 to 1.1 times the age, growing with the sample,
//! saturating past the configurable range.

use super::super::*;
use super::set_error;
use alloc::vec::Vec;

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

    assert_eq!(
        set_error(ConfigOption::MaxConnectionAge, "-1s"),
        r#"--max-connection-age can not be a negative value (got "-1s")"#
    );
    assert_eq!(
        set_error(ConfigOption::MaxConnectionAgeGrace, "-5m"),
        r#"--max-connection-age-grace can not be a negative value (got "-5m")"#
    );
    assert_eq!(
        set_error(ConfigOption::MaxConnectionAge, "10"),
        r#"invalid value "10" for --max-connection-age: missing unit (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        set_error(ConfigOption::MaxConnectionAgeGrace, "9999999999h"),
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
