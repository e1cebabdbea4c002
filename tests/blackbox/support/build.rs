//! Builds each example server once per test run, in release mode, in the target directory of
//! the running test (so a run does not build into some other checkout's `target/`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

type Built = Arc<OnceLock<Result<PathBuf, String>>>;

/// The path of the release build of example `name`, building it on first use. Concurrent
/// callers for the same name wait for the one build; a failed build fails every caller.
pub fn example_binary(name: &'static str) -> PathBuf {
    static BUILDS: OnceLock<Mutex<HashMap<&'static str, Built>>> = OnceLock::new();
    let cell = BUILDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(name)
        .or_default()
        .clone();
    match cell.get_or_init(|| build(name)) {
        Ok(path) => path.clone(),
        Err(message) => panic!("{message}"),
    }
}

/// The target directory of this test run: the test executable is
/// `<target>/<profile>/deps/<test>-<hash>` (or `<target>/<triple>/<profile>/deps/...`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|p| p.file_name().is_some_and(|n| n == "deps"))
                .and_then(Path::parent)
                .and_then(Path::parent)
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// What cargo sets for a test binary besides `CARGO_PKG_*` (The Cargo Book, "Environment
/// variables Cargo sets for crates").
const TEST_ENV: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_BIN_NAME",
];

fn build(name: &str) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let target_dir = target_dir();
    let mut command = Command::new(&cargo);
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // From the workspace root, as a user builds it: each example server is in a package of
        // its own (the workspace's default members), which cargo finds by the example's name.
        .args(["build", "--release", "--example", name])
        .arg("--message-format=json-render-diagnostics")
        .arg("--target-dir")
        .arg(&target_dir)
        // Do not inherit a jobserver meant for the outer cargo.
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    // Nor what cargo sets for this test binary: some build scripts track these variables (ring's
    // tracks CARGO_MANIFEST_DIR), so a build with them would not be the one a user's shell, the
    // proofs and CI make: each would compile rustls and everything above it again.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_") || TEST_ENV.contains(&key.as_ref()) {
            command.env_remove(key.as_ref());
        }
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cargo:?} to build example {name}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "`cargo build --release --example {name} --target-dir {}` failed ({}):\n{}",
            target_dir.display(),
            output.status,
            tail.join("\n")
        ));
    }
    let from_messages = stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains(&format!("\"name\":\"{name}\"")))
        .filter(|l| l.contains("\"kind\":[\"example\"]"))
        .find_map(|l| json_string_field(l, "executable"))
        .map(PathBuf::from);
    let path = from_messages.unwrap_or_else(|| {
        target_dir
            .join("release")
            .join("examples")
            .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
    });
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "example {name} was built but {} is not a file",
            path.display()
        ))
    }
}

/// The value of string field `"key":"..."` in one line of cargo's JSON messages.
fn json_string_field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut value = String::new();
    let mut chars = line[start..].chars();
    loop {
        match chars.next()? {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c => value.push(c),
            },
            c => value.push(c),
        }
    }
}

#[test]
fn json_field_is_read_and_unescaped() {
    let line = r#"{"reason":"compiler-artifact","executable":"/t/a\\b \"c\"/x","fresh":true}"#;
    assert_eq!(
        json_string_field(line, "executable").as_deref(),
        Some(r#"/t/a\b "c"/x"#)
    );
    assert_eq!(
        json_string_field(r#"{"executable":null}"#, "executable"),
        None
    );
}
