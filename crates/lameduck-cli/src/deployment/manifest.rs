//! What the planner reads from a manifest ([`Manifest`]) and why a manifest can not be used
//! ([`ManifestError`], [`ProbeProblem`]).

use std::time::Duration;

/// What the planner reads from one container of one Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// `metadata.name` of the Deployment.
    pub deployment: String,
    /// The container's name.
    pub container: String,
    /// The readiness probe's timing, or why it can not be used.
    pub probe: Result<ManifestProbe, ProbeProblem>,
    /// `terminationGracePeriodSeconds`, or `None` when not set (Kubernetes then uses 30).
    pub termination_grace_period: Option<Duration>,
    /// How long the container's `preStop` hook sleeps, when it is a recognised sleep.
    pub pre_stop_sleep: Option<Duration>,
    /// The container's lameduck flags found in `command` and `args`.
    pub flags: ManifestFlags,
    /// Things worth knowing that do not stop the plan, such as a probe path other than
    /// `/readyz`.
    pub notes: Vec<String>,
}

/// Why a manifest can not be checked.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("can not read --deployment {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The system's reason.
        reason: String,
    },
    /// A document is not valid YAML or JSON.
    #[error("document {index} is not valid YAML or JSON: {reason}")]
    Syntax {
        /// 1-based document number.
        index: usize,
        /// The parser's reason, with the line.
        reason: String,
    },
    /// A document is not an object with a `kind`.
    #[error("document {index} is not a Kubernetes object (a mapping with apiVersion and kind)")]
    NotAnObject {
        /// 1-based document number.
        index: usize,
    },
    /// No document is a Deployment.
    #[error("no Deployment in the file (found: {found})")]
    NoDeployment {
        /// The kinds found, or `nothing`.
        found: String,
    },
    /// Several Deployments and no `--deployment-name`.
    #[error("the file holds several Deployments ({names}); choose one with --deployment-name")]
    SeveralDeployments {
        /// Their names.
        names: String,
    },
    /// `--deployment-name` names none of them.
    #[error("no Deployment named {wanted:?} in the file (found: {names})")]
    NoDeploymentNamed {
        /// `--deployment-name`.
        wanted: String,
        /// The names found.
        names: String,
    },
    /// A Deployment document does not match the Deployment schema.
    #[error("Deployment {name:?} does not match the apps/v1 Deployment schema: {reason}")]
    Schema {
        /// `metadata.name`, if readable.
        name: String,
        /// The deserializer's reason (field and expected type).
        reason: String,
    },
    /// No `spec.template.spec.containers`.
    #[error("Deployment {name:?} has no containers in spec.template.spec.containers")]
    NoContainers {
        /// The Deployment.
        name: String,
    },
    /// Several containers, none singled out.
    #[error(
        "Deployment {name:?} has several containers ({names}) and not exactly one has a \
         readinessProbe; choose one with --container"
    )]
    SeveralContainers {
        /// The Deployment.
        name: String,
        /// The containers' names.
        names: String,
    },
    /// `--container` names none of them.
    #[error("Deployment {name:?} has no container named {wanted:?} (containers: {names})")]
    NoContainerNamed {
        /// The Deployment.
        name: String,
        /// `--container`.
        wanted: String,
        /// The containers' names.
        names: String,
    },
    /// A field has a value Kubernetes would reject.
    #[error("Deployment {name:?}: {field} must be {rule} (got {value})")]
    Field {
        /// The Deployment.
        name: String,
        /// The field's path.
        field: String,
        /// What it must be.
        rule: &'static str,
        /// What it is.
        value: i64,
    },
    /// A lameduck flag in the container's arguments has an invalid value.
    #[error("Deployment {name:?} container {container:?}: argument {arg:?}: {reason}")]
    Argument {
        /// The Deployment.
        name: String,
        /// The container.
        container: String,
        /// The argument as written.
        arg: String,
        /// Why it is invalid.
        reason: String,
    },
}

/// The readiness probe's timing, with Kubernetes' defaults for unset fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestProbe {
    /// `periodSeconds` (default 10).
    pub period: Duration,
    /// `timeoutSeconds` (default 1).
    pub timeout: Duration,
    /// `failureThreshold` (default 3).
    pub failure_threshold: u32,
}

/// Why the container's readiness probe can not stand for a load balancer asking `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeProblem {
    /// No readiness probe.
    #[error(
        "container {container:?} has no readinessProbe, so nothing takes the pod out of \
         service when /readyz turns red; add an httpGet probe of /readyz (lameduck plan \
         --kubernetes prints one), or give the load balancer's settings with --probe-interval, \
         --probe-timeout and --unhealthy-threshold"
    )]
    Missing {
        /// The container.
        container: String,
    },
    /// An `exec`, `tcpSocket` or handler-less probe, which does not see `/readyz`.
    #[error(
        "container {container:?} has a readinessProbe of type {kind}, which does not ask /readyz \
         and so does not see the lame-duck window; use an httpGet probe of /readyz (or a grpc \
         probe with the gRPC example), or give the load balancer's settings with \
         --probe-interval, --probe-timeout and --unhealthy-threshold"
    )]
    Unsupported {
        /// The container.
        container: String,
        /// `exec`, `tcpSocket` or `no handler`.
        kind: &'static str,
    },
}

/// The lameduck flags found in the container's `command` and `args`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestFlags {
    /// `--shutdown-delay`.
    pub shutdown_delay: Option<Duration>,
    /// `--request-timeout`.
    pub request_timeout: Option<Duration>,
    /// `--shutdown-watch-termination-grace-period`.
    pub shutdown_watch_termination_grace_period: Option<Duration>,
    /// `--shutdown-send-retry-after`.
    pub shutdown_send_retry_after: Option<bool>,
    /// `--pre-shutdown-hook-duration` (the example servers' demo hook).
    pub pre_shutdown_hook_duration: Option<Duration>,
    /// Flags whose value refers to an environment variable (`$(VAR)`), which the planner can
    /// not resolve: each must be given on the command line.
    pub unresolved: Vec<String>,
}
