//! Where the example servers' listening sockets come from (`--listen`): bound here, inherited
//! from systemd socket activation, or received from a predecessor in a hand-over. All of
//! them are opened before the runtime starts, as plain `std` listeners the runtimes adopt.

use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use lameduck_hyper::sockets::hand_over::{receive_listeners, Predecessor};
use lameduck_hyper::sockets::systemd::systemd_listeners;
use lameduck_hyper::sockets::InheritedListener;

/// The listen backlog of a socket bound here (tokio's, and more than `std`'s 128): bursts
/// of connections during a restart wait in it.
const BACKLOG: i32 = 1024;

/// The value of `--listen`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `ADDR`: bind it.
    Addr(SocketAddr),
    /// `systemd` or `systemd:NAME`: the sockets systemd passed (those named `NAME`).
    Systemd(Option<String>),
    /// `handover`: wait at `--handover-socket` for a predecessor's sockets.
    HandOver,
}

impl FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "systemd" => Ok(Listen::Systemd(None)),
            "handover" => Ok(Listen::HandOver),
            _ => match s.strip_prefix("systemd:") {
                Some("") => Err("expected a socket name after systemd:".into()),
                Some(name) => Ok(Listen::Systemd(Some(name.to_string()))),
                None => s.parse().map(Listen::Addr).map_err(|_| {
                    "expected an address (127.0.0.1:8080), systemd, systemd:NAME or handover"
                        .to_string()
                }),
            },
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Addr(addr) => write!(f, "{addr}"),
            Listen::Systemd(None) => f.write_str("systemd"),
            Listen::Systemd(Some(name)) => write!(f, "systemd:{name}"),
            Listen::HandOver => f.write_str("handover"),
        }
    }
}

/// The opened sockets, each with a listener name unique in the process.
#[derive(Debug)]
pub struct Sockets {
    /// The listeners.
    pub listeners: Vec<InheritedListener>,
    /// In hand-over mode, the predecessor to tell once this process is up.
    pub predecessor: Option<Predecessor>,
    /// Whether the sockets outlive this process (systemd keeps its copy).
    pub outlive: bool,
}

/// Opens the sockets `listen` names; `hand_over` is `--handover-socket` and
/// `--handover-timeout`. Blocking (a successor waits for its predecessor): call it before the
/// runtime starts. The error is the message to print.
pub fn open(listen: &Listen, hand_over: Option<(&PathBuf, Duration)>) -> Result<Sockets, String> {
    let (mut listeners, predecessor) = match listen {
        Listen::Addr(addr) => {
            let listener = bind(*addr).map_err(|e| format!("failed to listen on {addr}: {e}"))?;
            let api = InheritedListener {
                name: "api".into(),
                listener,
            };
            (vec![api], None)
        }
        Listen::Systemd(name) => {
            let listeners = systemd_listeners(name.as_deref())
                .map_err(|e| format!("socket activation: {e}"))?;
            (listeners, None)
        }
        Listen::HandOver => {
            let (path, timeout) = hand_over.ok_or("--listen handover needs --handover-socket")?;
            let (predecessor, listeners) =
                receive_listeners(path, timeout).map_err(|e| format!("hand-over: {e}"))?;
            (listeners, Some(predecessor))
        }
    };
    unique_names(&mut listeners);
    Ok(Sockets {
        listeners,
        predecessor,
        outlive: matches!(listen, Listen::Systemd(_)),
    })
}

/// Binds `addr` with `SO_REUSEADDR` and a [`BACKLOG`]-long queue.
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// Makes the names valid listener names (letters, digits, `-`, `_`, `.`), unique in order:
/// `http`, `http-2`, ...
fn unique_names(listeners: &mut [InheritedListener]) {
    let mut seen: Vec<String> = Vec::new();
    for l in listeners.iter_mut() {
        let mut base: String = l
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if base.chars().all(|c| c == '.') {
            base = "api".into();
        }
        let mut name = base.clone();
        let mut n = 2;
        while seen.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        seen.push(name.clone());
        l.name = name;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_values() {
        assert_eq!(
            "127.0.0.1:0".parse::<Listen>(),
            Ok(Listen::Addr(SocketAddr::from(([127, 0, 0, 1], 0))))
        );
        assert_eq!("systemd".parse::<Listen>(), Ok(Listen::Systemd(None)));
        assert_eq!(
            "systemd:http".parse::<Listen>(),
            Ok(Listen::Systemd(Some("http".into())))
        );
        assert_eq!("handover".parse::<Listen>(), Ok(Listen::HandOver));
        assert!("systemd:".parse::<Listen>().is_err());
        assert!("localhost".parse::<Listen>().is_err());
        for v in ["127.0.0.1:80", "systemd", "systemd:x", "handover"] {
            assert_eq!(v.parse::<Listen>().unwrap().to_string(), v);
        }
    }

    #[test]
    fn names_are_made_unique_and_valid() {
        let l = |name: &str| InheritedListener {
            name: name.into(),
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        };
        let mut ls = vec![l("unknown"), l("unknown"), l("a b"), l("")];
        unique_names(&mut ls);
        let names: Vec<_> = ls.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["unknown", "unknown-2", "a-b", "api"]);
    }
}
