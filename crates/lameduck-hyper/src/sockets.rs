//! Listening sockets this process did not bind: inherited from systemd socket activation
//! ([`systemd::systemd_listeners`]) or received from a predecessor in a hand-over
//! ([`hand_over::receive_listeners`]). Both keep the socket alive across processes, so a
//! restart on one host refuses no connection: what arrives while no process accepts waits in
//! the socket's backlog.
//!
//! Such a socket is only ever closed in this process, never `shutdown(2)`: the copy systemd
//! (or a successor) holds keeps listening.

use std::net::TcpListener;
use std::os::fd::{AsFd, OwnedFd};

pub mod hand_over;
pub mod systemd;

/// A listening TCP socket this process inherited, with the name it was passed under
/// (`LISTEN_FDNAMES`, or the predecessor's listener name).
#[derive(Debug)]
pub struct InheritedListener {
    /// The socket's name (`unknown` when systemd was given none).
    pub name: String,
    /// The listening socket, in blocking mode as it came; the adapters' `from_std` make it
    /// non-blocking.
    pub listener: TcpListener,
}

/// Why a descriptor is not a listening TCP socket.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotListening {
    /// It is not a socket at all (a file, a pipe, a closed descriptor).
    #[error("not a socket")]
    NotASocket,
    /// A socket, but not a TCP stream socket over IPv4 or IPv6 (UDP, Unix, ...).
    #[error("not a TCP socket")]
    NotTcp,
    /// A TCP socket nobody called `listen(2)` on.
    #[error("a TCP socket that is not listening")]
    NotListening,
}

/// Checks that `fd` is a listening TCP socket and takes it as one.
pub(crate) fn listening_tcp(fd: OwnedFd) -> Result<TcpListener, NotListening> {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let socket_type = sockopt::socket_type(fd.as_fd()).map_err(|_| NotListening::NotASocket)?;
    let family = rustix::net::getsockname(fd.as_fd())
        .map(|addr| addr.address_family())
        .map_err(|_| NotListening::NotASocket)?;
    if socket_type != SocketType::STREAM
        || !(family == AddressFamily::INET || family == AddressFamily::INET6)
    {
        return Err(NotListening::NotTcp);
    }
    if !sockopt::socket_acceptconn(fd.as_fd()).unwrap_or(false) {
        return Err(NotListening::NotListening);
    }
    Ok(TcpListener::from(fd))
}
