//! `--kubernetes`: a Deployment whose probes, flags and `terminationGracePeriodSeconds` match
//! the plan, built from `k8s-openapi`'s typed objects and serialized as YAML by
//! `serde_norway`, so it is valid by construction. The verdict leads as YAML comments.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use lameduck::duration::GoDuration;
use lameduck::plan::{
    ceil_seconds, Plan, PlanInput, DEFAULT_TERMINATION_GRACE_PERIOD, GRACE_PERIOD_MARGIN,
};

/// The placeholder name, image and port of the generated Deployment.
const NAME: &str = "my-service";
const IMAGE: &str = "my-service:latest";
const PORT: i32 = 8080;

/// `terminationGracePeriodSeconds` for the snippet: the suggestion (worst case rounded up plus
/// the margin), or the given budget when that is larger. Without a bound on the total, the
/// given budget or Kubernetes' default.
pub fn grace_period_seconds(plan: &Plan) -> u64 {
    let given = plan.termination_grace_period.map(ceil_seconds);
    match (plan.suggested_termination_grace_period, given) {
        (Some(s), Some(g)) => s.as_secs().max(g),
        (Some(s), None) => s.as_secs(),
        (None, Some(g)) => g,
        (None, None) => DEFAULT_TERMINATION_GRACE_PERIOD.as_secs(),
    }
}

/// Whole seconds for a probe field (at least 1, as Kubernetes requires), and a note when
/// rounded.
fn probe_seconds(field: &str, d: Duration, notes: &mut Vec<String>) -> i32 {
    let s = ceil_seconds(d).max(1);
    if Duration::from_secs(s) != d {
        notes.push(format!(
            "readinessProbe.{field}: {s}, rounded up from {}",
            GoDuration(d)
        ));
    }
    i32::try_from(s).unwrap_or(i32::MAX)
}

/// The typed Deployment, and the notes on rounded values.
pub fn deployment(input: &PlanInput, plan: &Plan) -> (Deployment, Vec<String>) {
    let probes = &input.probes;
    let config = &input.config;
    let mut notes = Vec::new();
    let period = probe_seconds("periodSeconds", probes.interval, &mut notes);
    let timeout = probe_seconds("timeoutSeconds", probes.timeout, &mut notes);
    let threshold = i32::try_from(probes.unhealthy_threshold).unwrap_or(i32::MAX);
    let labels = BTreeMap::from([(String::from("app"), String::from(NAME))]);
    let mut args = vec![
        format!("--shutdown-delay={}", GoDuration(config.shutdown_delay())),
        format!("--request-timeout={}", GoDuration(config.request_timeout())),
        format!(
            "--shutdown-watch-termination-grace-period={}",
            GoDuration(config.shutdown_watch_termination_grace_period())
        ),
    ];
    if config.shutdown_send_retry_after() {
        args.push(String::from("--shutdown-send-retry-after"));
    }
    let http_probe = |path: &str, failure_threshold: i32, success_threshold: Option<i32>| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(String::from("http")),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        failure_threshold: Some(failure_threshold),
        success_threshold,
        ..Probe::default()
    };
    let container = Container {
        name: String::from(NAME),
        image: Some(String::from(IMAGE)),
        args: Some(args),
        ports: Some(vec![ContainerPort {
            name: Some(String::from("http")),
            container_port: PORT,
            ..ContainerPort::default()
        }]),
        // /readyz turns red at SIGTERM; /livez stays 200 during the whole termination.
        readiness_probe: Some(http_probe("/readyz", threshold, Some(1))),
        liveness_probe: Some(http_probe("/livez", 3, None)),
        ..Container::default()
    };
    let grace = i64::try_from(grace_period_seconds(plan)).unwrap_or(i64::MAX);
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(String::from(NAME)),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some(String::from("RollingUpdate")),
                rolling_update: Some(RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString::Int(0)),
                    max_surge: Some(IntOrString::Int(1)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(grace),
                    containers: vec![container],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    (deployment, notes)
}

/// The YAML document, with the verdict, the problems and the rounding notes as comments at
/// the top.
///
/// # Errors
///
/// The serializer's error (not expected for these objects).
pub fn render(
    input: &PlanInput,
    plan: &Plan,
    verdict: &str,
) -> Result<String, serde_norway::Error> {
    let (deployment, notes) = deployment(input, plan);
    let mut s = String::new();
    let _ = writeln!(s, "# lameduck plan: {verdict}");
    for problem in &plan.problems {
        let _ = writeln!(s, "#   - {problem}");
    }
    let total = match plan.total_worst_case {
        Some(t) => format!("worst-case termination {}", GoDuration(t)),
        None => String::from("the drain has no bound (--request-timeout 0)"),
    };
    let _ = writeln!(
        s,
        "# terminationGracePeriodSeconds: {total}, rounded up, plus {}s (or the given budget \
         when larger)",
        GRACE_PERIOD_MARGIN.as_secs()
    );
    let _ = writeln!(
        s,
        "# readinessProbe: /readyz turns red at SIGTERM; out of service after at most {}",
        GoDuration(plan.detection_worst_case)
    );
    for note in notes {
        let _ = writeln!(s, "# {note}");
    }
    s.push_str(
        "# The readiness probe matches the load balancer's settings; if your load balancer probes\n\
         # /readyz itself, configure it the same way. Replace the names, the image and the port.\n",
    );
    s.push_str(&serde_norway::to_string(&deployment)?);
    Ok(s)
}
