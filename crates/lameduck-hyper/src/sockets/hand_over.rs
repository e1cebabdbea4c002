//! The hand-over of listening sockets to a successor process (a hot upgrade, as nginx's
//! binary upgrade or pingora's): the successor waits on a Unix socket
//! ([`receive_listeners`]); the running process, asked to hand over (SIGUSR2, or
//! [`Handle::hand_over`](crate::Handle::hand_over)), connects to it and sends every
//! listening socket with `SCM_RIGHTS`, then waits for the successor to say it is ready, and
//! only then terminates gracefully. Until then it keeps serving, and if the hand-over fails
//! (no successor, a successor that goes away or is not ready in time) it goes on serving.
//!
//! The wire format, for other implementations: the predecessor sends one message whose
//! bytes are [`HEADER`] and then one line per socket (its name, `\n`-terminated), with every
//! socket in one `SCM_RIGHTS` control message, in the same order. The successor answers
//! `ready <pid>\n` once it is up; closing the connection before that means it failed.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use super::{listening_tcp, InheritedListener, NotListening};

/// The first bytes of a hand-over message: the protocol and its version.
pub const HEADER: &str = "lameduck-handover 1\n";

/// The most sockets one hand-over carries.
pub const MAX_SOCKETS: usize = 64;

/// The longest hand-over message accepted (header and names).
const MAX_MESSAGE: usize = 16 * 1024;

/// How often a predecessor retries connecting, and a successor checks for one.
const POLL: Duration = Duration::from_millis(20);

/// Where a running process hands its sockets over, and how long it waits for the
/// successor, from the request to the successor's `ready`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandOver {
    path: PathBuf,
    timeout: Duration,
}

impl HandOver {
    /// Hand over to the successor waiting at `path`, giving up after `timeout`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, timeout: Duration) -> Self {
        HandOver {
            path: path.into(),
            timeout,
        }
    }

    /// The successor's Unix socket.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bound on the whole hand-over.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// Why a hand-over failed. On the predecessor's side the process keeps serving; on the
