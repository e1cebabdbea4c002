//! Hand-written argument parsing (no clap, to keep builds fast).

use std::path::PathBuf;
use std::time::Duration;

use lameduck::config::{Config, ConfigOption};
use lameduck::duration::{parse_duration, DurationError, GoDuration};
use lameduck::plan::{
    PlanInput, ProbeSettings, DEFAULT_PROBE_INTERVAL, DEFAULT_PROBE_TIMEOUT,
    DEFAULT_UNHEALTHY_THRESHOLD, GRACE_PERIOD_MARGIN,
};

/// The top-level help.
pub fn main_help() -> String {
    String::from(
        "lameduck: tools for kube-apiserver style graceful termination

Usage:
  lameduck plan [flags]   check the shutdown delay against load-balancer probes and the
                          Kubernetes termination budget, and draw the timeline
  lameduck --help         this help (also: lameduck help, lameduck plan --help)
  lameduck --version      the version

Exit status: 0 safe, 1 unsafe, 2 invalid flags, invalid input or an output error.
",
    )
}

/// The help of `lameduck plan`.
pub fn plan_help() -> String {
    format!(
        "lameduck plan: is the shutdown delay long enough for the load balancer to notice that
/readyz turned red, and does the termination fit in terminationGracePeriodSeconds?

Usage: lameduck plan [flags]

The worst case for the load balancer is a successful probe just before /readyz turns red
(E2, at the stop signal E1), then --unhealthy-threshold failing probes, one every
--probe-interval, the last running to its --probe-timeout, then --propagation-delay:
  t = unhealthy-threshold x probe-interval + probe-timeout + propagation-delay
The plan is safe when E2 + t <= E3 (NotAcceptingNewRequest), that is t <= --shutdown-delay.
The worst-case total termination time is
  mode A: max(shutdown-delay, pre-shutdown-hooks) + max(request-timeout, watch grace)
  mode B: the same + 2s (the listener closes after the drain, with a 2s HTTP shutdown timeout)
and, with --termination-grace-period, must fit in it.

Durations are Go-style: 500ms, 10s, 1m30s.

Load balancer:
  --probe-interval D           time between the starts of two /readyz probes (default {interval})
  --probe-timeout D            how long a probe may take before it fails (default {timeout});
                               may not exceed --probe-interval unless --overlapping-probes
  --unhealthy-threshold N      failed probes before the instance is out of service (default {threshold})
  --propagation-delay D        extra time for the decision to take effect, such as kube-proxy
                               or endpoint sync (default 0s)
  --overlapping-probes         the balancer starts probes while earlier ones still run, so
                               --probe-timeout may exceed --probe-interval

Shutdown (the flags of the example servers):
  --shutdown-delay D           {delay_help} (default {delay_default})
  --request-timeout D          {rt_help} (default {rt_default})
  --shutdown-watch-termination-grace-period D
                               {grace_help} (default {grace_default})
  --shutdown-send-retry-after  {b_help}
  --pre-shutdown-hooks D       how long the longest pre-shutdown hook may run (default 0s)

Kubernetes:
  --termination-grace-period D|N
                               terminationGracePeriodSeconds to check the total against; a bare
                               number is seconds (default: not checked; Kubernetes' default is 30)

Output:
  --json                       machine-readable output instead of the text
  --svg FILE                   also draw the timeline as an SVG picture into FILE
  --kubernetes                 print a Deployment snippet instead of the text: /readyz readiness
                               and /livez liveness probes matching the flags, the shutdown flags,
                               and terminationGracePeriodSeconds = worst case rounded up + {margin}s
                               (or the given one when larger)
  -h, --help                   this help

Exit status: 0 safe, 1 unsafe (the reason and the minimum safe shutdown delay are printed),
2 invalid flags, invalid input (the message names the flag) or an output error.

Example: an AWS load balancer probing every 10s with a 10s timeout, unhealthy after 2 failures:
  lameduck plan --probe-interval 10s --probe-timeout 10s --unhealthy-threshold 2 --shutdown-delay 30s
",
        interval = GoDuration(DEFAULT_PROBE_INTERVAL),
        timeout = GoDuration(DEFAULT_PROBE_TIMEOUT),
        threshold = DEFAULT_UNHEALTHY_THRESHOLD,
        delay_help = ConfigOption::ShutdownDelay.help(),
        delay_default = ConfigOption::ShutdownDelay.default_value(),
        rt_help = ConfigOption::RequestTimeout.help(),
        rt_default = ConfigOption::RequestTimeout.default_value(),
        grace_help = ConfigOption::ShutdownWatchTerminationGracePeriod.help(),
        grace_default = ConfigOption::ShutdownWatchTerminationGracePeriod.default_value(),
        b_help = ConfigOption::ShutdownSendRetryAfter.help(),
        margin = GRACE_PERIOD_MARGIN.as_secs(),
    )
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Print this text on stdout and exit 0.
    Help(String),
    /// Run `plan`.
    Plan(Box<PlanArgs>),
}

/// The parsed flags of `lameduck plan`.
#[derive(Debug)]
pub struct PlanArgs {
    /// The planner's input.
    pub input: PlanInput,
    /// `--svg FILE`.
    pub svg: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
    /// `--kubernetes`.
    pub kubernetes: bool,
}

/// A usage error: the message names the flag.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    let Some((first, rest)) = args.split_first() else {
        return Err(UsageError(String::from(
            "missing command (try: lameduck plan --help)",
        )));
    };
    match first.as_str() {
        "-h" | "--help" | "help" => match rest.first().map(String::as_str) {
            Some("plan") => Ok(Command::Help(plan_help())),
            _ => Ok(Command::Help(main_help())),
        },
        "-V" | "--version" => Ok(Command::Help(format!(
            "lameduck {}\n",
            env!("CARGO_PKG_VERSION")
        ))),
        "plan" => parse_plan(rest),
        other => Err(UsageError(format!(
            "unknown command {other:?} (try: lameduck --help)"
        ))),
    }
}

