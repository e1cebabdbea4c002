//! The example servers' command line (`docs/design.md#example-servers`), declared with
//! `clap`'s derive: suggestions for misspelt flags, errors naming the flag, and Go-style
//! durations parsed by the core ([`lameduck::parse_duration`]).
//!
//! An invalid flag is a usage error: the servers exit 2, as `clap` and `lameduck plan` do
//! (`docs/design.md#example-servers`).

use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory as _, Parser};
use lameduck::config::ConfigOption;
use lameduck::duration::DurationError;
use lameduck::{parse_duration, Config, ConfigBuilder, ConfigError};

pub use crate::listen::Listen;

/// How long a hand-over may take, from the request to the successor's `ready`, unless
/// `--handover-timeout` says otherwise.
pub const DEFAULT_HANDOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// The exit status after an invalid flag (`docs/design.md#example-servers`).
pub const EXIT_INVALID_FLAG: i32 = 2;

/// What the example servers accept.
#[derive(Clone, Debug)]
pub struct Flags {
    /// `--listen ADDR|systemd[:NAME]|handover`.
    pub listen: Listen,
    /// `--handover-socket PATH`: where SIGUSR2 hands the listening sockets over (and, with
    /// `--listen handover`, where this process waits for them).
    pub handover_socket: Option<PathBuf>,
    /// `--handover-timeout D`: the bound on a hand-over.
    pub handover_timeout: Duration,
    /// The lifecycle configuration from the `--shutdown-*`, `--request-timeout`,
    /// `--livez-grace-period`, `--min-watch-drain-qps`, `--exempt-path-prefix`,
    /// `--goaway-chance`, `--idle-close-spread`, `--max-connection-age` and
    /// `--max-connection-age-grace` flags.
    pub config: Config,
    /// `--post-start-hook-duration D`: register a demo post-start hook (`demo-warm-up`)
    /// sleeping `D`; `/readyz` answers 500 until it has finished.
    pub post_start_hook_duration: Option<Duration>,
    /// `--pre-shutdown-hook-duration D`: register a demo pre-shutdown hook sleeping `D`.
    pub pre_shutdown_hook_duration: Option<Duration>,
    /// `--destroy-hook-duration D`: register a demo destroy hook (`demo-destroy`) sleeping `D`.
    pub destroy_hook_duration: Option<Duration>,
    /// `--workers N` (actix only; ignored elsewhere).
    pub workers: Option<usize>,
    /// `--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file` and
    /// `--tls-handshake-timeout`: serve TLS when given.
    pub tls: Option<TlsFlags>,
}

/// The TLS flags (kube-apiserver's names): where the serving certificate, its key and the
/// client CA are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFlags {
    /// `--tls-cert-file FILE`: the PEM certificate chain.
    pub cert: PathBuf,
    /// `--tls-private-key-file FILE`: its PEM private key (PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
    /// `--client-ca-file FILE`: require client certificates issued by this PEM CA.
    pub client_ca: Option<PathBuf>,
    /// `--tls-handshake-timeout D`: the bound on each handshake.
    pub handshake_timeout: Duration,
}

/// What parsing found.
#[derive(Debug)]
pub enum Parsed {
    /// Run with these flags.
    Run(Box<Flags>),
    /// `--help` was given: print this and exit 0.
    Help(String),
}

/// A command-line error, as `clap` renders it (`error: ...`, the flag named, a suggestion for a
/// misspelt flag, the usage line).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

impl From<ConfigError> for FlagError {
    fn from(e: ConfigError) -> Self {
        FlagError(format!("error: {e}\n"))
    }
}

