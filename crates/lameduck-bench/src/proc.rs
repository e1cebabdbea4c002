//! Starting a server under test, signalling it, and timing its exit from the parent that
//! reaps it.
//!
//! The exit instant is taken by a thread blocked in `waitpid` (`Child::wait`) the moment it
//! returns. Polling with `kill(pid, 0)` would be wrong: an exited but unreaped child (a
//! zombie) still answers it.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

pub use libc::{SIGINT, SIGKILL, SIGTERM};

/// How a server process ended, as its parent saw it.
#[derive(Clone, Copy, Debug)]
pub struct Exit {
    /// When `waitpid` returned.
    pub at: Instant,
    /// The exit status.
    pub status: ExitStatus,
}

/// A running server process (killed and reaped on drop).
#[derive(Debug)]
pub struct Server {
    /// The process id.
    pub pid: i32,
    /// The address from its `listening on http://ADDR` line.
    pub addr: SocketAddr,
    /// When the listening line was read.
    pub listening_at: Instant,
    exited: mpsc::Receiver<Exit>,
    exit: Option<Exit>,
}

/// Sends `signal` to `pid`.
#[allow(unsafe_code)]
pub fn kill(pid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Server {
    /// Starts `cmd` (program and arguments) with stdout piped and stderr to `stderr` (or
    /// discarded), and waits up to `timeout` for its `listening on http://ADDR` line.
    pub fn spawn(cmd: &[String], stderr: Option<&Path>, timeout: Duration) -> io::Result<Server> {
        let (program, args) = cmd
            .split_first()
            .ok_or_else(|| io::Error::other("empty server command"))?;
        let stderr = match stderr {
            Some(path) => Stdio::from(File::options().create(true).append(true).open(path)?),
            None => Stdio::null(),
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| io::Error::other(format!("cannot start {program}: {e}")))?;
        let pid = i32::try_from(child.id()).map_err(io::Error::other)?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (addr_tx, addr_rx) = mpsc::channel();
        // Reads the listening line, then keeps draining stdout so the server never blocks.
        thread::spawn(move || {
            let mut addr_tx = Some(addr_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    if let (Some(tx), Ok(addr)) = (addr_tx.take(), rest.trim().parse()) {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let (exit_tx, exited) = mpsc::channel();
        thread::spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = exit_tx.send(Exit {
                    at: Instant::now(),
                    status,
                });
            }
        });
        let mut server = Server {
            pid,
            addr: ([127, 0, 0, 1], 0).into(),
            listening_at: Instant::now(),
            exited,
            exit: None,
        };
        match addr_rx.recv_timeout(timeout) {
            Ok(addr) => {
                server.addr = addr;
                server.listening_at = Instant::now();
                Ok(server)
            }
            Err(_) => {
                let exit = server.try_exit();
                Err(io::Error::other(format!(
                    "{program}: no `listening on` line within {timeout:?} (exit: {exit:?})"
                )))
            }
        }
    }

    /// Sends `signal`, unless the process has already been reaped (its pid could be reused).
    pub fn signal(&mut self, signal: i32) -> io::Result<()> {
        if self.try_exit().is_some() {
            return Err(io::Error::other("the server has already exited"));
        }
        kill(self.pid, signal)
    }

    /// The exit, if the process has been reaped.
    pub fn try_exit(&mut self) -> Option<Exit> {
        if self.exit.is_none() {
            self.exit = self.exited.try_recv().ok();
        }
        self.exit
    }

    /// Waits up to `timeout` for the exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<Exit> {
        if self.exit.is_none() {
            self.exit = self.exited.recv_timeout(timeout).ok();
        }
        self.exit
    }

    /// `VmRSS` and `VmHWM` of the process in KiB, from `/proc/PID/status`.
    #[must_use]
    pub fn memory_kib(&self) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        Some((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// CPU time (user + system) the process has used so far, from `/proc/PID/stat`, in
    /// clock ticks.
    #[must_use]
    pub fn cpu_ticks(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // Fields after the command name (which may hold spaces) start at ") ".
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here (0-based 11, 12).
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(utime + stime)
    }

    /// Kills the process (SIGKILL) unless it has exited, and reaps it.
    pub fn kill_and_reap(&mut self) {
        if self.try_exit().is_none() {
            let _ = kill(self.pid, SIGKILL);
            let _ = self.wait_exit(Duration::from_secs(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// The command line for a server: `program` followed by `args`.
#[must_use]
pub fn command(program: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(program)
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}
