//! Connections that need a handshake before they speak HTTP (TLS): the seam an adapter
//! implements ([`Handshake`]), and the connection task that runs it.
//!
//! The handshake runs in the connection's own task, never in the accept loop, so a client
//! that sends nothing delays no other client. It is bounded by [`Handshake::timeout`] and
//! counted as a connection from accept on: a termination waits for it as for any connection.
//! A handshake still running when the server stops gets at most
//! [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) more, as a plaintext
//! connection that has carried no request does, not the whole handshake timeout: one that
//! completes by then has its connection shut down gracefully (HTTP/2 GOAWAY when ALPN chose
//! `h2`; closed before its first request otherwise), one that does not is closed and
//! counted ([`CutKind::TlsHandshake`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{select, Either};
use http::Request;
use hyper::body::Incoming;
use lameduck::connection::{CutKind, SILENT_PEER_TIMEOUT};
use lameduck::LifecycleSignal;

use crate::connection::context::ServeControl;
use crate::connection::preface::Protocol;
use crate::connection::response_future::{started_at_call, BoxedRequest};
use crate::connection::tracker::ConnectionGuard;
use crate::connection::{serve_connection, HttpService, NewConnection};
use crate::request::layer::AdmissionLayer;
use crate::runtime::Runtime;

/// The protocol a client chose during the handshake (TLS ALPN): what the connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// `h2`: HTTP/2.
    Http2,
    /// `http/1.1`: HTTP/1.1.
    Http1,
}

impl Alpn {
    /// The protocol an ALPN identifier names (`h2`, `http/1.1`); `None` for none or another.
    #[must_use]
    pub fn from_id(id: Option<&[u8]>) -> Option<Alpn> {
        match id? {
            b"h2" => Some(Alpn::Http2),
            b"http/1.1" => Some(Alpn::Http1),
            _ => None,
        }
    }
}

/// A handshake every connection of a listener goes through before HTTP, for
/// [`Server::serve_tls`](crate::Server::serve_tls): TLS (the tokio and smol adapters'
/// `TlsAcceptor`), or anything else that turns an accepted connection into the I/O HTTP is
/// read from.
pub trait Handshake<I>: Send + Sync + 'static {
    /// The connection once the handshake is done.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// How long a handshake may take, from accept on; at the bound the connection is closed
    /// and [`Handshake::timed_out`] reports it.
    fn timeout(&self) -> Duration;

    /// Runs the handshake on `io`, accepted from `peer`: the connection and the protocol it
    /// speaks (`None`: not said, told by its first bytes), or `None` when it failed, which
    /// the handshake has reported itself.
    fn handshake(
        &self,
        io: I,
        peer: SocketAddr,
    ) -> impl Future<Output = Option<(Self::Io, Option<Alpn>)>> + Send;

    /// Reports a handshake cut at [`Handshake::timeout`].
    fn timed_out(&self, peer: SocketAddr);
}

/// The task of one connection with a handshake: the handshake, bounded, then HTTP.
pub(crate) async fn handshake_then_serve<R, I, H, S>(
    handshake: Arc<H>,
    admission: Arc<AdmissionLayer<R>>,
    io: I,
    peer: SocketAddr,
    service: S,
    control: Arc<ServeControl>,
    guard: ConnectionGuard,
) where
    R: Runtime,
    I: Send + 'static,
    H: Handshake<I>,
    S: HttpService,
{
    let runtime = admission.runtime.clone();
    let deadline = runtime.now() + handshake.timeout();
    let done = {
        let shake = pin!(handshake.handshake(io, peer));
        let timeout = pin!(runtime.sleep_until(deadline));
        let stop = pin!(async {
            control.stop.wait().await;
            runtime
                .sleep_until(runtime.now() + SILENT_PEER_TIMEOUT)
                .await;
        });
        match select(shake, select(timeout, stop)).await {
            Either::Left((done, _)) => done,
            Either::Right((Either::Left(_), _)) => {
                handshake.timed_out(peer);
                None
            }
            Either::Right((Either::Right(_), _)) => {
                admission
                    .shared
                    .counters()
                    .count_connection_cut(CutKind::TlsHandshake);
                None
            }
        }
    };
    let Some((io, alpn)) = done else {
        let shared = &admission.shared;
        if shared.has_fired(LifecycleSignal::ShutdownInitiated) {
            shared
                .counters()
                .note_connection_closed(admission.clock.instant(runtime.now()));
        }
        return;
    };
    // HTTP/2 is served as such at once. HTTP/1.1 (or no ALPN) goes through the first-bytes
    // path of a plaintext connection: hyper's HTTP/1 connection then reads through the same
    // I/O, whose first read is the small one that tells the protocol (served directly from
    // its first read, hyper allocates a new read buffer for every request over TLS).
    let protocol = match alpn {
        Some(Alpn::Http2) => Some(Protocol::Http2),
        Some(Alpn::Http1) | None => None,
    };
    let new = NewConnection {
        io,
        peer,
        service,
        control,
        guard,
        protocol,
    };
    // The request slot follows the handler's future (see `RequestSlot`).
    if started_at_call::<S>() {
        serve_connection::<_, _, _, BoxedRequest>(&admission, new).await;
    } else {
        serve_connection::<_, _, _, Request<Incoming>>(&admission, new).await;
    }
}
