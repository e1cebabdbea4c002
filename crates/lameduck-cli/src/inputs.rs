//! The planner's input from the command line and, with `--deployment`, the user's manifest:
//! a flag given on the command line wins, then the manifest's value, then the default.

use std::path::Path;
use std::time::Duration;

use lameduck::config::{Config, ConfigError};
use lameduck::duration::GoDuration;
use lameduck::plan::{
    ceil_seconds, Plan, PlanError, PlanInput, ProbeSettings, DEFAULT_TERMINATION_GRACE_PERIOD,
};

use crate::args::PlanArgs;
use crate::deployment::{self, Manifest, ManifestError, ProbeProblem};

/// Why the input can not be planned; exit status 2.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The manifest is unusable.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The manifest's readiness probe can not stand for the load balancer.
    #[error(transparent)]
    Probe(#[from] ProbeProblem),
    /// A manifest flag's value is `$(VAR)` and the command line does not give it.
    #[error(
        "container {container:?} sets {flag} from an environment variable, which the planner \
         can not resolve; give {flag} on the command line"
    )]
    Unresolved {
        /// The container.
        container: String,
        /// The flag.
        flag: String,
    },
    /// The manifest's probe times out after its period, which the planner's model (one probe
    /// at a time, each within its period) does not cover.
    #[error(
        "container {container:?}: readinessProbe.timeoutSeconds ({timeout}) is longer than \
         periodSeconds ({period}); lower timeoutSeconds, or give --overlapping-probes if the \
         load balancer starts probes while earlier ones still run"
    )]
    ProbeTimeoutAbovePeriod {
        /// The container.
        container: String,
        /// `timeoutSeconds`.
        timeout: u64,
        /// `periodSeconds`.
        period: u64,
    },
    /// The shutdown options are out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The probe settings are invalid (the message names the flag).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// With `--observed` and without the model, a flag only the model uses.
    #[error(
        "{flag} needs the probe model: with --observed, give the load balancer's flags \
         (--probe-interval, --probe-timeout, --unhealthy-threshold) or --deployment too"
    )]
    ObservedWithoutModel {
        /// The flag.
        flag: &'static str,
    },
}

/// Where the manifest's values came from and what the planner made of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestContext {
    /// `--deployment FILE`.
    pub file: String,
    /// What was read.
    pub manifest: Manifest,
    /// The whole `terminationGracePeriodSeconds` (command line, manifest or Kubernetes'
    /// default); the planner checks the server's part, this minus the `preStop` sleep.
    pub termination_grace_period: Duration,
    /// Things worth knowing: the manifest's own notes and the defaults that applied.
    pub notes: Vec<String>,
}

/// The planner's input and, with `--deployment`, its origin.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// For [`lameduck::plan::plan`].
    pub plan_input: PlanInput,
    /// With `--deployment`.
    pub manifest: Option<ManifestContext>,
}

/// Reads the manifest when asked and merges it with the flags.
///
/// # Errors
///
/// [`InputError`] naming the flag or the manifest field.
pub fn gather(args: &PlanArgs) -> Result<Inputs, InputError> {
    let manifest = match &args.deployment {
        Some(path) => Some(deployment::read(
            path,
            args.deployment_name.as_deref(),
            args.container.as_deref(),
        )?),
        None => None,
    };
    merge(args, manifest, args.deployment.as_deref())
}

