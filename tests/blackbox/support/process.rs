//! Running an example server as a child process: spawn, learn its address from the first
//! stdout line, capture stderr (the log) with arrival times, send real signals, and always kill
//! it when the test ends, however it ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lameduck::summary::SummaryRecord;

use super::build::example_binary;
use super::log::{LogLine, SignalLog};

/// How long a server may take from spawn to its `listening on` line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The moments around one `kill -<SIG> <pid>`.
#[derive(Debug, Clone, Copy)]
pub struct SignalSent {
    /// Just before `kill` was run: the server cannot have seen the signal earlier.
    pub before: Instant,
    /// Just after `kill` returned: the signal has been delivered.
    pub after: Instant,
}

#[derive(Default)]
struct Captured {
    lines: Mutex<Vec<LogLine>>,
    done: AtomicBool,
}

impl Captured {
    fn lines(&self) -> Vec<LogLine> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A running example server. Dropping it kills the process (SIGKILL) and reaps it.
pub struct ServerProcess {
    pub name: &'static str,
    pub addr: SocketAddr,
    /// Whether it said `listening on https://` (it serves TLS).
    pub tls: bool,
    child: Child,
    exit: Option<ExitStatus>,
    stdout: Arc<Captured>,
    stderr: Arc<Captured>,
    first_line: Option<mpsc::Receiver<String>>,
}

impl ServerProcess {
    /// Spawns example `name` with `--listen 127.0.0.1:0` and `flags`, and waits for its
    /// `listening on http://IP:PORT` line (`https://` with TLS flags).
    pub fn start(name: &'static str, flags: &[&str]) -> ServerProcess {
        Self::start_with_env(name, flags, &[])
    }

    /// As [`ServerProcess::start`], with extra environment variables.
    pub fn start_with_env(
        name: &'static str,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> ServerProcess {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        let mut server = Self::spawn(name, &args, env);
        if let Err(problem) = server.wait_listening(STARTUP_TIMEOUT) {
            panic!("{name} {args:?} did not start: {problem}");
        }
        server
    }

    /// Spawns example `name` with exactly `args`; does not wait for anything.
    pub fn spawn(name: &'static str, args: &[&str], env: &[(&str, &str)]) -> ServerProcess {
        let binary = example_binary(name);
        let mut command = Command::new(&binary);
        command
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", binary.display()));
        let (tx, rx) = mpsc::channel();
        let stdout = Arc::new(Captured::default());
        let stderr = Arc::new(Captured::default());
        capture(
            child.stdout.take().expect("piped stdout"),
            &stdout,
            Some(tx),
        );
        capture(child.stderr.take().expect("piped stderr"), &stderr, None);
        ServerProcess {
            name,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            tls: false,
            child,
            exit: None,
            stdout,
            stderr,
            first_line: Some(rx),
        }
    }

