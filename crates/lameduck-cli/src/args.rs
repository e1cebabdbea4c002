//! The command line, declared with `clap`'s derive: `lameduck plan [flags]` and
//! `lameduck completions SHELL`.
//!
//! Every plan flag is optional here so that the planner can tell a value given on the command
//! line from one read from a `--deployment` manifest and from the default
//! ([`crate::inputs`] merges them in that order). The value parsers below are the core's
//! ([`lameduck::duration::parse_duration`]); `clap` names the flag in every error and exits 2.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};
use lameduck::duration::{parse_duration, DurationError};

/// After the top-level help.
const MAIN_AFTER_HELP: &str = "\
Usage of the planner: lameduck plan [flags] (see lameduck plan --help)

Exit status: 0 safe, 1 unsafe, 2 invalid flags, invalid input, an unusable log or an output
error; with --observed, 1 also when a termination had late connections.";

/// The long description of `lameduck plan`.
const PLAN_LONG_ABOUT: &str = "\
Is the shutdown delay long enough for the load balancer to notice that /readyz turned red,
and does the termination fit in terminationGracePeriodSeconds?

The worst case for the load balancer is a successful probe just before /readyz turns red
(E2, at the stop signal E1), then --unhealthy-threshold failing probes, one every
--probe-interval, the last running to its --probe-timeout, then --propagation-delay:
  t = unhealthy-threshold x probe-interval + probe-timeout + propagation-delay
The plan is safe when E2 + t <= E3 (NotAcceptingNewRequest), that is t <= --shutdown-delay.
The worst-case total termination time is
  max(shutdown-delay, pre-shutdown-hooks) + max(request-timeout, watch grace)
in close-listener mode (the default), and 2s more in retry-after mode (the listener closes
after the drain, with a 2s HTTP shutdown timeout); with --termination-grace-period, it must
fit in it.

With --deployment FILE the probe, terminationGracePeriodSeconds, a preStop sleep and the
container's lameduck flags come from your own manifest; flags given here override them.

With --observed FILE... the termination summaries that the servers logged at their exits say
when the load balancer really stopped opening connections: the latest new connection after
the signal, the margin left in the shutdown delay, and the connections that came late (in the
last 20% of the delay, or after it). Without late connections the delay holds; with them the
recommendation is at least twice the observed delay. Together with the load balancer's flags
or --deployment, the recommendation is the larger of the observed one and the model's.

Durations are Go-style: 500ms, 10s, 1m30s.";

/// After the help of `lameduck plan`.
const PLAN_AFTER_HELP: &str = "\
Exit status: 0 safe, 1 unsafe (the reason and the minimum safe shutdown delay are printed),
2 invalid flags, invalid input (the message names the flag or the manifest field) or an output
error. With --observed: 0 when no termination had late connections (and a --shutdown-delay
given covers the latest observed connection, and the plan, if any, is safe), 1 otherwise, 2
when a log can not be read, holds no termination summary or a malformed one.

Example: an AWS load balancer probing every 10s with a 10s timeout, unhealthy after 2 failures:
  lameduck plan --probe-interval 10s --probe-timeout 10s --unhealthy-threshold 2 --shutdown-delay 30s
Your own Deployment:
  lameduck plan --deployment deploy.yaml
What the servers saw (kubectl logs --previous, or a log file appended over restarts):
  lameduck plan --observed server.log old.log
  kubectl logs deploy/checkout --previous | lameduck plan --observed - --deployment deploy.yaml";

