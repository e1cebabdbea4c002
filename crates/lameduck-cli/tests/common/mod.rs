//! What the CLI's integration tests share: running the `lameduck` binary and reading its
//! output.

use std::process::{Command, Output};

/// Runs the `lameduck` binary with `args`.
pub fn lameduck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lameduck"))
        .args(args)
        .output()
        .expect("runs")
}

/// `o`'s standard output.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// `o`'s standard error.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}