fn parse_plan(args: &[String]) -> Result<Command, UsageError> {
    let mut probes = ProbeSettings::default();
    let mut config = Config::builder();
    let mut hooks = Duration::ZERO;
    let mut budget = None;
    let mut out = PlanArgs {
        input: PlanInput::new(probes, Config::default()),
        svg: None,
        json: false,
        kubernetes: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help(plan_help()));
        }
        let Some(body) = arg.strip_prefix("--") else {
            return Err(UsageError(format!(
                "unexpected argument {arg:?}: lameduck plan takes only flags (see --help)"
            )));
        };
        let (name, inline) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        let flag = format!("--{name}");
        // Booleans: the bare flag is true; `--flag=false` is accepted too.
        let boolean = |inline: Option<&str>| -> Result<bool, UsageError> {
            match inline {
                None => Ok(true),
                Some(v) => parse_bool(v).ok_or_else(|| {
                    UsageError(format!(
                        "invalid value {v:?} for {flag}: expected true, false, 1 or 0"
                    ))
                }),
            }
        };
        match name {
            "json" => out.json = boolean(inline)?,
            "kubernetes" => out.kubernetes = boolean(inline)?,
            "overlapping-probes" => probes.allow_overlapping_probes = boolean(inline)?,
            "shutdown-send-retry-after" => {
                config
                    .set(
                        ConfigOption::ShutdownSendRetryAfter,
                        inline.unwrap_or("true"),
                    )
                    .map_err(|e| UsageError(e.to_string()))?;
            }
            _ => {
                let value = match inline {
                    Some(v) => v,
                    None => match args.next() {
                        Some(v) => v.as_str(),
                        None if is_value_flag(name) => {
                            return Err(UsageError(format!("{flag} needs a value")))
                        }
                        None => return Err(unknown(&flag)),
                    },
                };
                match name {
                    "probe-interval" => probes.interval = duration(&flag, value)?,
                    "probe-timeout" => probes.timeout = duration(&flag, value)?,
                    "unhealthy-threshold" => probes.unhealthy_threshold = threshold(&flag, value)?,
                    "propagation-delay" => probes.propagation_delay = duration(&flag, value)?,
                    "pre-shutdown-hooks" => hooks = duration(&flag, value)?,
                    "termination-grace-period" => budget = Some(grace_period(&flag, value)?),
                    "svg" => {
                        if value.is_empty() {
                            return Err(UsageError(String::from("--svg needs a file name")));
                        }
                        out.svg = Some(PathBuf::from(value));
                    }
                    "shutdown-delay"
                    | "request-timeout"
                    | "shutdown-watch-termination-grace-period" => {
                        let option: ConfigOption = name.parse().map_err(|_| unknown(&flag))?;
                        config
                            .set(option, value)
                            .map_err(|e| UsageError(e.to_string()))?;
                    }
                    _ => return Err(unknown(&flag)),
                }
            }
        }
    }
    let config = config.build().map_err(|e| UsageError(e.to_string()))?;
    out.input = PlanInput {
        probes,
        config,
        pre_shutdown_hooks: hooks,
        termination_grace_period: budget,
    };
    Ok(Command::Plan(Box::new(out)))
}

fn is_value_flag(name: &str) -> bool {
    matches!(
        name,
        "probe-interval"
            | "probe-timeout"
            | "unhealthy-threshold"
            | "propagation-delay"
            | "pre-shutdown-hooks"
            | "termination-grace-period"
            | "svg"
            | "shutdown-delay"
            | "request-timeout"
            | "shutdown-watch-termination-grace-period"
    )
}