/// Merges flags and an already read manifest.
///
/// # Errors
///
/// [`InputError`] naming the flag or the manifest field.
pub fn merge(
    args: &PlanArgs,
    manifest: Option<Manifest>,
    file: Option<&Path>,
) -> Result<Inputs, InputError> {
    let mut probes = ProbeSettings::default();
    let mut notes = Vec::new();
    let flags = manifest
        .as_ref()
        .map(|m| m.flags.clone())
        .unwrap_or_default();
    if let Some(m) = &manifest {
        notes.extend(m.notes.iter().cloned());
        match &m.probe {
            Ok(p) => {
                probes.interval = p.period;
                probes.timeout = p.timeout;
                probes.unhealthy_threshold = p.failure_threshold;
            }
            Err(problem) => {
                let given = args.probe_interval.is_some()
                    || args.probe_timeout.is_some()
                    || args.unhealthy_threshold.is_some();
                if !given {
                    return Err(problem.clone().into());
                }
                notes.push(format!(
                    "{problem}; the load balancer's settings come from the command line"
                ));
            }
        }
        let given = |flag: &str| match flag {
            "--shutdown-delay" => args.shutdown_delay.is_some(),
            "--request-timeout" => args.request_timeout.is_some(),
            "--shutdown-watch-termination-grace-period" => {
                args.shutdown_watch_termination_grace_period.is_some()
            }
            _ => args.pre_shutdown_hooks.is_some(),
        };
        if let Some(flag) = flags.unresolved.iter().find(|f| !given(f)) {
            return Err(InputError::Unresolved {
                container: m.container.clone(),
                flag: flag.clone(),
            });
        }
        if flags.shutdown_delay.is_none() && args.shutdown_delay.is_none() {
            notes.push(no_shutdown_delay_note(&m.container));
        }
    }
    probes.interval = args.probe_interval.unwrap_or(probes.interval);
    probes.timeout = args.probe_timeout.unwrap_or(probes.timeout);
    probes.unhealthy_threshold = args
        .unhealthy_threshold
        .unwrap_or(probes.unhealthy_threshold);
    if let Some(d) = args.propagation_delay {
        probes.propagation_delay = d;
    }
    probes.allow_overlapping_probes = args.overlapping_probes.unwrap_or(false);
    if let Some(m) = &manifest {
        let from_file = args.probe_interval.is_none() && args.probe_timeout.is_none();
        let overlap = probes.timeout > probes.interval && !probes.allow_overlapping_probes;
        if m.probe.is_ok() && from_file && overlap {
            return Err(InputError::ProbeTimeoutAbovePeriod {
                container: m.container.clone(),
                timeout: probes.timeout.as_secs(),
                period: probes.interval.as_secs(),
            });
        }
    }

    let mut config = Config::builder();
    if let Some(d) = args.shutdown_delay.or(flags.shutdown_delay) {
        config = config.shutdown_delay(d);
    }
    if let Some(d) = args.request_timeout.or(flags.request_timeout) {
        config = config.request_timeout(d);
    }
    let watch = args
        .shutdown_watch_termination_grace_period
        .or(flags.shutdown_watch_termination_grace_period);
    if let Some(d) = watch {
        config = config.shutdown_watch_termination_grace_period(d);
    }
    if let Some(b) = args
        .shutdown_send_retry_after
        .or(flags.shutdown_send_retry_after)
    {
        config = config.shutdown_send_retry_after(b);
    }
    let config = config.build()?;
    let hooks = args
        .pre_shutdown_hooks
        .or(flags.pre_shutdown_hook_duration)
        .unwrap_or(Duration::ZERO);

    let mut plan_input = PlanInput::new(probes, config).pre_shutdown_hooks(hooks);
    let Some(manifest) = manifest else {
        if let Some(budget) = args.termination_grace_period {
            plan_input = plan_input.termination_grace_period(budget);
        }
        return Ok(Inputs {
            plan_input,
            manifest: None,
        });
    };
    let grace = match (
        args.termination_grace_period,
        manifest.termination_grace_period,
    ) {
        (Some(g), _) | (None, Some(g)) => g,
        (None, None) => {
            notes.push(format!(
                "terminationGracePeriodSeconds is not set: Kubernetes' default {}s applies",
                DEFAULT_TERMINATION_GRACE_PERIOD.as_secs()
            ));
            DEFAULT_TERMINATION_GRACE_PERIOD
        }
    };
    let pre_stop = manifest.pre_stop_sleep.unwrap_or(Duration::ZERO);
    if !pre_stop.is_zero() {
        notes.push(format!(
            "the preStop sleep ({}) runs before SIGTERM and uses part of \
             terminationGracePeriodSeconds ({}): the server gets the remaining {}; /readyz \
             stays green during it, so it does not count towards the shutdown delay",
            GoDuration(pre_stop),
            GoDuration(grace),
            GoDuration(grace.saturating_sub(pre_stop))
        ));
    }
    plan_input = plan_input.termination_grace_period(grace.saturating_sub(pre_stop));
    Ok(Inputs {
        plan_input,
        manifest: Some(ManifestContext {
            file: file.map(|f| f.display().to_string()).unwrap_or_default(),
            manifest,
            termination_grace_period: grace,
            notes,
        }),
    })
}

/// The note for a container without `--shutdown-delay`.
pub fn no_shutdown_delay_note(container: &str) -> String {
    format!(
        "container {container:?} has no --shutdown-delay in its command or args: the default \
         0s applies"
    )
}

