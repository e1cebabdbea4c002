//! `lameduck`: command-line tools for the lameduck crates.
//!
//! `lameduck plan` checks that the shutdown delay is long enough for a load balancer to notice
//! that `/readyz` turned red before the server stops accepting requests, and that the whole
//! termination fits in Kubernetes' `terminationGracePeriodSeconds`. It prints the worst-case
//! timeline as text (`--json` for programs), draws it (`--svg FILE`) and writes a matching
//! Deployment snippet (`--kubernetes`). The arithmetic is [`lameduck::plan`].
//!
//! Exit status: 0 safe, 1 unsafe, 2 invalid flags, invalid input or an output error.

mod args;
mod json;
mod kube;
mod svg;
mod text;

use std::io::Write as _;
use std::process::ExitCode;

use args::{Command, PlanArgs, UsageError};

/// The plan is safe.
const EXIT_SAFE: u8 = 0;
/// The plan is unsafe.
const EXIT_UNSAFE: u8 = 1;
/// Invalid flags or input, or the output could not be written.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let mut argv = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(s) => argv.push(s),
            Err(bad) => {
                return usage_error(&UsageError(format!("argument {bad:?} is not valid UTF-8")))
            }
        }
    }
    match args::parse(&argv) {
        Ok(Command::Help(text)) => {
            print(&text);
            ExitCode::from(EXIT_SAFE)
        }
        Ok(Command::Plan(plan)) => run_plan(&plan),
        Err(e) => usage_error(&e),
    }
}

fn usage_error(e: &UsageError) -> ExitCode {
    eprintln!("lameduck: error: {}", e.0);
    ExitCode::from(EXIT_USAGE)
}

/// Writes to stdout, ignoring a closed pipe.
fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn run_plan(args: &PlanArgs) -> ExitCode {
    let plan = match lameduck::plan::plan(&args.input) {
        Ok(plan) => plan,
        Err(e) => return usage_error(&UsageError(e.to_string())),
    };
    let verdict = text::verdict(&plan);
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, svg::render(&args.input, &plan)) {
            return usage_error(&UsageError(format!(
                "can not write --svg {}: {e}",
                path.display()
            )));
        }
    }
    let kubernetes = args
        .kubernetes
        .then(|| kube::render(&args.input, &plan, &verdict));
    if args.json {
        print(&json::render(
            &args.input,
            &plan,
            &verdict,
            kubernetes.as_deref(),
        ));
    } else if let Some(yaml) = &kubernetes {
        print(yaml);
    } else {
        let mut out = text::render(&args.input, &plan);
        if let Some(path) = &args.svg {
            out.push_str(&format!("timeline picture: {}\n", path.display()));
        }
        print(&out);
    }
    ExitCode::from(if plan.is_safe() {
        EXIT_SAFE
    } else {
        EXIT_UNSAFE
    })
}