/// successor's it has no sockets to serve.
#[derive(Debug, thiserror::Error)]
pub enum HandOverError {
    /// Nothing accepted a connection at the successor's path before the bound.
    #[error("no successor is waiting at {path}: {source}")]
    NoSuccessor {
        /// The path.
        path: PathBuf,
        /// The last connect error.
        source: io::Error,
    },
    /// The successor closed the connection before it was ready (it failed or died).
    #[error("the successor went away before it was ready")]
    SuccessorGone,
    /// The successor was not ready within the bound.
    #[error("the successor was not ready within {0:?}")]
    NotReady(Duration),
    /// The successor answered something else than `ready <pid>`.
    #[error("the successor answered {0:?}, not \"ready <pid>\"")]
    BadAnswer(String),
    /// This process has no socket it could hand over.
    #[error("no listening socket can be handed over")]
    NoSockets,
    /// No hand-over target is configured.
    #[error("no hand-over socket is configured")]
    NotConfigured,
    /// The successor cannot wait at its path.
    #[error("cannot wait for the predecessor at {path}: {source}")]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// No predecessor sent its sockets within the bound.
    #[error("no predecessor handed its sockets over within {0:?}")]
    NoPredecessor(Duration),
    /// The predecessor's message is not a hand-over.
    #[error("the hand-over message is malformed: {0}")]
    Malformed(&'static str),
    /// A received descriptor is not a listening TCP socket.
    #[error("received socket {index} ({name}) is {reason}; expected a listening TCP socket")]
    NotListeningTcp {
        /// Its position in the message.
        index: usize,
        /// Its name.
        name: String,
        /// What it is instead.
        reason: NotListening,
    },
    /// Reading or writing the Unix socket failed.
    #[error("hand-over I/O failed: {0}")]
    Io(#[from] io::Error),
}

/// The connection to the predecessor, held by a successor until it is up.
#[derive(Debug)]
pub struct Predecessor {
    stream: UnixStream,
}

impl Predecessor {
    /// Tells the predecessor this process is up (it then terminates). Dropping the
    /// predecessor without calling this tells it the hand-over failed.
    pub fn report_ready(mut self) -> io::Result<()> {
        self.stream
            .write_all(format!("ready {}\n", std::process::id()).as_bytes())
    }
}

/// Sends `sockets` (name, descriptor) to the successor at `target`, then waits for it to be
/// ready; returns its process id. Blocking: run it on a thread of its own.
pub fn send_listeners(
    target: &HandOver,
    sockets: &[(String, BorrowedFd<'_>)],
) -> Result<u32, HandOverError> {
    if sockets.is_empty() || sockets.len() > MAX_SOCKETS {
        return Err(HandOverError::NoSockets);
    }
    let deadline = Instant::now() + target.timeout;
    let mut stream = loop {
        match UnixStream::connect(&target.path) {
            Ok(stream) => break stream,
            Err(source) if Instant::now() + POLL >= deadline => {
                return Err(HandOverError::NoSuccessor {
                    path: target.path.clone(),
                    source,
                })
            }
            Err(_) => std::thread::sleep(POLL),
        }
    };
    let mut message = String::from(HEADER);
    for (name, _) in sockets {
        message.push_str(name);
        message.push('\n');
    }
    let fds: Vec<BorrowedFd<'_>> = sockets.iter().map(|(_, fd)| *fd).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(HandOverError::NoSockets);
    }
    let sent = sendmsg(
        stream.as_fd(),
        &[IoSlice::new(message.as_bytes())],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .map_err(io::Error::from)?;
    stream.write_all(&message.as_bytes()[sent..])?;

    // Wait for `ready <pid>\n`.
    let remaining = deadline.saturating_duration_since(Instant::now());
    stream.set_read_timeout(Some(remaining.max(Duration::from_millis(1))))?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while answer.last() != Some(&b'\n') && answer.len() < 64 {
        match stream.read(&mut byte) {
            Ok(0) => return Err(HandOverError::SuccessorGone),
            Ok(_) => answer.push(byte[0]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HandOverError::NotReady(target.timeout))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Err(HandOverError::SuccessorGone)
            }
            Err(e) => return Err(e.into()),
        }
    }
    let text = String::from_utf8_lossy(&answer).trim_end().to_string();
    text.strip_prefix("ready ")
        .and_then(|pid| pid.parse::<u32>().ok())
        .ok_or(HandOverError::BadAnswer(text))
}

/// Waits at `path` (a Unix socket it creates) up to `timeout` for a predecessor to hand its
/// sockets over; returns them with the connection to report readiness on. Blocking: call it
/// before the runtime starts. The path is removed once the sockets arrived (or the wait
/// ended), so that this process's own successor can wait there later.
pub fn receive_listeners(
    path: &Path,
    timeout: Duration,
) -> Result<(Predecessor, Vec<InheritedListener>), HandOverError> {
    let bind_error = |source| HandOverError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(bind_error(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another process is waiting there",
            )));
        }
        // A stale socket file from an earlier successor.
        std::fs::remove_file(path).map_err(bind_error)?;
    }
    let listener = UnixListener::bind(path).map_err(bind_error)?;
    let accepted = accept_until(&listener, Instant::now() + timeout);
    let _ = std::fs::remove_file(path);
    let stream = accepted?.ok_or(HandOverError::NoPredecessor(timeout))?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(timeout))?;
    let (message, fds) = read_message(&stream)?;
    let names = parse_message(&message, fds.len())?;
    let mut listeners = Vec::with_capacity(fds.len());
    for (index, (name, fd)) in names.into_iter().zip(fds).enumerate() {
        let listener = listening_tcp(fd).map_err(|reason| HandOverError::NotListeningTcp {
            index,
            name: name.clone(),
            reason,
        })?;
        listeners.push(InheritedListener { name, listener });
    }
    Ok((Predecessor { stream }, listeners))
}

/// Accepts one connection before `deadline` (`None`: none came).
fn accept_until(listener: &UnixListener, deadline: Instant) -> io::Result<Option<UnixStream>> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => return Ok(Some(stream)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(POLL);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads the message: its bytes up to the last name's newline, and the descriptors that
/// came with it.
fn read_message(stream: &UnixStream) -> Result<(Vec<u8>, Vec<OwnedFd>), HandOverError> {
    let mut message = Vec::new();
    let mut fds = Vec::new();
    let mut buf = [0u8; 4096];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    loop {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = recvmsg(
            stream.as_fd(),
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )
        .map_err(|e| match io::Error::from(e) {
            e if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
            {
                HandOverError::Malformed("the message did not arrive in time")
            }
            e => HandOverError::Io(e),
        })?;
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = msg {
                fds.extend(received);
            }
        }
        if received.bytes == 0 {
            return Err(HandOverError::Malformed(
                "the connection closed mid-message",
            ));
        }
        message.extend_from_slice(&buf[..received.bytes]);
        if message.len() > MAX_MESSAGE {
            return Err(HandOverError::Malformed("the message is too long"));
        }
        let lines = message.iter().filter(|b| **b == b'\n').count();
        // The header's line, then one per descriptor.
        if !fds.is_empty() && lines > fds.len() && message.ends_with(b"\n") {
            return Ok((message, fds));
        }
    }
}