/// With `--observed`: whether the model runs too, that is whether the load balancer's flags or
/// `--deployment` are given.
pub fn wants_model(args: &PlanArgs) -> bool {
    args.probe_interval.is_some()
        || args.probe_timeout.is_some()
        || args.unhealthy_threshold.is_some()
        || args.propagation_delay.is_some()
        || args.overlapping_probes.is_some()
        || args.deployment.is_some()
}

/// With `--observed` and without the model: the first flag given that only the model uses.
pub fn model_only_flag(args: &PlanArgs) -> Option<&'static str> {
    [
        ("--request-timeout", args.request_timeout.is_some()),
        (
            "--shutdown-watch-termination-grace-period",
            args.shutdown_watch_termination_grace_period.is_some(),
        ),
        (
            "--shutdown-send-retry-after",
            args.shutdown_send_retry_after.is_some(),
        ),
        ("--pre-shutdown-hooks", args.pre_shutdown_hooks.is_some()),
        (
            "--termination-grace-period",
            args.termination_grace_period.is_some(),
        ),
        ("--svg", args.svg.is_some()),
        ("--kubernetes", args.kubernetes.is_some()),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag))
}

/// The shutdown delay given on the command line, else by the manifest's container flags.
pub fn configured_shutdown_delay(args: &PlanArgs, gathered: &Inputs) -> Option<Duration> {
    args.shutdown_delay.or_else(|| {
        gathered
            .manifest
            .as_ref()
            .and_then(|m| m.manifest.flags.shutdown_delay)
    })
}

/// `input` with another shutdown delay.
///
/// # Errors
///
/// [`InputError::Config`] when the delay is out of range.
pub fn with_shutdown_delay(input: &PlanInput, delay: Duration) -> Result<PlanInput, InputError> {
    let mut changed = input.clone();
    changed.config = input.config.to_builder().shutdown_delay(delay).build()?;
    Ok(changed)
}

/// With `--observed` and `--deployment`: what to change in the manifest for the combined
/// recommendation `recommended` (and, planned with it, the termination budget). `why` ends the
/// `--shutdown-delay` line.
///
/// # Errors
///
/// [`InputError`] when the plan with `recommended` fails (not expected: it only grows).
pub fn observed_changes(
    context: &ManifestContext,
    input: &PlanInput,
    plan: &Plan,
    recommended: Duration,
    why: &str,
) -> Result<Vec<String>, InputError> {
    if recommended <= plan.shutdown_delay {
        return Ok(changes(context, plan));
    }
    let mut out = vec![format!(
        "set --shutdown-delay={} (now {}) in container {:?}'s args: {why}",
        GoDuration(recommended),
        GoDuration(plan.shutdown_delay),
        context.manifest.container
    )];
    let replanned = lameduck::plan::plan(&with_shutdown_delay(input, recommended)?)?;
    out.extend(changes(context, &replanned));
    Ok(out)
}

/// What to change in the manifest for `plan` to be safe; empty when it is.
pub fn changes(context: &ManifestContext, plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let container = &context.manifest.container;
    if plan.detection_worst_case > plan.shutdown_delay {
        out.push(format!(
            "set --shutdown-delay={} (now {}) in container {container:?}'s args, or make the \
             readiness probe fail sooner: failureThreshold x periodSeconds + timeoutSeconds must \
             not exceed the shutdown delay",
            GoDuration(plan.min_safe_shutdown_delay),
            GoDuration(plan.shutdown_delay)
        ));
    }
    let over_budget = matches!(
        (plan.total_worst_case, plan.termination_grace_period),
        (Some(total), Some(budget)) if total > budget
    ) || (plan.total_worst_case.is_none()
        && plan.termination_grace_period.is_some());
    if over_budget {
        let pre_stop = context.manifest.pre_stop_sleep.unwrap_or(Duration::ZERO);
        match plan.suggested_termination_grace_period {
            Some(suggested) => out.push(format!(
                "set terminationGracePeriodSeconds: {} (now {}): the worst case {} rounded up \
                 + 5s{}",
                suggested.as_secs().saturating_add(ceil_seconds(pre_stop)),
                ceil_seconds(context.termination_grace_period),
                plan.total_worst_case
                    .map_or_else(String::new, |t| GoDuration(t).to_string()),
                if pre_stop.is_zero() {
                    String::new()
                } else {
                    format!(" + the preStop sleep {}", GoDuration(pre_stop))
                }
            )),
            None => out.push(format!(
                "set --request-timeout in container {container:?}'s args: with no request \
                 timeout no terminationGracePeriodSeconds is sure to be enough"
            )),
        }
    }
    out
}
