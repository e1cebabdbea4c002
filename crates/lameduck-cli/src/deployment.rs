//! `--deployment FILE`: the user's own Deployment manifest, read into `k8s-openapi`'s typed
//! [`Deployment`], and what the planner needs from it ([`Manifest`]).
//!
//! The file is YAML (several `---` documents allowed) or JSON (one or more objects, or a
//! `kind: List`). Documents of other kinds (Services, ConfigMaps) are skipped. Every way the
//! file can be unusable is a [`ManifestError`] with a message that says what to change;
//! nothing here panics on any input.

mod container;
mod documents;
mod manifest;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

pub use manifest::{Manifest, ManifestError, ManifestFlags, ManifestProbe, ProbeProblem};

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