/// The flags, as `clap` sees them.
#[derive(Debug, Parser)]
#[command(
    about = "A lameduck example server: kube-apiserver style graceful termination.",
    after_help = "Durations are Go-style: 500ms, 2s, 1m30s.",
    args_override_self = true
)]
struct ServerArgs {
    /// Address to listen on (port 0 picks a free one); `systemd` or `systemd:NAME` for the
    /// sockets of systemd socket activation; `handover` to take a running server's sockets
    /// through --handover-socket
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: Listen,
    /// Unix socket of the hand-over: on SIGUSR2 the sockets go to the successor waiting
    /// there (which was started with --listen handover)
    #[arg(long, value_name = "PATH")]
    handover_socket: Option<PathBuf>,
    /// Bound on a hand-over, from SIGUSR2 to the successor's ready [default: 30s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    handover_timeout: Option<Duration>,
    /// Lame-duck window after SIGTERM: /readyz fails, requests are served [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    shutdown_delay: Option<Duration>,
    /// Answer 429 + Retry-After instead of closing the listener (retry-after mode)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = config_text(ConfigOption::ShutdownSendRetryAfter))]
    shutdown_send_retry_after: Option<String>,
    /// How long long-running requests get to end [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    shutdown_watch_termination_grace_period: Option<Duration>,
    /// Bound on every normal request; 0 means none [default: 1m0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    request_timeout: Option<Duration>,
    /// Post-start hooks pass /livez during this time [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    livez_grace_period: Option<Duration>,
    /// Floor of the rate, per second, at which long-running requests are ended [default: 200]
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = config_text(ConfigOption::MinWatchDrainQps))]
    min_watch_drain_qps: Option<String>,
    /// Comma-separated path prefixes never rejected during shutdown
    /// [default: /readyz,/livez,/healthz,/metrics]
    #[arg(long, value_name = "LIST", value_parser = config_text(ConfigOption::ExemptPathPrefixes))]
    exempt_path_prefix: Option<String>,
    /// Chance, from 0 to 0.02, that a request ends its connection gracefully, so that
    /// long-lived clients behind L4 balancers rebalance [default: 0]
    #[arg(long, value_name = "P", allow_hyphen_values = true,
          value_parser = config_text(ConfigOption::GoawayChance))]
    goaway_chance: Option<String>,
    /// Close the connections idle when the server stops listening each at a random point of
    /// this window, not all at once (HTTP/2: GOAWAY); shorter than the HTTP shutdown timeout;
    /// 0 means off [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    idle_close_spread: Option<Duration>,
    /// End each connection gracefully once it is this old, each drawn within +-10 %, so that
    /// long-lived clients behind L4 balancers rebalance (HTTP/1: Connection: close, HTTP/2:
    /// GOAWAY); 0 means off [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    max_connection_age: Option<Duration>,
    /// How long the streams of a connection past its --max-connection-age get before it is
    /// cut; 0 means no bound beyond the requests' own [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    max_connection_age_grace: Option<Duration>,
    /// Register a demo post-start hook that sleeps D (/readyz is 500 until it ends)
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    post_start_hook_duration: Option<Duration>,
    /// Register a demo pre-shutdown hook that sleeps D
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pre_shutdown_hook_duration: Option<Duration>,
    /// Register a demo destroy hook that sleeps D
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    destroy_hook_duration: Option<Duration>,
    /// Worker threads (actix example) [default: 2]
    #[arg(long, value_name = "N", value_parser = workers, allow_hyphen_values = true)]
    workers: Option<usize>,
    /// Serve TLS with this PEM certificate chain (with --tls-private-key-file); the file is
    /// read again when it changes
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file (PKCS#8, SEC1 or PKCS#1)
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Require client certificates issued by a CA in this PEM file (with --tls-cert-file)
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    client_ca_file: Option<PathBuf>,
    /// Bound on each TLS handshake, from accept on [default: 10s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          requires = "tls_cert_file")]
    tls_handshake_timeout: Option<Duration>,
}

/// Why a flag's value was rejected; `clap` prefixes the flag and the value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ValueError {
    /// The core's reason.
    #[error("{0}")]
    Reason(String),
    /// `--workers` is not a positive integer.
    #[error("expected a positive integer")]
    Workers,
}

/// A Go-style duration; the error is the core's reason without its `invalid duration "X": `.
fn duration(value: &str) -> Result<Duration, ValueError> {
    parse_duration(value).map_err(|e: DurationError| ValueError::Reason(e.reason().to_string()))
}

fn workers(value: &str) -> Result<usize, ValueError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or(ValueError::Workers)
}

