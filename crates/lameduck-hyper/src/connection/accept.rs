//! The accept loop of a [`Listener`]: accepts connections until the run loop says to stop
//! listening, serves each in a task of its own, and reports when the listener is closed and
//! when its last connection has ended.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{select, Either};
use http::Request;
use hyper::body::Incoming;

use crate::connection::context::ListenerContext;
use crate::connection::handshake::{handshake_then_serve, Alpn, Handshake};
use crate::connection::response_future::{started_at_call, BoxedRequest};
use crate::connection::tracker::ConnectionTracker;
use crate::connection::{serve_connection, HttpService, NewConnection};
use crate::logging;
use crate::request::layer::AdmissionLayer;
use crate::runtime::{Listener, Runtime};

/// How long an accept loop waits after an accept error (e.g. too many open files).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// The handshake of a listener without one (plain TCP); never run.
pub(crate) struct NoHandshake;

impl<I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static> Handshake<I> for NoHandshake {
    type Io = I;

    fn timeout(&self) -> Duration {
        Duration::MAX
    }

    async fn handshake(&self, io: I, _peer: std::net::SocketAddr) -> Option<(I, Option<Alpn>)> {
        Some((io, None))
    }

    fn timed_out(&self, _peer: std::net::SocketAddr) {}
}

/// Serves `service` on `listener` (HTTP/1.1 and HTTP/2 on one port) as the server task of
/// `ctx`; each connection goes through `handshake` first, if any, in its own task.
pub(crate) async fn accept_loop<R, L, S, H>(
    ctx: ListenerContext<R>,
    mut listener: L,
    service: S,
    admission: Arc<AdmissionLayer<R>>,
    handshake: Option<Arc<H>>,
) where
    R: Runtime,
    L: Listener,
    S: HttpService,
    H: Handshake<L::Io>,
{
    let runtime = ctx.runtime().clone();
    let connections = ConnectionTracker::new();
    if let Ok(addr) = listener.local_addr() {
        logging::serving_on(ctx.name(), addr);
    }
    ctx.report_serving();

    loop {
        let accepted = {
            let accept = pin!(listener.accept());
            let stop = pin!(ctx.stop_listening());
            let elsewhere = pin!(ctx.accepting_elsewhere());
            match select(accept, select(stop, elsewhere)).await {
                Either::Left((r, _)) => r,
                Either::Right(_) => break,
            }
        };
        match accepted {
            Ok((io, peer)) => match &handshake {
                None => {
                    let new = NewConnection {
                        io,
                        peer,
                        service: service.clone(),
                        control: Arc::clone(ctx.control()),
                        guard: connections.open(),
                        protocol: None,
                    };
                    // The request slot follows the handler's future (see `RequestSlot`).
                    if started_at_call::<S>() {
                        runtime.spawn(serve_connection::<_, _, _, BoxedRequest>(&admission, new));
                    } else {
                        runtime.spawn(serve_connection::<_, _, _, Request<Incoming>>(
                            &admission, new,
                        ));
                    }
                }
                Some(handshake) => runtime.spawn(handshake_then_serve(
                    Arc::clone(handshake),
                    Arc::clone(&admission),
                    io,
                    peer,
                    service.clone(),
                    Arc::clone(ctx.control()),
                    connections.open(),
                )),
            },
            Err(e) => {
                logging::accept_failed(ctx.name(), &e);
                let sleep = runtime.sleep_until(runtime.now() + ACCEPT_ERROR_BACKOFF);
                if let Either::Right(_) = select(pin!(sleep), pin!(ctx.stop_listening())).await {
                    break;
                }
            }
        }
    }
    let addr = listener.local_addr().ok();
    drop(listener);
    if !ctx.is_stopping() {
        // The socket lives on in another process, which accepts from now on: this process
        // serves its open connections until the lifecycle stops listening.
        logging::accepting_elsewhere(ctx.name(), addr);
        ctx.stop_listening().await;
    }
    logging::stopped_listening(ctx.name(), addr);
    ctx.report_listener_stopped();
    connections.wait_zero().await;
    ctx.report_server_stopped();
}
