//! What is refused, and the messages: each names its flag and the value; durations past the
//! longest a configuration holds, and path prefixes that do not start with `/`.

use super::super::*;
use super::set_error;
use crate::duration::DurationError;
use alloc::string::ToString;
use alloc::vec::Vec;

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
    assert_eq!(
        set_error(ConfigOption::ShutdownDelay, "abc"),
        r#"invalid value "abc" for --shutdown-delay: expected numbers with units, such as 500ms, 2s or 1m30s"#
    );
    assert_eq!(
        set_error(ConfigOption::ShutdownDelay, "-1s"),
        r#"--shutdown-delay can not be a negative value (got "-1s")"#
    );
    assert_eq!(
        set_error(ConfigOption::RequestTimeout, "10"),
        r#"invalid value "10" for --request-timeout: missing unit (use one of ns, us, µs, ms, s, m, h)"#
    );
    assert_eq!(
        set_error(ConfigOption::LivezGracePeriod, "9999999999h"),
        r#"invalid value "9999999999h" for --livez-grace-period: longer than the maximum 2562047h47m16.854775807s"#
    );
    assert_eq!(
        set_error(ConfigOption::ShutdownSendRetryAfter, "yes"),
        r#"invalid value "yes" for --shutdown-send-retry-after: expected true, false, 1 or 0"#
    );
    assert_eq!(
        set_error(ConfigOption::MinWatchDrainQps, "-5"),
        r#"invalid value "-5" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
    );
    assert_eq!(
        set_error(ConfigOption::MinWatchDrainQps, "4294967296"),
        r#"invalid value "4294967296" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
    );
    assert_eq!(
        set_error(ConfigOption::ExemptPathPrefixes, "/a,,/b"),
        r#"invalid value "" for --exempt-path-prefix: a path prefix must start with '/'"#
    );
    assert_eq!(
        set_error(ConfigOption::ExemptPathPrefixes, "/a, /b"),
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