/// `lameduck`: tools for kube-apiserver style graceful termination.
#[derive(Debug, Parser)]
#[command(
    name = "lameduck",
    version,
    about = "lameduck: tools for kube-apiserver style graceful termination",
    after_help = MAIN_AFTER_HELP,
    arg_required_else_help = true,
    propagate_version = true
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: CliCommand,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Check the shutdown delay against load-balancer probes and the Kubernetes termination
    /// budget, and draw the timeline.
    // A repeated flag's last value wins.
    #[command(long_about = PLAN_LONG_ABOUT, after_help = PLAN_AFTER_HELP, args_override_self = true)]
    Plan(Box<PlanArgs>),
    /// Print a shell completion script: lameduck completions bash > /etc/bash_completion.d/lameduck
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The flags of `lameduck plan`; `None` is "not given on the command line".
#[derive(Debug, Default, Args)]
pub struct PlanArgs {
    /// Time between the starts of two /readyz probes [default: 10s, or the manifest's
    /// periodSeconds]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Load balancer")]
    pub probe_interval: Option<Duration>,
    /// How long a probe may take before it fails [default: 1s, or the manifest's
    /// timeoutSeconds]; may not exceed --probe-interval unless --overlapping-probes
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Load balancer")]
    pub probe_timeout: Option<Duration>,
    /// Failed probes before the instance is out of service [default: 3, or the manifest's
    /// failureThreshold]
    #[arg(long, value_name = "N", value_parser = threshold, allow_hyphen_values = true,
          help_heading = "Load balancer")]
    pub unhealthy_threshold: Option<u32>,
    /// Extra time for the decision to take effect, such as kube-proxy or endpoint sync
    /// [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Load balancer")]
    pub propagation_delay: Option<Duration>,
    /// The balancer starts probes while earlier ones still run, so --probe-timeout may exceed
    /// --probe-interval
    #[arg(long, value_name = "BOOL", value_parser = boolean, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", help_heading = "Load balancer")]
    pub overlapping_probes: Option<bool>,

    /// Lame-duck window: /readyz fails, requests are still served [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Shutdown (the flags of the example servers)")]
    pub shutdown_delay: Option<Duration>,
    /// Bound on every normal request; 0 means none [default: 1m0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Shutdown (the flags of the example servers)")]
    pub request_timeout: Option<Duration>,
    /// How long long-running requests get to end [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Shutdown (the flags of the example servers)")]
    pub shutdown_watch_termination_grace_period: Option<Duration>,
    /// Retry-after mode: answer 429 + Retry-After instead of closing the listener
    #[arg(long, value_name = "BOOL", value_parser = boolean, num_args = 0..=1,
          require_equals = true, default_missing_value = "true",
          help_heading = "Shutdown (the flags of the example servers)")]
    pub shutdown_send_retry_after: Option<bool>,
    /// How long the longest pre-shutdown hook may run [default: 0s]
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true,
          help_heading = "Shutdown (the flags of the example servers)")]
    pub pre_shutdown_hooks: Option<Duration>,

    /// terminationGracePeriodSeconds to check the total against; a bare number is seconds
    /// [default: not checked, or the manifest's; Kubernetes' default is 30]
    #[arg(long, value_name = "D|N", value_parser = grace_period, allow_hyphen_values = true,
          help_heading = "Kubernetes")]
    pub termination_grace_period: Option<Duration>,
    /// Read the readiness probe, terminationGracePeriodSeconds, a preStop sleep and the
    /// container's lameduck flags from this Deployment manifest (YAML or JSON, several
    /// documents allowed); flags given here override the file's values
    #[arg(long, value_name = "FILE", help_heading = "Kubernetes")]
    pub deployment: Option<PathBuf>,
    /// With --deployment: the Deployment to check when the file holds several
    #[arg(
        long,
        value_name = "NAME",
        requires = "deployment",
        help_heading = "Kubernetes"
    )]
    pub deployment_name: Option<String>,
    /// With --deployment: the container to check when the pod has several
    #[arg(
        long,
        value_name = "NAME",
        requires = "deployment",
        help_heading = "Kubernetes"
    )]
    pub container: Option<String>,

    /// Read the termination summaries in these server logs (several files, or `-` for standard
    /// input) and recommend a shutdown delay that covers what they show; the model runs too
    /// when the load balancer's flags or --deployment are given
    #[arg(long, value_name = "FILE", num_args = 1.., action = ArgAction::Append,
          value_parser = file_name, help_heading = "Observed terminations")]
    pub observed: Vec<PathBuf>,

    /// Machine-readable output instead of the text (the schema is in docs/planner.md)
    #[arg(long, value_name = "BOOL", value_parser = boolean, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", help_heading = "Output")]
    pub json: Option<bool>,
    /// Also draw the timeline as an SVG picture into FILE
    #[arg(long, value_name = "FILE", value_parser = file_name, help_heading = "Output")]
    pub svg: Option<PathBuf>,
    /// Print a Deployment instead of the text: /readyz readiness and /livez liveness probes
    /// matching the flags, the shutdown flags, and terminationGracePeriodSeconds = worst case
    /// rounded up + 5s (or the given one when larger)
    #[arg(long, value_name = "BOOL", value_parser = boolean, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", help_heading = "Output")]
    pub kubernetes: Option<bool>,
}

/// Why a flag's value was rejected; `clap` prefixes the flag and the value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not a Go-style duration (the core's reason).
    #[error("{0}")]
    Duration(String),
    /// A leading `-`.
    #[error("can not be a negative value")]
    Negative,
    /// Not a whole number in range.
    #[error("expected a whole number from 1 to 4294967295")]
    Threshold,
    /// A bare number of seconds beyond `u64`.
    #[error("too many seconds")]
    TooManySeconds,
    /// Not a boolean.
    #[error("expected true, false, 1 or 0")]
    Bool,
    /// An empty file name.
    #[error("needs a file name")]
    EmptyFileName,
}

/// The core's reason, without its `invalid duration "X": ` prefix (`clap` names the value).
fn duration_reason(e: &DurationError) -> ValueError {
    if let DurationError::Negative { .. } = e {
        return ValueError::Negative;
    }
    ValueError::Duration(e.reason().to_string())
}

