//! systemd socket activation (`sd_listen_fds(3)`): the sockets a socket unit passes as
//! descriptors 3 and up, described by `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES`.
//! The environment is checked here, so that each way it can be wrong is its own error;
//! `listenfd` takes the descriptors.

use std::net::TcpListener;

use super::{listening_tcp, InheritedListener, NotListening};

/// The most descriptors accepted from systemd (systemd itself passes a few).
const MAX_FDS: usize = 1024;

/// Why the sockets passed by systemd cannot be used. Nothing is served then: the process
/// reports it and exits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InheritError {
    /// `LISTEN_FDS` is not set: the process was not started by socket activation.
    #[error(
        "no sockets were passed: LISTEN_FDS is not set (start the service from a systemd \
         socket unit, or through systemd-socket-activate)"
    )]
    NotActivated,
    /// `LISTEN_PID` names another process: the sockets were meant for it (the variables
    /// leaked through a `fork`/`exec` of the process systemd started).
    #[error("LISTEN_PID is {listen_pid:?}, not this process ({pid}): the sockets are not ours")]
    OtherProcess {
        /// `LISTEN_PID` as set.
        listen_pid: String,
        /// This process's id.
        pid: u32,
    },
    /// `LISTEN_FDS` is not a number of descriptors.
    #[error("LISTEN_FDS is {0:?}, not a number of descriptors from 1 to {MAX_FDS}")]
    InvalidCount(String),
    /// `LISTEN_FDNAMES` does not name every descriptor.
    #[error("LISTEN_FDNAMES has {names} names for {fds} descriptors")]
    NameCount {
        /// How many names.
        names: usize,
        /// How many descriptors.
        fds: usize,
    },
    /// A passed descriptor is not a listening TCP socket.
    #[error("inherited descriptor {fd} ({name}) is {reason}; expected a listening TCP socket")]
    NotListeningTcp {
        /// The descriptor number.
        fd: i32,
        /// Its name.
        name: String,
        /// What it is instead.
        reason: NotListening,
    },
    /// No passed socket has the name asked for.
    #[error("no inherited socket is named {wanted:?} (LISTEN_FDNAMES: {names:?})")]
    NoSuchName {
        /// The name asked for.
        wanted: String,
        /// The names passed.
        names: Vec<String>,
    },
}

/// What the socket-activation variables say, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    /// One name per descriptor, in order (descriptor 3 first).
    pub names: Vec<String>,
}

/// Checks the socket-activation variables as read from the environment (`None`: unset)
/// for the process `pid`. A `LISTEN_PID` that is unset or empty is accepted, as `listenfd`
/// does (development tools such as `systemfd` set none).
///
/// ```
/// use lameduck_hyper::sockets::systemd::{parse_activation, InheritError};
///
/// let ok = parse_activation(Some("42"), Some("2"), Some("http:admin"), 42)?;
/// assert_eq!(ok.names, ["http", "admin"]);
/// assert!(matches!(
///     parse_activation(Some("7"), Some("1"), None, 42),
///     Err(InheritError::OtherProcess { .. })
/// ));
/// assert_eq!(
///     parse_activation(Some("42"), Some("abc"), None, 42),
///     Err(InheritError::InvalidCount("abc".into()))
/// );
/// # Ok::<(), InheritError>(())
/// ```
pub fn parse_activation(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    listen_fdnames: Option<&str>,
    pid: u32,
) -> Result<Activation, InheritError> {
    let count = listen_fds.ok_or(InheritError::NotActivated)?;
    match listen_pid {
        None | Some("") => {}
        Some(p) if p.trim().parse::<u32>() == Ok(pid) => {}
        Some(p) => {
            return Err(InheritError::OtherProcess {
                listen_pid: p.to_string(),
                pid,
            })
        }
    }
    let fds = match count.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_FDS).contains(&n) => n,
        _ => return Err(InheritError::InvalidCount(count.to_string())),
    };
    let names: Vec<String> = match listen_fdnames {
        None | Some("") => vec!["unknown".to_string(); fds],
        Some(list) => list.split(':').map(str::to_string).collect(),
    };
    if names.len() != fds {
        return Err(InheritError::NameCount {
            names: names.len(),
            fds,
        });
    }
    Ok(Activation { names })
}

