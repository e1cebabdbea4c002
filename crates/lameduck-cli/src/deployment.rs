//! `--deployment FILE`: the user's own Deployment manifest, read into `k8s-openapi`'s typed
//! [`Deployment`], and what the planner needs from it ([`Manifest`]).
//!
//! The file is YAML (several `---` documents allowed) or JSON (one or more objects, or a
//! `kind: List`). Documents of other kinds (Services, ConfigMaps) are skipped. Every way the
//! file can be unusable is a [`ManifestError`] with a message that says what to change;
//! nothing here panics on any input.

mod container;
mod documents;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

pub use container::{ManifestFlags, ManifestProbe, ProbeProblem};

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

/// Reads and checks `path`.
///
/// # Errors
///
/// [`ManifestError`] when the file can not be read or holds no usable Deployment.
pub fn read(
    path: &Path,
    deployment_name: Option<&str>,
    container: Option<&str>,
) -> Result<Manifest, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    parse(&text, deployment_name, container)
}

/// Parses manifest text (YAML or JSON) and picks the Deployment and the container.
///
/// # Errors
///
/// [`ManifestError`] when the text holds no usable Deployment.
pub fn parse(
    text: &str,
    deployment_name: Option<&str>,
    container: Option<&str>,
) -> Result<Manifest, ManifestError> {
    let deployment = select_deployment(documents::deployments(text)?, deployment_name)?;
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let pod = deployment.spec.template.spec;
    let Some(pod) = pod.filter(|p| !p.containers.is_empty()) else {
        return Err(ManifestError::NoContainers { name });
    };
    let chosen = select_container(&name, &pod.containers, container)?;
    let termination_grace_period = match pod.termination_grace_period_seconds {
        None => None,
        Some(s) if s < 0 => {
            return Err(ManifestError::Field {
                name,
                field: String::from("spec.template.spec.terminationGracePeriodSeconds"),
                rule: "zero or more",
                value: s,
            })
        }
        Some(s) => Some(Duration::from_secs(s.unsigned_abs())),
    };
    container::read(&name, chosen, termination_grace_period)
}

/// The one Deployment to check.
fn select_deployment(
    mut found: Vec<Deployment>,
    wanted: Option<&str>,
) -> Result<Deployment, ManifestError> {
    let names = || {
        found
            .iter()
            .map(|d| format!("{:?}", d.metadata.name.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(wanted) => match found
            .iter()
            .position(|d| d.metadata.name.as_deref() == Some(wanted))
        {
            Some(i) => Ok(found.swap_remove(i)),
            None => Err(ManifestError::NoDeploymentNamed {
                wanted: wanted.to_string(),
                names: names(),
            }),
        },
        None if found.len() > 1 => Err(ManifestError::SeveralDeployments { names: names() }),
        // `documents::deployments` never returns an empty list.
        None => found.pop().ok_or(ManifestError::NoDeployment {
            found: String::from("nothing"),
        }),
    }
}

/// The container named `wanted`; else the only one; else the only one with a readiness probe.
fn select_container<'a>(
    deployment: &str,
    containers: &'a [Container],
    wanted: Option<&str>,
) -> Result<&'a Container, ManifestError> {
    let names = || {
        containers
            .iter()
            .map(|c| format!("{:?}", c.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(wanted) = wanted {
        return containers.iter().find(|c| c.name == wanted).ok_or_else(|| {
            ManifestError::NoContainerNamed {
                name: deployment.to_string(),
                wanted: wanted.to_string(),
                names: names(),
            }
        });
    }
    if let [only] = containers {
        return Ok(only);
    }
    let mut probed = containers.iter().filter(|c| c.readiness_probe.is_some());
    match (probed.next(), probed.next()) {
        (Some(one), None) => Ok(one),
        _ => Err(ManifestError::SeveralContainers {
            name: deployment.to_string(),
            names: names(),
        }),
    }
}
