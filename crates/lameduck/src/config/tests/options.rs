//! The options by name: the string setter parses every option, a failed set changes
//! nothing, and every option's flag, field and aliases name it.

use super::super::*;
use alloc::string::ToString;

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