fn unknown(flag: &str) -> UsageError {
    UsageError(format!("unknown flag {flag} (see lameduck plan --help)"))
}

fn parse_bool(value: &str) -> Option<bool> {
    if value.eq_ignore_ascii_case("true") || value == "1" {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") || value == "0" {
        Some(false)
    } else {
        None
    }
}

/// A Go-style duration, with the same messages as the shutdown options.
fn duration(flag: &str, value: &str) -> Result<Duration, UsageError> {
    parse_duration(value).map_err(|e| duration_error(flag, value, &e))
}

fn duration_error(flag: &str, value: &str, e: &DurationError) -> UsageError {
    if let DurationError::Negative { .. } = e {
        return UsageError(format!(
            "{flag} can not be a negative value (got {value:?})"
        ));
    }
    let message = e.to_string();
    let prefix = format!("invalid duration {:?}: ", e.input());
    let reason = message.strip_prefix(&prefix).unwrap_or(&message);
    UsageError(format!("invalid value {value:?} for {flag}: {reason}"))
}

fn threshold(flag: &str, value: &str) -> Result<u32, UsageError> {
    if value.starts_with('-') && value.len() > 1 && value[1..].bytes().all(|b| b.is_ascii_digit()) {
        return Err(UsageError(format!(
            "{flag} can not be a negative value (got {value:?})"
        )));
    }
    value.parse::<u32>().map_err(|_| {
        UsageError(format!(
            "invalid value {value:?} for {flag}: expected a whole number from 1 to 4294967295"
        ))
    })
}

/// `terminationGracePeriodSeconds`: a bare whole number of seconds or a Go-style duration.
fn grace_period(flag: &str, value: &str) -> Result<Duration, UsageError> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().map(Duration::from_secs).map_err(|_| {
            UsageError(format!(
                "invalid value {value:?} for {flag}: too many seconds"
            ))
        });
    }
    if value.starts_with('-') && value.len() > 1 && value[1..].bytes().all(|b| b.is_ascii_digit()) {
        return Err(UsageError(format!(
            "{flag} can not be a negative value (got {value:?})"
        )));
    }
    duration(flag, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Result<PlanArgs, UsageError> {
        let mut v = vec![String::from("plan")];
        v.extend(args.iter().map(|s| String::from(*s)));
        match parse(&v)? {
            Command::Plan(p) => Ok(*p),
            Command::Help(_) => panic!("help"),
        }
    }

    #[test]
    fn flags_in_both_forms() {
        let p = plan(&[
            "--probe-interval",
            "10s",
            "--probe-timeout=10s",
            "--unhealthy-threshold",
            "2",
            "--shutdown-delay=30s",
            "--shutdown-send-retry-after",
            "--termination-grace-period",
            "45",
            "--json",
        ])
        .unwrap();
        assert_eq!(p.input.probes.interval, Duration::from_secs(10));
        assert_eq!(p.input.probes.timeout, Duration::from_secs(10));
        assert_eq!(p.input.probes.unhealthy_threshold, 2);
        assert_eq!(p.input.config.shutdown_delay(), Duration::from_secs(30));
        assert!(p.input.config.shutdown_send_retry_after());
        assert_eq!(
            p.input.termination_grace_period,
            Some(Duration::from_secs(45))
        );
        assert!(p.json && !p.kubernetes && p.svg.is_none());
    }

    #[test]
    fn errors_name_the_flag() {
        let err = |args: &[&str]| plan(args).unwrap_err().0;
        assert_eq!(
            err(&["--probe-interval", "ten"]),
            r#"invalid value "ten" for --probe-interval: expected numbers with units, such as 500ms, 2s or 1m30s"#
        );
        assert_eq!(
            err(&["--probe-timeout=-1s"]),
            r#"--probe-timeout can not be a negative value (got "-1s")"#
        );
        assert_eq!(
            err(&["--unhealthy-threshold", "-2"]),
            r#"--unhealthy-threshold can not be a negative value (got "-2")"#
        );
        assert_eq!(
            err(&["--termination-grace-period", "-5"]),
            r#"--termination-grace-period can not be a negative value (got "-5")"#
        );
        assert_eq!(
            err(&["--shutdown-delay", "10"]),
            r#"invalid value "10" for --shutdown-delay: missing unit (use one of ns, us, µs, ms, s, m, h)"#
        );
        assert_eq!(err(&["--probe-interval"]), "--probe-interval needs a value");
        assert_eq!(
            err(&["--bogus"]),
            "unknown flag --bogus (see lameduck plan --help)"
        );
        assert_eq!(
            err(&["--json=maybe"]),
            r#"invalid value "maybe" for --json: expected true, false, 1 or 0"#
        );
        assert!(err(&["stray"]).contains("\"stray\""));
    }
}
