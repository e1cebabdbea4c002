//! `--observed FILE...`: the termination summaries in server logs, read into the core's
//! [`Observed`] figures, per file and in all.
//!
//! A log is any text with one line per record; a termination summary is a line holding
//! `[graceful-termination] termination summary:`, whatever comes before it (timestamp, level,
//! target: they differ between runtimes and subscribers). Lines are read as bytes and decoded
//! lossily, terminal colour codes are stripped, and a JSON log line (a `tracing` JSON
//! subscriber's) is searched for the message that holds the summary. A line longer than
//! [`MAX_LINE`] is cut there. Nothing here panics on any input.

use std::borrow::Cow;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use lameduck::plan::observed::{
    MalformedSummary, Observed, ObservedTermination, SUMMARY_LINE_MARKER,
};

/// The longest line read whole, in bytes; a summary line is about 500.
pub const MAX_LINE: usize = 64 * 1024;

/// How `-` (standard input) is named in the output.
pub const STDIN_NAME: &str = "(stdin)";

/// Why the logs can not be used; exit status 2.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be read.
    #[error("can not read --observed {file}: {reason}")]
    Read {
        /// The file.
        file: String,
        /// The system's reason.
        reason: std::io::Error,
    },
    /// No line of the file is a termination summary.
    #[error("{file}: no termination summary found (is this a lameduck server's log?)")]
    NoSummary {
        /// The file.
        file: String,
    },
    /// A line has the summary's marker but is not a valid summary.
    #[error("{file}:{line}: malformed termination summary: {reason}")]
    Malformed {
        /// The file.
        file: String,
        /// The 1-based line number.
        line: u64,
        /// What is wrong.
        reason: MalformedSummary,
    },
    /// A line with the summary's marker is longer than [`MAX_LINE`].
    #[error(
        "{file}:{line}: malformed termination summary: the line is longer than {MAX_LINE} bytes"
    )]
    TooLong {
        /// The file.
        file: String,
        /// The 1-based line number.
        line: u64,
    },
}

/// One file's terminations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// The file as given (`(stdin)` for `-`).
    pub file: String,
    /// Its figures.
    pub observed: Observed,
}

/// Every file's terminations, and all of them together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logs {
    /// In the order given.
    pub files: Vec<LogFile>,
    /// The figures of all terminations.
    pub total: Observed,
}

/// Reads every file (`-` is standard input).
///
/// # Errors
///
/// The first file's [`LogError`].
pub fn read_all(paths: &[PathBuf]) -> Result<Logs, LogError> {
    let mut files = Vec::with_capacity(paths.len());
    let mut total = Observed::default();
    for path in paths {
        let file = read_path(path)?;
        total.merge(&file.observed);
        files.push(file);
    }
    Ok(Logs { files, total })
}

/// Reads one file (`-` is standard input).
///
/// # Errors
///
/// Its [`LogError`].
pub fn read_path(path: &Path) -> Result<LogFile, LogError> {
    if path.as_os_str() == "-" {
        let stdin = std::io::stdin();
        return read_from(STDIN_NAME, stdin.lock());
    }
    let file = path.display().to_string();
    match std::fs::File::open(path) {
        Ok(f) => read_from(&file, BufReader::new(f)),
        Err(reason) => Err(LogError::Read { file, reason }),
    }
}

/// Reads the log text in `bytes`, named `file` in errors.
///
/// # Errors
///
/// [`LogError::NoSummary`], [`LogError::Malformed`] or [`LogError::TooLong`].
pub fn read_bytes(file: &str, bytes: &[u8]) -> Result<LogFile, LogError> {
    read_from(file, bytes)
}

/// Reads a log from `reader`, line by line, each cut at [`MAX_LINE`].
///
/// # Errors
///
/// A [`LogError`] naming `file`.
pub fn read_from(file: &str, mut reader: impl BufRead) -> Result<LogFile, LogError> {
    let mut observed = Observed::default();
    let mut line = Vec::new();
    let mut cut = false;
    let mut number = 0u64;
    let read_error = |reason| LogError::Read {
        file: file.to_string(),
        reason,
    };
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(e)),
        };
        if buf.is_empty() {
            if !line.is_empty() || cut {
                number += 1;
                one_line(file, number, &line, cut, &mut observed)?;
            }
            break;
        }
        let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        cut |= chunk.len() > room;
        let used = end.unwrap_or(buf.len());
        reader.consume(used);
        if end.is_some() {
            number += 1;
            one_line(file, number, &line, cut, &mut observed)?;
            line.clear();
            cut = false;
        }
    }
    if observed.terminations == 0 {
        return Err(LogError::NoSummary {
            file: file.to_string(),
        });
    }
    Ok(LogFile {
        file: file.to_string(),
        observed,
    })
}