/// The socket names of a message carrying `fds` descriptors.
fn parse_message(message: &[u8], fds: usize) -> Result<Vec<String>, HandOverError> {
    let text = std::str::from_utf8(message).map_err(|_| HandOverError::Malformed("not UTF-8"))?;
    let names = text
        .strip_prefix(HEADER)
        .ok_or(HandOverError::Malformed("unknown header or version"))?;
    let names: Vec<String> = names.lines().map(str::to_string).collect();
    if names.len() != fds || fds == 0 {
        return Err(HandOverError::Malformed(
            "the names and the sockets do not match",
        ));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn temp_path(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("lameduck-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// A successor at `path` that takes the sockets and then answers with `answer`
    /// (`None`: closes without a word, as one that died).
    fn fake_successor(path: &Path, answer: Option<&'static str>) -> std::thread::JoinHandle<()> {
        let listener = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let (message, fds) = read_message(&stream).unwrap();
            assert_eq!(parse_message(&message, fds.len()).unwrap(), ["api"]);
            if let Some(answer) = answer {
                (&stream).write_all(answer.as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    }

    fn send(path: &Path, timeout: Duration) -> Result<u32, HandOverError> {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        send_listeners(
            &HandOver::new(path, timeout),
            &[("api".to_string(), socket.as_fd())],
        )
    }

    #[test]
    fn the_predecessor_gets_the_successors_pid() {
        let path = temp_path("ok");
        let successor = fake_successor(&path, Some("ready 4242\n"));
        assert_eq!(send(&path, Duration::from_secs(5)).unwrap(), 4242);
        successor.join().unwrap();
    }

    #[test]
    fn every_failure_of_the_successor_is_its_own_error() {
        let path = temp_path("gone");
        let successor = fake_successor(&path, None);
        let e = send(&path, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, HandOverError::SuccessorGone), "{e}");
        successor.join().unwrap();

        let path = temp_path("bad");
        let successor = fake_successor(&path, Some("nope\n"));
        let e = send(&path, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(e, HandOverError::BadAnswer(ref a) if a == "nope"),
            "{e}"
        );
        successor.join().unwrap();

        let path = temp_path("slow");
        let listener = UnixListener::bind(&path).unwrap();
        let e = send(&path, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, HandOverError::NotReady(_)), "{e}");
        drop(listener);

        let e = send(&temp_path("none"), Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, HandOverError::NoSuccessor { .. }), "{e}");
        assert!(
            e.to_string().starts_with("no successor is waiting at "),
            "{e}"
        );
    }

    #[test]
    fn a_successor_without_a_predecessor_gives_up_and_frees_its_path() {
        let path = temp_path("alone");
        let e = receive_listeners(&path, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, HandOverError::NoPredecessor(_)), "{e}");
        assert!(!path.exists());
    }

    #[test]
    fn a_received_socket_that_is_not_listening_is_refused() {
        let path = temp_path("udp");
        let receiver = {
            let path = path.clone();
            std::thread::spawn(move || receive_listeners(&path, Duration::from_secs(5)))
        };
        while !path.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = send_listeners(
            &HandOver::new(&path, Duration::from_millis(500)),
            &[("api".to_string(), udp.as_fd())],
        )
        .unwrap_err();
        assert!(matches!(e, HandOverError::SuccessorGone), "{e}");
        let e = receiver.join().unwrap().unwrap_err();
        assert!(
            matches!(
                e,
                HandOverError::NotListeningTcp {
                    reason: NotListening::NotTcp,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_message_names_every_socket_after_the_header() {
        let m = format!("{HEADER}api\nadmin\n");
        assert_eq!(parse_message(m.as_bytes(), 2).unwrap(), ["api", "admin"]);
        assert!(parse_message(m.as_bytes(), 1).is_err());
        assert!(parse_message(b"lameduck-handover 2\napi\n", 1).is_err());
        assert!(parse_message(HEADER.as_bytes(), 0).is_err());
    }
}
