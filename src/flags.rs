//! The example servers' command line (`docs/design.md#example-servers`).

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use lameduck::{parse_duration, Config, ConfigBuilder, ConfigError, ConfigOption};

/// What the example servers accept.
#[derive(Clone, Debug)]
pub struct Flags {
    /// `--listen ADDR`.
    pub listen: SocketAddr,
    /// The lifecycle configuration from the `--shutdown-*`, `--request-timeout` and
    /// `--livez-grace-period` flags.
    pub config: Config,
    /// `--pre-shutdown-hook-duration D`: register a demo pre-shutdown hook sleeping `D`.
    pub pre_shutdown_hook_duration: Option<Duration>,
    /// `--destroy-hook-duration D`: register a demo destroy hook (`demo-destroy`) sleeping `D`.
    pub destroy_hook_duration: Option<Duration>,
    /// `--workers N` (actix only; ignored elsewhere).
    pub workers: Option<usize>,
}

/// What parsing found.
#[derive(Debug)]
pub enum Parsed {
    /// Run with these flags.
    Run(Flags),
    /// `--help` was given: print this and exit 0.
    Help(String),
}

/// A command-line error; its message names the flag.
#[derive(Debug, PartialEq, Eq)]
pub struct FlagError(pub String);

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlagError {}

impl From<ConfigError> for FlagError {
    fn from(e: ConfigError) -> Self {
        FlagError(e.to_string())
    }
}

/// The usage text.
#[must_use]
pub fn usage(program: &str) -> String {
    format!(
        "usage: {program} [flags]\n\n\
         flags:\n  \
         --listen ADDR                                  address to listen on (default 127.0.0.1:8080; port 0 picks a free one)\n  \
         --shutdown-delay D                             lame-duck window after SIGTERM (default 0s)\n  \
         --shutdown-send-retry-after                    answer 429 + Retry-After instead of closing the listener (mode B)\n  \
         --shutdown-watch-termination-grace-period D    how long long-running requests get to end (default 0s)\n  \
         --request-timeout D                            bound on every normal request (default 1m0s)\n  \
         --livez-grace-period D                         post-start hooks pass /livez during this time (default 0s)\n  \
         --goaway-chance P                              chance (0 to 0.02) that a request ends its connection, to rebalance behind L4 balancers (default 0)\n  \
         --pre-shutdown-hook-duration D                 register a demo pre-shutdown hook that sleeps D\n  \
         --destroy-hook-duration D                      register a demo destroy hook that sleeps D\n  \
         --workers N                                    worker threads (actix example; default 2)\n  \
         --help                                         print this help\n\n\
         Durations are Go-style: 500ms, 2s, 1m30s.\n"
    )
}

/// Parses `args` (without the program name).
pub fn parse(program: &str, args: impl IntoIterator<Item = String>) -> Result<Parsed, FlagError> {
    let mut listen: SocketAddr = ([127, 0, 0, 1], 8080).into();
    let mut builder = ConfigBuilder::default();
    let mut hook = None;
    let mut destroy_hook = None;
    let mut workers = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, FlagError> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) => Ok(v),
                None => Err(FlagError(format!("flag {name} needs a value"))),
            }
        };
        match name.as_str() {
            "--help" | "-h" => return Ok(Parsed::Help(usage(program))),
            "--listen" => {
                let v = value("--listen")?;
                listen = v
                    .parse()
                    .map_err(|e| FlagError(format!("invalid value {v:?} for --listen: {e}")))?;
            }
            "--shutdown-send-retry-after" => {
                let v = inline.clone().unwrap_or_else(|| "true".into());
                builder.set(ConfigOption::ShutdownSendRetryAfter, &v)?;
            }
            "--pre-shutdown-hook-duration" => {
                let v = value("--pre-shutdown-hook-duration")?;
                hook = Some(duration_flag("--pre-shutdown-hook-duration", &v)?);
            }
            "--destroy-hook-duration" => {
                let v = value("--destroy-hook-duration")?;
                destroy_hook = Some(duration_flag("--destroy-hook-duration", &v)?);
            }
            "--workers" => {
                let v = value("--workers")?;
                let n: usize = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    FlagError(format!(
                        "invalid value {v:?} for --workers: expected a positive integer"
                    ))
                })?;
                workers = Some(n);
            }
            other => {
                let option = other
                    .strip_prefix("--")
                    .and_then(|n| n.parse::<ConfigOption>().ok())
                    .ok_or_else(|| FlagError(format!("unknown flag {other:?} (see --help)")))?;
                let v = value(other)?;
                builder.set(option, &v)?;
            }
        }
    }
    Ok(Parsed::Run(Flags {
        listen,
        config: builder.build()?,
        pre_shutdown_hook_duration: hook,
        destroy_hook_duration: destroy_hook,
        workers,
    }))
}

