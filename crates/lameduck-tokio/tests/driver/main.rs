//! The tokio driver and admission layer under tokio's paused clock: every duration here is
//! virtual, so the tests are exact and instant. One module per behaviour; this file holds
//! the servers they start.

use std::io;
use std::net::SocketAddr;

use hyper_util::rt::TokioIo;
use lameduck::Config;
use lameduck_hyper::Listener;
use lameduck_tokio::{AdmissionLayer, Builder, Handle, HttpService, Server, TokioRuntime};
use tokio::io::DuplexStream;

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod connections;
mod hooks;
mod long_running;
mod request_timeout;
mod signals;
mod websocket;

/// A listener that never accepts: the driver's own behaviour, without sockets.
struct IdleListener;

impl Listener for IdleListener {
    type Io = TokioIo<DuplexStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        std::future::pending().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(([127, 0, 0, 1], 1).into())
    }
}

/// The default configuration changed by `f`.
fn config(f: impl FnOnce(lameduck::ConfigBuilder) -> lameduck::ConfigBuilder) -> Config {
    f(Config::builder()).build().unwrap()
}

/// A prepared server with one listener, "api", and what a test keeps of it once `run`
/// consumes it: its handle and its admission layer.
struct PreparedServer {
    server: Server<TokioRuntime>,
    handle: Handle,
    layer: AdmissionLayer<TokioRuntime>,
}

/// A server whose `run` is spawned: its handle, its admission layer, and the task that
/// returns its exit code.
struct RunningServer {
    handle: Handle,
    layer: AdmissionLayer<TokioRuntime>,
    run: support::Run,
}

impl PreparedServer {
    /// Spawns the server's `run`.
    fn start(self) -> RunningServer {
        RunningServer {
            handle: self.handle,
            layer: self.layer,
            run: tokio::spawn(self.server.run()),
        }
    }
}

/// Prepares the server `builder` configured, serving `service` on `listener` as "api".
fn serve_api(
    builder: Builder<TokioRuntime>,
    listener: impl Listener,
    service: impl HttpService,
) -> PreparedServer {
    let mut server = builder.prepare();
    let layer = server.admission_layer();
    server.serve("api", listener, service).unwrap();
    let handle = server.handle();
    PreparedServer {
        server,
        handle,
        layer,
    }
}

/// Prepares the server `builder` configured, serving "api" on an [`IdleListener`]: the
/// lifecycle without connections.
fn serve_idle_api(builder: Builder<TokioRuntime>) -> PreparedServer {
    serve_api(builder, IdleListener, support::service("ok"))
}
