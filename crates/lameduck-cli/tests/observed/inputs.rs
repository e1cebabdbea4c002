//! The logs read: several files (and standard input) add up; a log that can not be used
//! exits 2 naming the file; any bytes are read or refused, never a panic.

use std::io::Write as _;
use std::process::{Command, Stdio};

use lameduck_cli::report::ObservedOnlyReport;
use proptest::prelude::*;

use crate::common::{json, stderr, stdout};
use crate::{code, fixture, observed, summary, temp};

#[test]
fn several_files_add_up() {
    let files = [
        fixture("tokio-clean.log"),
        fixture("actix-clean.log"),
        fixture("old-format.log"),
    ];
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let o = observed(&files, &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("terminations   4 in 3 files"), "{out}");
    assert!(out.contains("tokio-clean.log: 2\n"), "{out}");
    // The actix log was written to a terminal: colour codes.
    assert!(out.contains("actix-clean.log: 1\n"), "{out}");
    assert!(
        out.contains("old-format.log: 1, without arrival fields"),
        "{out}"
    );
    // The latest connection is the actix one, the smallest margin too.
    assert!(
        out.contains("last new conn  2.3s after the signal"),
        "{out}"
    );
    assert!(out.contains("margin         2.7s left"), "{out}");
    assert!(out.contains("late requests  5 "), "{out}");
    let report = json::<ObservedOnlyReport>(&observed(&files, &["--json"]));
    let counts: Vec<(u64, u64)> = report
        .observed
        .files
        .iter()
        .map(|f| (f.terminations, f.terminations_without_arrivals))
        .collect();
    assert_eq!(counts, [(2, 0), (1, 0), (1, 1)]);
    assert_eq!(report.observed.terminations, 4);
    // The flag repeated, and standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_lameduck"))
        .args(["plan", "--observed", "-", "--observed", files[1]])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::fs::read(files[0]).unwrap();
    child.stdin.take().unwrap().write_all(&log).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("terminations   3 in 2 files"), "{out}");
    assert!(out.contains("  - (stdin): 2\n"), "{out}");
}

#[test]
fn unusable_logs_exit_2_naming_the_file() {
    let empty = temp("empty.log", b"");
    let garbage: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let garbage = temp("garbage.bin", &garbage);
    let huge = temp("huge.log", &vec![b'a'; 3 << 20]);
    let no_summary = fixture("no-summary.log");
    for file in [&empty, &garbage, &huge, &no_summary] {
        let o = observed(&[file], &[]);
        assert_eq!(code(&o), Some(2), "{file}: {}", stdout(&o));
        assert!(stdout(&o).is_empty());
        assert_eq!(
            stderr(&o),
            format!(
                "error: {file}: no termination summary found (is this a lameduck server's log?)\n"
            )
        );
    }
    // A malformed summary: the file, the line and the field.
    let malformed = fixture("malformed.log");
    let o = observed(&[&fixture("tokio-clean.log"), &malformed], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(stdout(&o).is_empty());
    assert_eq!(
        stderr(&o),
        format!(
            "error: {malformed}:2: malformed termination summary: field rejected_not_accepting= \
             is missing (is the line cut short?)\n"
        )
    );
    let bad = temp(
        "bad-value.log",
        summary("2.000s", "late_connections=many").as_bytes(),
    );
    let o = observed(&[&bad], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o)
            .contains("bad-value.log:1: malformed termination summary: late_connections=\"many\""),
        "{}",
        stderr(&o)
    );
    // A file that is not there, a directory.
    let missing = temp("x", b"").replace("/x", "/not-there.log");
    let o = observed(&[&missing], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o).starts_with(&format!("error: can not read --observed {missing}: ")),
        "{}",
        stderr(&o)
    );
    let dir = std::env::temp_dir().display().to_string();
    let o = observed(&[&dir], &[]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&dir), "{}", stderr(&o));
    // Flags only the model uses need it.
    let o = observed(
        &[&fixture("tokio-clean.log")],
        &["--termination-grace-period", "30"],
    );
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o).contains("--termination-grace-period needs the probe model"),
        "{}",
        stderr(&o)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes: a result or an error, never a panic.
    #[test]
    fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = lameduck_cli::logs::read_bytes("any", &bytes);
    }

    /// Random edits of a real log: the same.
    #[test]
    fn edited_logs_are_read_or_refused(
        cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = std::fs::read(fixture("smol-late.log")).unwrap();
        for (at, byte) in cuts {
            let i = at.index(bytes.len());
            match byte % 3 {
                0 => { bytes.remove(i); }
                1 => bytes[i] = byte,
                _ => bytes.insert(i, byte),
            }
        }
        if let Ok(file) = lameduck_cli::logs::read_bytes("edited", &bytes) {
            prop_assert!(file.observed.terminations >= 1);
        }
    }
}
