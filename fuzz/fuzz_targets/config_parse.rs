//! Duration and configuration parsing never panics, and every accepted duration round-trips
//! through Go formatting.
//!
//! Input: one selector byte, then text (lossily decoded as UTF-8). The selector picks the
//! option set first; the text is also tried as every option's value, as an option name, and,
//! split at its first `=`, as a `flag=value` pair.
#![no_main]

use lameduck::config::{ConfigOption, GoawayChance, MAX_CONFIG_DURATION};
use lameduck::duration::{format_duration, parse_duration, DurationError};
use lameduck::{Config, ConfigBuilder, ConfigError};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let text = text.as_ref();

    check_duration(text);

    let mut builder = Config::builder();
    let first = ConfigOption::ALL[usize::from(selector) % ConfigOption::ALL.len()];
    try_set(&mut builder, first, text);
    for option in ConfigOption::ALL {
        try_set(&mut builder, option, text);
    }

    if let Ok(option) = text.parse::<ConfigOption>() {
        assert_eq!(option.flag().parse::<ConfigOption>(), Ok(option));
    }
    if let Some((name, value)) = text.split_once('=') {
        if let Ok(option) = name.parse::<ConfigOption>() {
            try_set(&mut builder, option, value);
        }
    }

    // Everything `set` accepted is valid on its own, so `build` accepts it too, but for the
    // one check across options: the idle-close spread shorter than the HTTP shutdown timeout.
    match builder.clone().build() {
        Ok(config) => check_config(&config, text),
        Err(ConfigError::SpreadNotShorter {
            value,
            http_shutdown_timeout,
            ..
        }) => {
            assert!(!http_shutdown_timeout.is_zero() && value >= http_shutdown_timeout);
            let off = builder.idle_close_spread(Duration::ZERO);
            check_config(&off.build().expect("valid without the spread"), text);
        }
        Err(e) => panic!("set stored an invalid value: {e}"),
    }
});

fn check_duration(text: &str) {
    match parse_duration(text) {
        Ok(d) => {
            assert!(d <= MAX_CONFIG_DURATION, "{text:?} parsed to {d:?}");
            let printed = format_duration(d).to_string();
            assert_eq!(
                parse_duration(&printed),
                Ok(d),
                "{text:?} printed as {printed:?}"
            );
        }
        Err(err) => {
            let message = err.to_string();
            if !matches!(err, DurationError::Empty) {
                assert_eq!(err.input(), text);
            }
            assert!(message.starts_with("invalid duration"), "{message}");
        }
    }
}

fn try_set(builder: &mut ConfigBuilder, option: ConfigOption, value: &str) {
    let before = builder.clone();
    match builder.set(option, value) {
        Ok(_) => {
            if option.is_duration() {
                assert!(parse_duration(value).is_ok());
            }
        }
        Err(err) => {
            assert_eq!(err.option(), Some(option));
            assert!(err.to_string().contains(option.flag()), "{err}");
            assert_eq!(*builder, before, "a failed set changed the builder");
        }
    }
}

fn check_config(config: &Config, text: &str) {
    let _ = config.is_exempt_path(text);
    for d in [
        config.shutdown_delay(),
        config.shutdown_watch_termination_grace_period(),
        config.request_timeout(),
        config.livez_grace_period(),
        config.idle_close_spread(),
        config.max_connection_age(),
        config.max_connection_age_grace(),
        config.http_shutdown_timeout(),
    ] {
        assert!(d <= MAX_CONFIG_DURATION);
    }
    let chance = config.goaway_chance();
    assert!(chance <= GoawayChance::MAX, "{chance}");
    assert_eq!(chance.to_string().parse::<GoawayChance>(), Ok(chance));
    assert!(config.idle_close_delay(u32::MAX) <= config.idle_close_spread());
    let age = config.max_connection_age().as_nanos();
    match (
        config.connection_age_limit(0),
        config.connection_age_limit(u32::MAX),
    ) {
        (Some(low), Some(high)) => {
            assert_eq!(low.as_nanos(), age * 9 / 10);
            assert_eq!(high.as_nanos(), age * 11 / 10);
        }
        (None, None) => assert_eq!(age, 0),
        other => panic!("connection_age_limit: {other:?}"),
    }
    assert_eq!(config.to_builder().build().as_ref(), Ok(config));
}