/// A Go-style duration (`500ms`, `10s`, `1m30s`), parsed by the core.
///
/// # Errors
///
/// The core's reason, as a [`ValueError`].
pub fn duration(value: &str) -> Result<Duration, ValueError> {
    parse_duration(value).map_err(|e| duration_reason(&e))
}

fn is_negative_number(value: &str) -> bool {
    value.len() > 1 && value.starts_with('-') && value[1..].bytes().all(|b| b.is_ascii_digit())
}

/// `--unhealthy-threshold`: a whole number (zero is rejected by the planner, naming the flag).
///
/// # Errors
///
/// [`ValueError::Negative`] or [`ValueError::Threshold`].
pub fn threshold(value: &str) -> Result<u32, ValueError> {
    if is_negative_number(value) {
        return Err(ValueError::Negative);
    }
    value.parse::<u32>().map_err(|_| ValueError::Threshold)
}

/// `terminationGracePeriodSeconds`: a bare whole number of seconds or a Go-style duration.
///
/// # Errors
///
/// A [`ValueError`] saying why.
pub fn grace_period(value: &str) -> Result<Duration, ValueError> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| ValueError::TooManySeconds);
    }
    if is_negative_number(value) {
        return Err(ValueError::Negative);
    }
    duration(value)
}

/// `true`, `false`, `1` or `0`, in any case.
///
/// # Errors
///
/// [`ValueError::Bool`].
pub fn boolean(value: &str) -> Result<bool, ValueError> {
    if value.eq_ignore_ascii_case("true") || value == "1" {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") || value == "0" {
        Ok(false)
    } else {
        Err(ValueError::Bool)
    }
}

/// A non-empty file name.
///
/// # Errors
///
/// [`ValueError::EmptyFileName`].
pub fn file_name(value: &str) -> Result<PathBuf, ValueError> {
    if value.is_empty() {
        Err(ValueError::EmptyFileName)
    } else {
        Ok(PathBuf::from(value))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    fn plan(args: &[&str]) -> Result<PlanArgs, clap::Error> {
        let argv = ["lameduck", "plan"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            CliCommand::Plan(p) => Ok(*p),
            CliCommand::Completions { .. } => panic!("completions"),
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
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
            "--kubernetes=false",
        ])
        .unwrap();
        assert_eq!(p.probe_interval, Some(Duration::from_secs(10)));
        assert_eq!(p.probe_timeout, Some(Duration::from_secs(10)));
        assert_eq!(p.unhealthy_threshold, Some(2));
        assert_eq!(p.shutdown_delay, Some(Duration::from_secs(30)));
        assert_eq!(p.shutdown_send_retry_after, Some(true));
        assert_eq!(p.termination_grace_period, Some(Duration::from_secs(45)));
        assert_eq!(p.json, Some(true));
        assert_eq!(p.kubernetes, Some(false));
        assert!(p.svg.is_none() && p.request_timeout.is_none());
    }

    #[test]
    fn observed_takes_several_files_and_repeats() {
        let p = plan(&["--observed", "a.log", "b.log", "--observed=c.log", "--json"]).unwrap();
        let files: Vec<_> = p.observed.iter().map(|f| f.display().to_string()).collect();
        assert_eq!(files, ["a.log", "b.log", "c.log"]);
        assert_eq!(p.json, Some(true));
        assert!(plan(&[]).unwrap().observed.is_empty());
        assert!(plan(&["--observed"]).is_err());
        assert!(plan(&["--observed="]).is_err());
    }

    #[test]
    fn errors_name_the_flag_and_the_reason() {
        let err = |args: &[&str]| plan(args).unwrap_err().to_string();
        for (args, flag, reason) in [
            (
                &["--probe-interval", "ten"][..],
                "--probe-interval",
                "expected numbers with units, such as 500ms, 2s or 1m30s",
            ),
            (
                &["--probe-timeout=-1s"],
                "--probe-timeout",
                "can not be a negative value",
            ),
            (
                &["--unhealthy-threshold", "-2"],
                "--unhealthy-threshold",
                "can not be a negative value",
            ),
            (
                &["--termination-grace-period", "-5"],
                "--termination-grace-period",
                "can not be a negative value",
            ),
            (
                &["--shutdown-delay", "10"],
                "--shutdown-delay",
                "missing unit (use one of ns, us, µs, ms, s, m, h)",
            ),
            (&["--json=maybe"], "--json", "expected true, false, 1 or 0"),
            (&["--svg="], "--svg", "needs a file name"),
        ] {
            let message = err(args);
            assert!(message.contains(flag), "{args:?}: {message}");
            assert!(message.contains(reason), "{args:?}: {message}");
        }
        let message = err(&["--shutdown-dealy", "30s"]);
        assert!(message.contains("--shutdown-delay"), "{message}");
        assert!(err(&["--probe-interval"]).contains("--probe-interval"));
        assert!(err(&["--container", "x"]).contains("--deployment"));
    }
}
