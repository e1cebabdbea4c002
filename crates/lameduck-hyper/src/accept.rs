//! The accept loop of a [`Listener`]: accepts connections until the run loop says to stop
//! listening, serves each in a task of its own, and reports when the listener is closed and
//! when its last connection has ended.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{select, Either};
use hyper_util::server::conn::auto;

use crate::connection::{serve_connection, HttpService};
use crate::context::ListenerContext;
use crate::logging;
use crate::runtime::{Exec, Listener, Runtime};
use crate::tracker::ConnectionTracker;

/// How long an accept loop waits after an accept error (e.g. too many open files).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `service` on `listener` (HTTP/1.1 and HTTP/2 on one port) as the server task of
/// `ctx`.
pub(crate) async fn accept_loop<R, L, S>(ctx: ListenerContext<R>, mut listener: L, service: S)
where
    R: Runtime,
    L: Listener,
    S: HttpService,
{
    let runtime = ctx.runtime().clone();
    let mut builder = auto::Builder::new(Exec(runtime.clone()));
    // HTTP/1 gets a header timer per connection (`serve_connection`).
    builder.http2().timer(runtime.hyper_timer());
    let builder = Arc::new(builder);
    let connections = ConnectionTracker::new();
    if let Ok(addr) = listener.local_addr() {
        logging::serving_on(ctx.name(), addr);
    }
    ctx.report_serving();

    loop {
        let accepted = {
            let accept = pin!(listener.accept());
            let stop = pin!(ctx.stop_listening());
            match select(accept, stop).await {
                Either::Left((r, _)) => r,
                Either::Right(_) => break,
            }
        };
        match accepted {
            Ok((io, peer)) => {
                let guard = connections.open();
                let conn = serve_connection(
                    Arc::clone(&builder),
                    runtime.clone(),
                    io,
                    peer,
                    service.clone(),
                    Arc::clone(ctx.control()),
                );
                runtime.spawn(async move {
                    conn.await;
                    drop(guard);
                });
            }
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
    logging::stopped_listening(ctx.name(), addr);
    ctx.report_listener_stopped();
    connections.wait_zero().await;
    ctx.report_server_stopped();
}