/// Adds the termination on `bytes` (line `number` of `file`), if it holds one.
fn one_line(
    file: &str,
    number: u64,
    bytes: &[u8],
    cut: bool,
    observed: &mut Observed,
) -> Result<(), LogError> {
    let text = String::from_utf8_lossy(bytes);
    let text = strip_ansi(&text);
    if !text.contains(SUMMARY_LINE_MARKER) {
        return Ok(());
    }
    let text = json_message(&text).unwrap_or(Cow::Borrowed(&text));
    match ObservedTermination::parse_line(&text) {
        Ok(None) => Ok(()),
        Ok(Some(t)) => {
            observed.add(&t);
            Ok(())
        }
        Err(_) if cut => Err(LogError::TooLong {
            file: file.to_string(),
            line: number,
        }),
        Err(reason) => Err(LogError::Malformed {
            file: file.to_string(),
            line: number,
            reason,
        }),
    }
}

/// `text` without terminal control sequences (`ESC [ ... m` colours and the like).
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() != Some(&'[') {
            // A lone escape (or another kind of sequence): drop the escape itself.
            continue;
        }
        chars.next();
        // Parameters and intermediates, then one final byte in @..~.
        for c in chars.by_ref() {
            if ('@'..='~').contains(&c) {
                break;
            }
        }
    }
    Cow::Owned(out)
}

/// For a JSON log line, the first string in it that holds the summary (the message).
fn json_message(line: &str) -> Option<Cow<'static, str>> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(trimmed).ok()?;
    find_summary(&value).map(|s| Cow::Owned(s.to_string()))
}

fn find_summary(value: &serde_json::Value) -> Option<&str> {
    match value {
        serde_json::Value::String(s) if s.contains(SUMMARY_LINE_MARKER) => Some(s),
        serde_json::Value::Array(items) => items.iter().find_map(find_summary),
        serde_json::Value::Object(map) => map.values().find_map(find_summary),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SUMMARY: &str = "[graceful-termination] termination summary: cause=signal \
        signal_to_exit=3.503s lame_duck=2.000s normal_drain=1.002s long_running_drain=- \
        requests_drained=3 requests_remaining=0 streams_ended=0 streams_remaining=0 rejected=4 \
        rejected_not_accepting=0 rejected_retry_after=4 rejected_request_timeout=0 \
        rejected_routes_not_ready=0 last_new_connection=1.200s last_new_request=1.950s \
        late_connections=0 late_requests=5 requests_before_ready=0 code=0";

    #[test]
    fn colours_are_stripped() {
        let coloured = format!(
            "\u{1b}[2m2026-11-27T05:07:33.916Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \
             \u{1b}[2mlameduck_hyper::server\u{1b}[0m\u{1b}[2m:\u{1b}[0m {SUMMARY}\u{1b}[0m"
        );
        let file = read_bytes("c.log", coloured.as_bytes()).unwrap();
        assert_eq!(file.observed.terminations, 1);
        assert_eq!(strip_ansi("a\u{1b}[1;31mb\u{1b}c\u{1b}["), "abc");
    }

    #[test]
    fn json_lines_are_searched_for_the_message() {
        let line = serde_json::json!({
            "timestamp": "2026-11-27T05:07:33.916Z",
            "level": "INFO",
            "fields": {"message": SUMMARY},
            "target": "lameduck_hyper::server",
        })
        .to_string();
        let file = read_bytes("j.log", format!("{{\"x\":1}}\n{line}\n").as_bytes()).unwrap();
        assert_eq!(file.observed.terminations, 1);
        assert_eq!(
            file.observed.last_new_connection,
            Some(Duration::from_millis(1200))
        );
    }

    #[test]
    fn lines_are_cut_and_counted() {
        // A summary after a very long line and without a final newline.
        let mut text = vec![b'x'; MAX_LINE * 3];
        text.push(b'\n');
        text.extend_from_slice(SUMMARY.as_bytes());
        let file = read_from("long.log", &text[..]).unwrap();
        assert_eq!(file.observed.terminations, 1);
        // Read in small pieces, lines span them.
        let pieces = BufReader::with_capacity(7, &text[..]);
        assert_eq!(
            read_from("long.log", pieces).unwrap().observed.terminations,
            1
        );
        // A summary cut at the limit.
        let long = format!("{SUMMARY}{}", " y".repeat(MAX_LINE));
        let long = long.replace("code=0", "");
        match read_bytes("cut.log", format!("a\n{long}\n").as_bytes()) {
            Err(LogError::TooLong { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        // CRLF line ends.
        let crlf = format!("start\r\n{SUMMARY}\r\n");
        assert_eq!(
            read_bytes("crlf.log", crlf.as_bytes())
                .unwrap()
                .observed
                .terminations,
            1
        );
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let e = read_bytes("empty.log", b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "empty.log: no termination summary found (is this a lameduck server's log?)"
        );
        let bad = format!(
            "one\ntwo\n{}\n",
            SUMMARY.replace("lame_duck=2.000s", "lame_duck=2")
        );
        let e = read_bytes("bad.log", bad.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad.log:3: malformed termination summary: lame_duck=\"2\" is not a valid value"
        );
        let garbage: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        assert!(matches!(
            read_bytes("bin", &garbage),
            Err(LogError::NoSummary { .. })
        ));
    }
}