/// A value parser that checks `option`'s text with [`ConfigBuilder::set`] and keeps the text.
fn config_text(option: ConfigOption) -> impl Fn(&str) -> Result<String, ConfigError> + Clone {
    move |value: &str| {
        ConfigBuilder::default().set(option, value)?;
        Ok(value.to_string())
    }
}

/// The command with `program` in its usage line.
fn command(program: &str) -> clap::Command {
    ServerArgs::command().bin_name(program.to_string())
}

/// The usage text.
#[must_use]
pub fn usage(program: &str) -> String {
    command(program).render_help().to_string()
}

/// Parses `args` (without the program name).
///
/// # Errors
///
/// A [`FlagError`] naming the flag.
pub fn parse(program: &str, args: impl IntoIterator<Item = String>) -> Result<Parsed, FlagError> {
    let argv = std::iter::once(program.to_string()).chain(args);
    let matches = match command(program).try_get_matches_from(argv) {
        Ok(matches) => matches,
        Err(e) if e.kind() == ErrorKind::DisplayHelp => {
            return Ok(Parsed::Help(e.render().to_string()))
        }
        Err(e) => return Err(FlagError(e.render().to_string())),
    };
    let args = <ServerArgs as clap::FromArgMatches>::from_arg_matches(&matches)
        .map_err(|e| FlagError(e.render().to_string()))?;
    let mut builder = ConfigBuilder::default();
    if let Some(d) = args.shutdown_delay {
        builder = builder.shutdown_delay(d);
    }
    if let Some(d) = args.shutdown_watch_termination_grace_period {
        builder = builder.shutdown_watch_termination_grace_period(d);
    }
    if let Some(d) = args.request_timeout {
        builder = builder.request_timeout(d);
    }
    if let Some(d) = args.livez_grace_period {
        builder = builder.livez_grace_period(d);
    }
    if let Some(d) = args.idle_close_spread {
        builder = builder.idle_close_spread(d);
    }
    if let Some(d) = args.max_connection_age {
        builder = builder.max_connection_age(d);
    }
    if let Some(d) = args.max_connection_age_grace {
        builder = builder.max_connection_age_grace(d);
    }
    let texts = [
        (
            ConfigOption::ShutdownSendRetryAfter,
            &args.shutdown_send_retry_after,
        ),
        (ConfigOption::MinWatchDrainQps, &args.min_watch_drain_qps),
        (ConfigOption::ExemptPathPrefixes, &args.exempt_path_prefix),
        (ConfigOption::GoawayChance, &args.goaway_chance),
    ];
    for (option, text) in texts {
        if let Some(text) = text {
            builder.set(option, text)?;
        }
    }
    if args.listen == Listen::HandOver && args.handover_socket.is_none() {
        return Err(FlagError(
            "error: --listen handover needs --handover-socket PATH\n".to_string(),
        ));
    }
    Ok(Parsed::Run(Box::new(Flags {
        listen: args.listen,
        handover_socket: args.handover_socket,
        handover_timeout: args.handover_timeout.unwrap_or(DEFAULT_HANDOVER_TIMEOUT),
        config: builder.build()?,
        post_start_hook_duration: args.post_start_hook_duration,
        pre_shutdown_hook_duration: args.pre_shutdown_hook_duration,
        destroy_hook_duration: args.destroy_hook_duration,
        workers: args.workers,
        tls: args
            .tls_cert_file
            .zip(args.tls_private_key_file)
            .map(|(cert, key)| TlsFlags {
                cert,
                key,
                client_ca: args.client_ca_file,
                handshake_timeout: args
                    .tls_handshake_timeout
                    .unwrap_or(lameduck_tls::DEFAULT_HANDSHAKE_TIMEOUT),
            }),
    })))
}

