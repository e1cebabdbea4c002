//! One container: its readiness probe, its `preStop` sleep and its lameduck flags.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use lameduck::duration::parse_duration;

use super::manifest::{Manifest, ManifestError, ManifestFlags, ManifestProbe, ProbeProblem};

/// Kubernetes' defaults for a probe's fields.
const DEFAULT_PERIOD_SECONDS: i32 = 10;
const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

/// Reads everything the planner needs from `container`.
pub(super) fn read(
    deployment: &str,
    container: &Container,
    termination_grace_period: Option<Duration>,
) -> Result<Manifest, ManifestError> {
    let mut notes = Vec::new();
    let probe = match &container.readiness_probe {
        None => Err(ProbeProblem::Missing {
            container: container.name.clone(),
        }),
        Some(probe) => probe_timing(deployment, container, probe, &mut notes)?,
    };
    let pre_stop_sleep = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| pre_stop(h, &mut notes));
    let flags = flags(deployment, container)?;
    Ok(Manifest {
        deployment: deployment.to_string(),
        container: container.name.clone(),
        probe,
        termination_grace_period,
        pre_stop_sleep,
        flags,
        notes,
    })
}

/// The probe's timing, or why it does not count.
fn probe_timing(
    deployment: &str,
    container: &Container,
    probe: &Probe,
    notes: &mut Vec<String>,
) -> Result<Result<ManifestProbe, ProbeProblem>, ManifestError> {
    let unsupported = |kind| ProbeProblem::Unsupported {
        container: container.name.clone(),
        kind,
    };
    if let Some(http) = &probe.http_get {
        let path = http.path.as_deref().unwrap_or("/");
        if !path.starts_with("/readyz") {
            notes.push(format!(
                "the readinessProbe asks {path}, not /readyz: this plan holds only if {path} \
                 fails from the stop signal on as /readyz does"
            ));
        }
    } else if probe.exec.is_some() {
        return Ok(Err(unsupported("exec")));
    } else if probe.tcp_socket.is_some() {
        return Ok(Err(unsupported("tcpSocket")));
    } else if probe.grpc.is_none() {
        return Ok(Err(unsupported("no handler")));
    }
    let field = |name: &str, value: Option<i32>, default: i32| -> Result<u32, ManifestError> {
        let value = value.unwrap_or(default);
        u32::try_from(value)
            .ok()
            .filter(|v| *v >= 1)
            .ok_or_else(|| ManifestError::Field {
                name: deployment.to_string(),
                field: format!("container {:?} readinessProbe.{name}", container.name),
                rule: "at least 1",
                value: i64::from(value),
            })
    };
    let period = field(
        "periodSeconds",
        probe.period_seconds,
        DEFAULT_PERIOD_SECONDS,
    )?;
    let timeout = field(
        "timeoutSeconds",
        probe.timeout_seconds,
        DEFAULT_TIMEOUT_SECONDS,
    )?;
    let failure_threshold = field(
        "failureThreshold",
        probe.failure_threshold,
        DEFAULT_FAILURE_THRESHOLD,
    )?;
    Ok(Ok(ManifestProbe {
        period: Duration::from_secs(u64::from(period)),
        timeout: Duration::from_secs(u64::from(timeout)),
        failure_threshold,
    }))
}

/// How long a `preStop` hook sleeps: the `sleep` action, or an `exec` of `sleep N` (directly or
/// through `sh -c`). Other hooks get a note: their time is unknown.
fn pre_stop(handler: &LifecycleHandler, notes: &mut Vec<String>) -> Option<Duration> {
    if let Some(sleep) = &handler.sleep {
        return Some(Duration::from_secs(sleep.seconds.max(0).unsigned_abs()));
    }
    let command = handler
        .exec
        .as_ref()
        .and_then(|e| e.command.as_deref())
        .unwrap_or_default();
    let words: Vec<&str> = match command {
        [shell, flag, script] if shell.ends_with("sh") && flag == "-c" => {
            script.split_whitespace().collect()
        }
        words => words.iter().map(String::as_str).collect(),
    };
    if let [program, seconds] = words.as_slice() {
        if *program == "sleep" || program.ends_with("/sleep") {
            if let Some(d) = sleep_seconds(seconds) {
                return Some(d);
            }
        }
    }
    notes.push(String::from(
        "the preStop hook is not a recognised sleep; its time is not counted, so leave room \
         for it in terminationGracePeriodSeconds",
    ));
    None
}

/// `sleep`'s argument: seconds (`5`, `2.5`) or with a unit (`5s`, `1m`).
fn sleep_seconds(text: &str) -> Option<Duration> {
    let bare = text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let go = if bare {
        format!("{text}s")
    } else {
        text.to_string()
    };
    parse_duration(&go).ok()
}

/// The lameduck flags among `command` and `args`, as `--flag=value` or `--flag value`.
fn flags(deployment: &str, container: &Container) -> Result<ManifestFlags, ManifestError> {
    let words: Vec<&str> = container
        .command
        .iter()
        .chain(container.args.iter())
        .flatten()
        .map(String::as_str)
        .collect();
    let mut out = ManifestFlags::default();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        i += 1;
        let (name, inline) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word, None),
        };
        let error = |arg: String, reason: String| ManifestError::Argument {
            name: deployment.to_string(),
            container: container.name.clone(),
            arg,
            reason,
        };
        if name == "--shutdown-send-retry-after" {
            let value = inline.unwrap_or("true");
            let on = crate::args::boolean(value).map_err(|e| error(word.into(), e.to_string()))?;
            out.shutdown_send_retry_after = Some(on);
            continue;
        }
        let slot = match name {
            "--shutdown-delay" => &mut out.shutdown_delay,
            "--request-timeout" => &mut out.request_timeout,
            "--shutdown-watch-termination-grace-period" => {
                &mut out.shutdown_watch_termination_grace_period
            }
            "--pre-shutdown-hook-duration" => &mut out.pre_shutdown_hook_duration,
            _ => continue,
        };
        let value = match inline {
            Some(v) => v,
            None if i < words.len() => {
                i += 1;
                words[i - 1]
            }
            None => return Err(error(word.into(), String::from("needs a value"))),
        };
        let arg = if inline.is_some() {
            word.to_string()
        } else {
            format!("{name} {value}")
        };
        if value.contains("$(") {
            out.unresolved.push(name.to_string());
            continue;
        }
        let d = crate::args::duration(value).map_err(|e| error(arg, e.to_string()))?;
        *slot = Some(d);
    }
    Ok(out)
}
