//! The `lameduck` command as a library: the command line ([`args`], `clap`), the
//! `--deployment` manifest reader ([`deployment`], `k8s-openapi`), the merge of both into the
//! planner's input ([`inputs`]), the `--observed` log reader ([`logs`]) and its report
//! ([`observed`]), and the outputs: text ([`text`]), JSON ([`report`], `serde`),
//! SVG ([`svg`]) and a Deployment ([`kube`]). The arithmetic is [`lameduck::plan`]; this crate
//! only maps inputs and outputs. The binary (`src/main.rs`) prints what [`run_plan`] returns.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
pub mod deployment;
pub mod inputs;
pub mod kube;
pub mod logs;
pub mod observed;
pub mod report;
pub mod svg;
pub mod text;

use std::path::PathBuf;

/// What `lameduck plan` prints and whether the plan is safe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOutput {
    /// Everything for stdout.
    pub stdout: String,
    /// Exit status 0 when true, 1 when false.
    pub safe: bool,
}

/// Why `lameduck plan` could not finish; exit status 2.
#[derive(Debug, thiserror::Error)]
pub enum PlanFailure {
    /// Invalid input (the message names the flag or the manifest field).
    #[error(transparent)]
    Input(#[from] inputs::InputError),
    /// An `--observed` log can not be used (the message names the file).
    #[error(transparent)]
    Log(#[from] logs::LogError),
    /// The picture could not be written.
    #[error("can not write --svg {path}: {reason}")]
    Svg {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        reason: std::io::Error,
    },
    /// The JSON could not be serialized.
    #[error("can not write the JSON output: {0}")]
    Json(#[from] serde_json::Error),
    /// The Deployment could not be serialized.
    #[error("can not write the Kubernetes output: {0}")]
    Yaml(#[from] serde_norway::Error),
}

/// Runs `lameduck plan`: gathers the input, plans, writes `--svg`, and renders stdout.
///
/// # Errors
///
/// [`PlanFailure`]: invalid input or an output error.
pub fn run_plan(args: &args::PlanArgs) -> Result<PlanOutput, PlanFailure> {
    if !args.observed.is_empty() {
        return observed::run(args);
    }
    let gathered = inputs::gather(args)?;
    finish_plan(args, &gathered)
}

/// Runs `lameduck plan` on manifest text instead of `--deployment FILE` (for fuzzing and
/// tests): `args.deployment` only names the file in the output.
///
/// # Errors
///
/// [`PlanFailure`]: an unusable manifest, invalid input or an output error.
pub fn run_plan_on_manifest(
    args: &args::PlanArgs,
    manifest_text: &str,
) -> Result<PlanOutput, PlanFailure> {
    let manifest = deployment::parse(
        manifest_text,
        args.deployment_name.as_deref(),
        args.container.as_deref(),
    )
    .map_err(inputs::InputError::from)?;
    let gathered = inputs::merge(args, Some(manifest), args.deployment.as_deref())?;
    finish_plan(args, &gathered)
}

/// Plans `gathered`, writes `--svg`, and renders stdout.
fn finish_plan(
    args: &args::PlanArgs,
    gathered: &inputs::Inputs,
) -> Result<PlanOutput, PlanFailure> {
    let input = &gathered.plan_input;
    let plan = lameduck::plan::plan(input).map_err(inputs::InputError::from)?;
    let verdict = text::verdict(&plan);
    if let Some(path) = &args.svg {
        std::fs::write(path, svg::render(input, &plan)).map_err(|reason| PlanFailure::Svg {
            path: path.clone(),
            reason,
        })?;
    }
    let changes = gathered
        .manifest
        .as_ref()
        .map(|context| inputs::changes(context, &plan));
    let kubernetes = if args.kubernetes.unwrap_or(false) {
        Some(kube::render(input, &plan, &verdict)?)
    } else {
        None
    };
    let stdout = if args.json.unwrap_or(false) {
        let manifest = gathered.manifest.as_ref().zip(changes);
        report::render(&report::build(
            input,
            &plan,
            &verdict,
            kubernetes.as_deref(),
            manifest,
        ))?
    } else if let Some(yaml) = kubernetes {
        yaml
    } else {
        let mut out = String::new();
        if let Some(context) = &gathered.manifest {
            out.push_str(&text::manifest_header(context));
        }
        out.push_str(&text::render(input, &plan));
        if let Some(changes) = &changes {
            out.push_str(&text::manifest_changes(changes));
        }
        if let Some(path) = &args.svg {
            out.push_str(&format!("timeline picture: {}\n", path.display()));
        }
        out
    };
    Ok(PlanOutput {
        stdout,
        safe: plan.is_safe(),
    })
}
