//! What the CLI's integration tests share: running the `lameduck` binary, reading its output,
//! the fixtures, and files of their own.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The probe flags of the AWS example (a 10 s interval and timeout, 2 failures): the
/// worst-case detection is 30 s.
pub const AWS_PROBES: [&str; 6] = [
    "--probe-interval",
    "10s",
    "--probe-timeout",
    "10s",
    "--unhealthy-threshold",
    "2",
];

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

/// `o`'s standard output read as JSON.
pub fn json<T: serde::de::DeserializeOwned>(o: &Output) -> T {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}\n{}", stdout(o)))
}

/// `tests/fixtures/NAME`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A path named `name` in this test process's own temporary directory.
pub fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lameduck-cli-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes `contents` to [`temp_path`]`(name)`; the path.
pub fn temp_file(name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, contents).unwrap();
    path
}
