//! A minimal command-line parser for the bench binaries: `--name value`, `--name=value`
//! and boolean `--flag`s, everything after `--` kept as a command.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Parsed arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, Vec<String>>,
    flags: Vec<String>,
    /// Everything after a bare `--`.
    pub rest: Vec<String>,
}

impl Args {
    /// Parses the process arguments. `boolean` lists the flags that take no value.
    #[must_use]
    pub fn from_env(boolean: &[&str]) -> Self {
        Self::parse(std::env::args().skip(1), boolean)
    }

    /// Parses `args`.
    pub fn parse(args: impl IntoIterator<Item = String>, boolean: &[&str]) -> Self {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            if arg == "--" {
                out.rest = it.collect();
                break;
            }
            if let Some((name, value)) = arg.split_once('=').filter(|(n, _)| n.starts_with("--")) {
                out.values
                    .entry(name.to_string())
                    .or_default()
                    .push(value.to_string());
            } else if boolean.contains(&arg.as_str()) {
                out.flags.push(arg);
            } else if arg.starts_with("--") {
                let value = it
                    .next()
                    .unwrap_or_else(|| fail(&format!("flag {arg} needs a value")));
                out.values.entry(arg).or_default().push(value);
            } else {
                fail(&format!("unexpected argument {arg:?}"));
            }
        }
        out
    }

    /// Whether boolean `--name` was given.
    #[must_use]
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The last value of `--name`.
    #[must_use]
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value of a repeatable `--name`.
    #[must_use]
    pub fn values(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// `--name` parsed, or `default`; exits 2 with a message on a bad value.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> T {
        match self.value(name) {
            None => default,
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| fail(&format!("invalid value {v:?} for {name}"))),
        }
    }

    /// `--name` as a Go-style duration (`500ms`, `5s`), or `default`.
    #[must_use]
    pub fn duration(&self, name: &str, default: Duration) -> Duration {
        match self.value(name) {
            None => default,
            Some(v) => lameduck::parse_duration(v)
                .unwrap_or_else(|e| fail(&format!("invalid value {v:?} for {name}: {e}"))),
        }
    }

    /// `--listen ADDR` (default `127.0.0.1:0`).
    #[must_use]
    pub fn listen(&self) -> SocketAddr {
        self.get("--listen", SocketAddr::from(([127, 0, 0, 1], 0)))
    }
}

/// Prints `message` and exits 2.
pub fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}

/// The servers named by repeated `--server LABEL=PROGRAM ARGS...` flags (the command is
/// split on whitespace). Exits 2 when there is none or one is malformed.
#[must_use]
pub fn servers(args: &Args) -> Vec<(String, Vec<String>)> {
    let list: Vec<(String, Vec<String>)> = args
        .values("--server")
        .iter()
        .map(|spec| {
            let (label, cmd) = spec
                .split_once('=')
                .unwrap_or_else(|| fail(&format!("--server {spec:?}: expected LABEL=COMMAND")));
            let cmd: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            if cmd.is_empty() {
                fail(&format!("--server {spec:?}: empty command"));
            }
            (label.to_string(), cmd)
        })
        .collect();
    if list.is_empty() {
        fail("no --server LABEL=COMMAND given");
    }
    list
}