/// The value `v` of duration flag `name`, parsed as a Go duration; the error names the flag.
fn duration_flag(name: &str, v: &str) -> Result<Duration, FlagError> {
    parse_duration(v).map_err(|e| FlagError(format!("invalid value {v:?} for {name}: {e}")))
}

/// Parses the process's arguments; prints help or the error and exits as
/// `docs/design.md#example-servers` says (0 after `--help`, 1 after an invalid flag).
#[must_use]
pub fn from_env_or_exit() -> Flags {
    let mut args = std::env::args();
    let program = args.next().unwrap_or_else(|| "server".into());
    match parse(&program, args) {
        Ok(Parsed::Run(flags)) => flags,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Flags, FlagError> {
        match parse("t", args.iter().map(|s| s.to_string()))? {
            Parsed::Run(f) => Ok(f),
            Parsed::Help(_) => Err(FlagError("help".into())),
        }
    }

    #[test]
    fn parses_every_flag() {
        let f = run(&[
            "--listen",
            "127.0.0.1:0",
            "--shutdown-delay",
            "1m30s",
            "--shutdown-send-retry-after",
            "--shutdown-watch-termination-grace-period=5s",
            "--request-timeout",
            "2s",
            "--livez-grace-period",
            "500ms",
            "--pre-shutdown-hook-duration",
            "3s",
            "--destroy-hook-duration=1m",
        ])
        .unwrap();
        assert_eq!(f.listen.port(), 0);
        assert_eq!(f.config.shutdown_delay(), Duration::from_secs(90));
        assert!(f.config.shutdown_send_retry_after());
        assert_eq!(
            f.config.shutdown_watch_termination_grace_period(),
            Duration::from_secs(5)
        );
        assert_eq!(f.config.request_timeout(), Duration::from_secs(2));
        assert_eq!(f.config.livez_grace_period(), Duration::from_millis(500));
        assert_eq!(f.pre_shutdown_hook_duration, Some(Duration::from_secs(3)));
        assert_eq!(f.destroy_hook_duration, Some(Duration::from_secs(60)));
        let defaults = run(&[]).unwrap();
        assert_eq!(defaults.pre_shutdown_hook_duration, None);
        assert_eq!(defaults.destroy_hook_duration, None);
    }

    #[test]
    fn destroy_hook_duration_is_parsed_like_the_pre_shutdown_hook_duration() {
        let f = run(&["--destroy-hook-duration", "10s"]).unwrap();
        assert_eq!(f.destroy_hook_duration, Some(Duration::from_secs(10)));
        let f = run(&["--destroy-hook-duration", "1m30s"]).unwrap();
        assert_eq!(f.destroy_hook_duration, Some(Duration::from_secs(90)));
        for bad in ["-1s", "10", "bogus", ""] {
            let e = run(&["--destroy-hook-duration", bad]).unwrap_err();
            assert!(e.0.contains("--destroy-hook-duration"), "{bad:?}: {e}");
        }
        assert!(usage("t").contains("--destroy-hook-duration D"));
    }

    #[test]
    fn errors_name_the_flag() {
        for (args, flag) in [
            (&["--shutdown-delay", "-1s"][..], "--shutdown-delay"),
            (&["--request-timeout", "abc"][..], "--request-timeout"),
            (&["--bogus-flag"][..], "--bogus-flag"),
            (&["--listen", "nope"][..], "--listen"),
            (&["--shutdown-delay"][..], "--shutdown-delay"),
            (
                &["--pre-shutdown-hook-duration", "x"][..],
                "--pre-shutdown-hook-duration",
            ),
            (
                &["--destroy-hook-duration", "x"][..],
                "--destroy-hook-duration",
            ),
            (&["--destroy-hook-duration"][..], "--destroy-hook-duration"),
        ] {
            let e = run(args).unwrap_err();
            assert!(e.0.contains(flag), "{args:?}: {e}");
        }
        assert!(matches!(
            parse("t", ["--help".to_string()]),
            Ok(Parsed::Help(_))
        ));
    }
}