/// Takes the listening sockets systemd passed to this process, every one when `name` is
/// `None`, else those named `name`. Call it once, early, before other threads start: the
/// variables are removed from the environment so that child processes do not take them.
pub fn systemd_listeners(name: Option<&str>) -> Result<Vec<InheritedListener>, InheritError> {
    let var = |key| std::env::var(key).ok();
    let activation = parse_activation(
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
        std::process::id(),
    )?;
    let mut fds = listenfd::ListenFd::from_env();
    std::env::remove_var("LISTEN_FDNAMES");
    let mut listeners = Vec::new();
    for (index, fd_name) in activation.names.iter().enumerate() {
        if name.is_some_and(|wanted| wanted != fd_name) {
            continue;
        }
        let listener = take(&mut fds, index).map_err(|reason| InheritError::NotListeningTcp {
            fd: 3 + index as i32,
            name: fd_name.clone(),
            reason,
        })?;
        listeners.push(InheritedListener {
            name: fd_name.clone(),
            listener,
        });
    }
    match name {
        Some(wanted) if listeners.is_empty() => Err(InheritError::NoSuchName {
            wanted: wanted.to_string(),
            names: activation.names,
        }),
        _ => Ok(listeners),
    }
}

/// Takes descriptor `index` as a listening TCP socket, or says what it is instead.
fn take(fds: &mut listenfd::ListenFd, index: usize) -> Result<TcpListener, NotListening> {
    match fds.take_tcp_listener(index) {
        Ok(Some(listener)) => listening_tcp(listener.into()),
        // Taken already, or not passed: not a socket of ours.
        Ok(None) => Err(NotListening::NotASocket),
        // Not a TCP stream socket: tell a socket of another kind from no socket at all.
        Err(_) => {
            let other_socket = matches!(fds.take_udp_socket(index), Ok(Some(_)))
                || matches!(fds.take_unix_listener(index), Ok(Some(_)));
            Err(if other_socket {
                NotListening::NotTcp
            } else {
                NotListening::NotASocket
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_the_variables_can_be_wrong_is_its_own_error() {
        assert_eq!(
            parse_activation(None, None, None, 1),
            Err(InheritError::NotActivated)
        );
        assert_eq!(
            parse_activation(Some("1"), None, None, 1),
            Err(InheritError::NotActivated)
        );
        for bad in ["abc", "-1", "0", "", "1.5", "99999"] {
            assert_eq!(
                parse_activation(Some("1"), Some(bad), None, 1),
                Err(InheritError::InvalidCount(bad.to_string())),
                "{bad}"
            );
        }
        for other in ["2", "x"] {
            assert!(matches!(
                parse_activation(Some(other), Some("1"), None, 1),
                Err(InheritError::OtherProcess { .. })
            ));
        }
        assert_eq!(
            parse_activation(Some("1"), Some("2"), Some("http"), 1),
            Err(InheritError::NameCount { names: 1, fds: 2 })
        );
    }

    #[test]
    fn names_default_to_unknown_and_pid_may_be_unset() {
        let a = parse_activation(None, Some("2"), None, 9).unwrap();
        assert_eq!(a.names, ["unknown", "unknown"]);
        let a = parse_activation(Some(""), Some("1"), Some("web"), 9).unwrap();
        assert_eq!(a.names, ["web"]);
    }

    #[test]
    fn errors_name_the_variable_and_the_value() {
        let e = InheritError::OtherProcess {
            listen_pid: "7".into(),
            pid: 42,
        };
        assert!(e.to_string().contains("LISTEN_PID is \"7\""), "{e}");
        let e = InheritError::InvalidCount("abc".into());
        assert!(e.to_string().contains("LISTEN_FDS is \"abc\""), "{e}");
        let e = InheritError::NotListeningTcp {
            fd: 3,
            name: "http".into(),
            reason: NotListening::NotTcp,
        };
        assert_eq!(
            e.to_string(),
            "inherited descriptor 3 (http) is not a TCP socket; expected a listening TCP socket"
        );
    }
}
