//! `lameduck`: command-line tools for the lameduck crates.
//!
//! `lameduck plan` checks that the shutdown delay is long enough for a load balancer to notice
//! that `/readyz` turned red before the server stops accepting requests, and that the whole
//! termination fits in Kubernetes' `terminationGracePeriodSeconds`, from flags or from the
//! user's own Deployment (`--deployment FILE`). It prints the worst-case timeline as text
//! (`--json` for programs), draws it (`--svg FILE`) and writes a matching Deployment
//! (`--kubernetes`). `lameduck completions SHELL` prints a completion script. The work is done
//! by the `lameduck_cli` library; the arithmetic is `lameduck::plan`. With `--observed FILE...`
//! it reads the termination summaries in server logs and recommends a shutdown delay that
//! covers what the load balancer really did.
//!
//! Exit status: 0 safe, 1 unsafe, 2 invalid flags, invalid input, an unusable log or an output
//! error; with `--observed`, 1 also when a termination had late connections.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser as _};
use lameduck_cli::args::{Cli, CliCommand};

/// The plan is safe.
const EXIT_SAFE: u8 = 0;
/// The plan is unsafe.
const EXIT_UNSAFE: u8 = 1;
/// Invalid flags or input, or the output could not be written (clap uses 2 too).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and --version exit 0 on stdout, usage errors 2 on stderr.
        Err(e) => e.exit(),
    };
    match cli.command {
        CliCommand::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "lameduck", &mut out);
            print(&out);
            ExitCode::from(EXIT_SAFE)
        }
        CliCommand::Plan(args) => match lameduck_cli::run_plan(&args) {
            Ok(output) => {
                print(output.stdout.as_bytes());
                ExitCode::from(if output.safe { EXIT_SAFE } else { EXIT_UNSAFE })
            }
            Err(e) => {
                // The same shape as clap's own errors.
                eprintln!("error: {e}");
                ExitCode::from(EXIT_USAGE)
            }
        },
    }
}

/// Writes to stdout, ignoring a closed pipe.
fn print(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}