    /// Waits for the first stdout line and parses the address from it.
    pub fn wait_listening(&mut self, timeout: Duration) -> Result<SocketAddr, String> {
        let rx = self
            .first_line
            .take()
            .ok_or("the first stdout line was already consumed")?;
        let line = match rx.recv_timeout(timeout) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "no stdout line within {timeout:?}\n{}",
                    self.describe()
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.wait_exit(Duration::from_secs(5));
                return Err(format!(
                    "stdout closed before any line (exit {status:?})\n{}",
                    self.describe()
                ));
            }
        };
        let (tls, rest) = match line.strip_prefix("listening on https://") {
            Some(rest) => (true, Some(rest)),
            None => (false, line.strip_prefix("listening on http://")),
        };
        let addr = rest
            .and_then(|a| a.trim().parse::<SocketAddr>().ok())
            .ok_or_else(|| {
                format!(
                    "first stdout line is {line:?}, not `listening on http[s]://IP:PORT`\n{}",
                    self.describe()
                )
            })?;
        if addr.ip() != std::net::Ipv4Addr::LOCALHOST || addr.port() == 0 {
            return Err(format!(
                "asked for 127.0.0.1:0, the server says it listens on {addr}"
            ));
        }
        self.addr = addr;
        self.tls = tls;
        Ok(addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `SIG<sig>` (e.g. "TERM", "INT") with `kill`.
    pub fn signal(&self, sig: &str) -> SignalSent {
        let before = Instant::now();
        let status = Command::new("kill")
            .args([format!("-{sig}"), self.pid().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
        let after = Instant::now();
        assert!(
            status.success(),
            "kill -{sig} {} failed: {status}",
            self.pid()
        );
        SignalSent { before, after }
    }

    /// Prepares `kill -<sig>` for this process in advance: a shell that waits on its stdin,
    /// so that [`ArmedSignal::fire`] costs a pipe write rather than a fork and exec. For
    /// sending a signal as close as possible to some moment (narrow races).
    pub fn arm_signal(&self, sig: &str) -> ArmedSignal {
        let helper = Command::new("sh")
            .args(["-c", &format!("read _ && kill -{sig} {}", self.pid())])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn sh: {e}"));
        ArmedSignal { helper }
    }

    /// Waits (spinning, without sleeping) until no signal number `signo` is pending for the
    /// process: the kernel has handed the last one sent to one of its threads. Returns
    /// whether that happened within `timeout`.
    ///
    /// The kernel keeps at most one pending instance of a standard signal: a second `kill`
    /// while the first is still pending is merged into it, and no program can tell. A test
    /// that needs two separate deliveries sends the second only after this. Linux only
    /// (`/proc/PID/status`); elsewhere it returns `true` at once.
    pub fn wait_signal_dequeued(&self, signo: u32, timeout: Duration) -> bool {
        let path = format!("/proc/{}/status", self.pid());
        let bit = 1u64 << (signo - 1);
        let deadline = Instant::now() + timeout;
        loop {
            let Ok(status) = std::fs::read_to_string(&path) else {
                return true;
            };
            let pending = status
                .lines()
                .filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"))
                .filter_map(|l| l.split_whitespace().nth(1))
                .filter_map(|hex| u64::from_str_radix(hex, 16).ok())
                .fold(0, |acc, mask| acc | mask);
            if pending & bit == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// The exit status, waiting up to `timeout`; `None` if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit {
                return Some(status);
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.exit = Some(status);
                    // Let the capture threads read what is left in the pipes.
                    let drained = Instant::now() + Duration::from_secs(2);
                    while Instant::now() < drained
                        && !(self.stdout.done.load(Ordering::Acquire)
                            && self.stderr.done.load(Ordering::Acquire))
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    self.check_summary(status);
                    return Some(status);
                }
                Ok(None) => {}
                Err(e) => panic!("waiting for {}: {e}", self.name),
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The exit code, which must come within `timeout`; panics with the log otherwise.
    pub fn expect_exit(&mut self, timeout: Duration) -> i32 {
        match self.wait_exit(timeout) {
            Some(status) => status.code().unwrap_or_else(|| {
                panic!(
                    "{} ended by a signal ({status}), not an exit code\n{}",
                    self.name,
                    self.describe()
                )
            }),
            None => panic!(
                "{} still running {timeout:?} later\n{}",
                self.name,
                self.describe()
            ),
        }
    }

    /// Asserts the process exits with `code` within `timeout`.
    pub fn assert_exit(&mut self, code: i32, timeout: Duration) {
        let got = self.expect_exit(timeout);
        assert_eq!(got, code, "{} exit code\n{}", self.name, self.describe());
    }

    pub fn stderr_text(&self) -> String {
        join(&self.stderr.lines())
    }

    pub fn stdout_text(&self) -> String {
        join(&self.stdout.lines())
    }

    /// The termination summary the server logged before exiting
    /// (`[graceful-termination] termination summary: ...`), read with the core's parser.
    pub fn summary(&self) -> Option<SummaryRecord> {
        self.stderr
            .lines()
            .iter()
            .rev()
            .find_map(|l| SummaryRecord::parse_line(&l.text))
    }

    /// Every run whose lifecycle started and that exited with a code must have logged the
    /// termination summary, with that exit code.
    fn check_summary(&self, status: ExitStatus) {
        let Some(code) = status.code() else {
            return;
        };
        if !self
            .stderr_text()
            .contains("[graceful-termination] waiting for shutdown")
        {
            return;
        }
        let summary = self.summary().unwrap_or_else(|| {
            panic!(
                "{} exited {code} without a termination summary line\n{}",
                self.name,
                self.describe()
            )
        });
        assert_eq!(
            summary.code.map(i32::from),
            Some(code),
            "{}: the summary's exit code ({summary})\n{}",
            self.name,
            self.describe()
        );
    }

    /// The `[graceful-termination]` signal lines seen so far.
    pub fn signals(&self) -> SignalLog {
        SignalLog::new(self.stderr.lines())
    }

    /// Waits up to `timeout` for the log line of signal `name`; the moment it was read.
    pub fn wait_signal(&self, name: &str, timeout: Duration) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.signals().time_of(name) {
                return at;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: no `[graceful-termination] ... {name}` log line within {timeout:?}\n{}",
                    self.name,
                    self.describe()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Name, pid, exit status and everything captured so far, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "--- {} (pid {}, addr {}, exit {:?}) stdout:\n{}\n--- stderr:\n{}\n---",
            self.name,
            self.pid(),
            self.addr,
            self.exit,
            self.stdout_text(),
            self.stderr_text()
        )
    }
}

/// A signal ready to be sent; see [`ServerProcess::arm_signal`].
pub struct ArmedSignal {
    helper: Child,
}

impl ArmedSignal {
    /// Sends the signal and waits for `kill` to return.
    pub fn fire(mut self) -> SignalSent {
        let before = Instant::now();
        let mut stdin = self.helper.stdin.take().expect("piped stdin");
        stdin.write_all(b"go\n").expect("trigger the armed kill");
        drop(stdin);
        let status = self.helper.wait().expect("wait for the armed kill");
        let after = Instant::now();
        assert!(status.success(), "the armed kill failed: {status}");
        SignalSent { before, after }
    }
}

impl Drop for ArmedSignal {
    fn drop(&mut self) {
        if let Ok(None) = self.helper.try_wait() {
            let _ = self.helper.kill();
            let _ = self.helper.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.exit.is_none() {
            // `Child::kill` sends SIGKILL to this child's pid (and only if it was not reaped).
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.describe());
        }
    }
}

fn join(lines: &[LogLine]) -> String {
    lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads `pipe` line by line on a thread, stamping each line with its arrival time.
fn capture(
    pipe: impl Read + Send + 'static,
    into: &Arc<Captured>,
    first_line: Option<mpsc::Sender<String>>,
) {
    let into = Arc::clone(into);
    std::thread::Builder::new()
        .name("child-pipe".into())
        .spawn(move || {
            let mut first_line = first_line;
            let mut reader = BufReader::new(pipe);
            let mut raw = Vec::new();
            loop {
                raw.clear();
                match reader.read_until(b'\n', &mut raw) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let at = Instant::now();
                let text = strip_ansi(&String::from_utf8_lossy(&raw))
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                if let Some(tx) = first_line.take() {
                    let _ = tx.send(text.clone());
                }
                into.lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(LogLine { at, text });
            }
            into.done.store(true, Ordering::Release);
        })
        .expect("spawn pipe reader");
}

/// Removes ANSI escape sequences (colours), in case a logger ignores `NO_COLOR`.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            // CSI: parameters, then one final byte in 0x40..=0x7e.
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

#[test]
fn ansi_sequences_are_stripped() {
    assert_eq!(
        strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m a \u{1b}[3mname\u{1b}[0m\u{1b}[2m=\u{1b}[0mX"),
        "2026  INFO a name=X"
    );
}

/// The soft and hard limits on open files of this process (children inherit them).
fn open_files_limits() -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line.split_whitespace().skip(3);
    let parse = |s: Option<&str>| match s? {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    };
    Some((parse(fields.next())?, parse(fields.next())?))
}

/// Makes sure this process (and the servers it starts from now on) may open `need` files:
/// raises the soft limit up to the hard limit with `prlimit` when it is lower (an
/// unprivileged change), and panics with advice when that is not enough.
pub fn ensure_open_files(need: u64) {
    let Some((soft, hard)) = open_files_limits() else {
        return; // Not Linux's /proc: nothing to check.
    };
    if soft >= need {
        return;
    }
    let target = need.max(4096).min(hard);
    let raised = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg(format!("--nofile={target}:"))
        .status();
    let now = open_files_limits().map_or(0, |(soft, _)| soft);
    assert!(
        now >= need,
        "this case holds about {need} files: the open-files limit is {soft} (hard {hard}) and \
         raising it with prlimit gave {now} ({raised:?}); run `ulimit -n {need}` first"
    );
}