/// Parses the process's arguments; prints help or the error and exits as
/// `docs/design.md#example-servers` says (0 after `--help`, 2 after an invalid flag).
#[must_use]
pub fn from_env_or_exit() -> Flags {
    let mut args = std::env::args();
    let program = args.next().unwrap_or_else(|| "server".into());
    match parse(&program, args) {
        Ok(Parsed::Run(flags)) => *flags,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            std::process::exit(0);
        }
        Err(e) => {
            eprint!("{e}");
            std::process::exit(EXIT_INVALID_FLAG);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Flags, FlagError> {
        match parse("t", args.iter().map(|s| s.to_string()))? {
            Parsed::Run(f) => Ok(*f),
            Parsed::Help(_) => Err(FlagError("help".into())),
        }
    }

    #[test]
    fn hand_over_flags() {
        let f = run(&[
            "--listen",
            "handover",
            "--handover-socket",
            "/tmp/h.sock",
            "--handover-timeout=5s",
        ])
        .unwrap();
        assert_eq!(f.listen, Listen::HandOver);
        assert_eq!(f.handover_socket, Some(PathBuf::from("/tmp/h.sock")));
        assert_eq!(f.handover_timeout, Duration::from_secs(5));
        let e = run(&["--listen", "handover"]).unwrap_err();
        assert!(e.0.contains("--handover-socket"), "{e}");
        let f = run(&["--listen", "systemd:web"]).unwrap();
        assert_eq!(f.listen, Listen::Systemd(Some("web".into())));
    }

    #[test]
    fn tls_flags_come_in_pairs() {
        let f = run(&[
            "--tls-cert-file",
            "c.pem",
            "--tls-private-key-file=k.pem",
            "--client-ca-file",
            "ca.pem",
            "--tls-handshake-timeout=2s",
        ])
        .unwrap();
        let tls = f.tls.unwrap();
        assert_eq!(tls.cert, PathBuf::from("c.pem"));
        assert_eq!(tls.key, PathBuf::from("k.pem"));
        assert_eq!(tls.client_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(tls.handshake_timeout, Duration::from_secs(2));
        let f = run(&["--tls-cert-file", "c", "--tls-private-key-file", "k"]).unwrap();
        assert_eq!(
            f.tls.unwrap().handshake_timeout,
            lameduck_tls::DEFAULT_HANDSHAKE_TIMEOUT
        );
        assert_eq!(run(&[]).unwrap().tls, None);
        for (args, flag) in [
            (&["--tls-cert-file", "c"][..], "--tls-private-key-file"),
            (&["--tls-private-key-file", "k"][..], "--tls-cert-file"),
            (&["--client-ca-file", "ca"][..], "--tls-cert-file"),
            (&["--tls-handshake-timeout", "1s"][..], "--tls-cert-file"),
        ] {
            let e = run(args).unwrap_err();
            assert!(e.0.contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        ServerArgs::command().debug_assert();
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
            "--min-watch-drain-qps=10",
            "--exempt-path-prefix=/readyz,/x",
            "--goaway-chance",
            "0.01",
            "--idle-close-spread=1500ms",
            "--max-connection-age",
            "30m",
            "--max-connection-age-grace=1m30s",
            "--workers",
            "4",
        ])
        .unwrap();
        assert_eq!(f.listen, "127.0.0.1:0".parse().unwrap());
        assert_eq!(f.handover_socket, None);
        assert_eq!(f.handover_timeout, DEFAULT_HANDOVER_TIMEOUT);
        assert_eq!(f.config.shutdown_delay(), Duration::from_secs(90));
        assert!(f.config.shutdown_send_retry_after());
        assert_eq!(
            f.config.shutdown_watch_termination_grace_period(),
            Duration::from_secs(5)
        );
        assert_eq!(f.config.request_timeout(), Duration::from_secs(2));
        assert_eq!(f.config.livez_grace_period(), Duration::from_millis(500));
        assert_eq!(f.config.min_watch_drain_qps(), 10);
        assert!(f.config.is_exempt_path("/x/y"));
        assert_eq!(f.config.goaway_chance().to_string(), "0.01");
        assert_eq!(f.config.idle_close_spread(), Duration::from_millis(1500));
        assert_eq!(f.config.max_connection_age(), Duration::from_secs(1800));
        assert_eq!(f.config.max_connection_age_grace(), Duration::from_secs(90));
        assert_eq!(f.pre_shutdown_hook_duration, Some(Duration::from_secs(3)));
        assert_eq!(f.destroy_hook_duration, Some(Duration::from_secs(60)));
        assert_eq!(f.workers, Some(4));
        let defaults = run(&[]).unwrap();
        assert_eq!(defaults.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(defaults.config, Config::default());
        assert_eq!(defaults.pre_shutdown_hook_duration, None);
        assert_eq!(defaults.post_start_hook_duration, None);
        assert_eq!(defaults.destroy_hook_duration, None);
        assert_eq!(defaults.workers, None);
        // The last of a repeated flag wins; `=false` turns retry-after mode off.
        let f = run(&[
            "--shutdown-delay=1s",
            "--shutdown-delay=2s",
            "--shutdown-send-retry-after=false",
        ])
        .unwrap();
        assert_eq!(f.config.shutdown_delay(), Duration::from_secs(2));
        assert!(!f.config.shutdown_send_retry_after());
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
        assert!(usage("t").contains("--destroy-hook-duration <D>"));
    }

    #[test]
    fn max_connection_age_flags() {
        let f = run(&[
            "--max-connection-age=10m",
            "--max-connection-age-grace",
            "30s",
        ])
        .unwrap();
        assert_eq!(f.config.max_connection_age(), Duration::from_secs(600));
        assert_eq!(f.config.max_connection_age_grace(), Duration::from_secs(30));
        assert!(f.config.connection_age_limit(0).is_some());
        // Zero is valid: off, and no bound of its own.
        let f = run(&["--max-connection-age", "0", "--max-connection-age-grace=0s"]).unwrap();
        assert_eq!(f.config, Config::default());
        assert_eq!(f.config.connection_age_limit(u32::MAX), None);
        for flag in ["--max-connection-age", "--max-connection-age-grace"] {
            for bad in ["-1s", "10", "bogus", "", "2562048h"] {
                let e = run(&[flag, bad]).unwrap_err();
                assert!(e.0.starts_with("error: "), "{flag} {bad:?}: {e}");
                assert!(e.0.contains(flag), "{flag} {bad:?}: {e}");
            }
            let e = run(&[flag]).unwrap_err();
            assert!(e.0.contains(flag), "{flag}: {e}");
            assert!(usage("t").contains(&format!("{flag} <D>")));
        }
    }

    #[test]
    fn errors_name_the_flag() {
        for (args, flag) in [
            (&["--shutdown-delay", "-1s"][..], "--shutdown-delay"),
            (&["--request-timeout", "abc"][..], "--request-timeout"),
            (&["--bogus-flag"][..], "--bogus-flag"),
            (&["--goaway-chance", "0.5"][..], "--goaway-chance"),
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
            (&["--workers", "0"][..], "--workers"),
            (
                &["--min-watch-drain-qps", "-1"][..],
                "--min-watch-drain-qps",
            ),
            (&["--exempt-path-prefix", "x"][..], "--exempt-path-prefix"),
            (
                &["--shutdown-send-retry-after=maybe"][..],
                "--shutdown-send-retry-after",
            ),
            (&["--shutdown-delay", "2562048h"][..], "--shutdown-delay"),
            (&["--idle-close-spread", "-1s"][..], "--idle-close-spread"),
            (&["--idle-close-spread", "2"][..], "--idle-close-spread"),
            (&["--max-connection-age", "-1s"][..], "--max-connection-age"),
            (
                &["--max-connection-age-grace", "x"][..],
                "--max-connection-age-grace",
            ),
            // Not shorter than the HTTP shutdown timeout (retry-after mode: 2 s).
            (
                &["--idle-close-spread=2s", "--shutdown-send-retry-after"][..],
                "--idle-close-spread",
            ),
            (
                &["--idle-close-spread=5s", "--request-timeout=5s"][..],
                "--idle-close-spread",
            ),
        ] {
            let e = run(args).unwrap_err();
            assert!(e.0.contains(flag), "{args:?}: {e}");
            assert!(e.0.starts_with("error: "), "{args:?}: {e}");
        }
        let e = run(&["--shutdown-dealy", "1s"]).unwrap_err();
        assert!(
            e.0.contains("a similar argument exists: '--shutdown-delay'"),
            "{e}"
        );
        assert!(matches!(
            parse("t", ["--help".to_string()]),
            Ok(Parsed::Help(_))
        ));
        assert!(matches!(
            parse("t", ["-h".to_string()]),
            Ok(Parsed::Help(_))
        ));
    }
}
