//! What every example server does around its routes: register the demo hooks, open the
//! sockets (bound, inherited from systemd or handed over), serve, print a `listening on` line
//! per socket, run, and turn every error into exit 1 with a message.

use std::convert::Infallible;
use std::io::{self, Write};

use std::net::SocketAddr;

use lameduck_hyper::sockets::hand_over::{HandOver, Predecessor};
use lameduck_hyper::sockets::InheritedListener;
use lameduck_hyper::{Builder, Handshake, HttpService, Listener, Runtime, Server};

use crate::flags::Flags;
use crate::listen::{self, Sockets};

/// A builder for `flags`, with the demo post-start hook when `--post-start-hook-duration` is
/// given, the demo pre-shutdown hook when `--pre-shutdown-hook-duration` is given and the
/// demo destroy hook when `--destroy-hook-duration` is given.
pub fn builder<R: Runtime>(flags: &Flags, runtime: R) -> Result<Builder<R>, String> {
    let mut builder = Builder::new(flags.config.clone(), runtime.clone());
    if let Some(d) = flags.post_start_hook_duration {
        let runtime = runtime.clone();
        builder
            .post_start_hook("demo-warm-up", move || async move {
                runtime
                    .sleep_until(crate::routes::deadline_after(runtime.now(), d))
                    .await;
                Ok::<_, Infallible>(())
            })
            .map_err(|e| e.to_string())?;
    }
    if let Some(d) = flags.pre_shutdown_hook_duration {
        let runtime = runtime.clone();
        builder
            .pre_shutdown_hook("demo-sleep", move || async move {
                runtime
                    .sleep_until(crate::routes::deadline_after(runtime.now(), d))
                    .await;
                Ok::<_, Infallible>(())
            })
            .map_err(|e| e.to_string())?;
    }
    if let Some(d) = flags.destroy_hook_duration {
        builder
            .destroy_hook("demo-destroy", move || async move {
                runtime
                    .sleep_until(crate::routes::deadline_after(runtime.now(), d))
                    .await;
                Ok::<_, Infallible>(())
            })
            .map_err(|e| e.to_string())?;
    }
    Ok(builder)
}

/// Opens the sockets `--listen` names (a successor waits here for its predecessor's); on
/// failure prints the error and exits 1. Call it before the runtime starts.
#[must_use]
pub fn open_sockets_or_exit(flags: &Flags) -> Sockets {
    let hand_over = flags
        .handover_socket
        .as_ref()
        .map(|path| (path, flags.handover_timeout));
    match listen::open(&flags.listen, hand_over) {
        Ok(sockets) => sockets,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Hands over to `--handover-socket` on SIGUSR2, reports to `predecessor` once up, and tells
/// the lifecycle when the sockets outlive this process (systemd's).
pub fn configure_sockets<R: Runtime>(
    flags: &Flags,
    server: &mut Server<R>,
    predecessor: Option<Predecessor>,
    outlive: bool,
) {
    if let Some(path) = &flags.handover_socket {
        server.hand_over_to(HandOver::new(path, flags.handover_timeout));
    }
    if let Some(predecessor) = predecessor {
        server.report_up_to(predecessor);
    }
    if outlive {
        server.sockets_outlive_process();
    }
}

/// Prints a `listening on SCHEME://ADDR` line per address (`scheme` is `http` or `https`)
/// and runs the lifecycle; returns the exit code.
pub async fn announce_and_run<R: Runtime>(
    server: Server<R>,
    scheme: &str,
    addrs: &[SocketAddr],
) -> i32 {
    for addr in addrs {
        println!("listening on {scheme}://{addr}");
    }
    let _ = io::stdout().flush();
    match server.run().await {
        Ok(code) => i32::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// Runs a hyper-based example server on `runtime`: `sockets` are the opened sockets,
/// `adopt` makes each a listener of the runtime, `tls` is the handshake of every connection
/// (`None`: plaintext), `service` builds the routes (wrapped in the admission layer) from the
/// prepared server. Returns the process exit code.
pub async fn run<R, L, H, S>(
    flags: &Flags,
    runtime: R,
    sockets: Sockets,
    adopt: impl Fn(std::net::TcpListener) -> io::Result<L>,
    tls: Option<H>,
    service: impl FnOnce(&mut Server<R>) -> S,
) -> i32
where
    R: Runtime,
    L: Listener,
    H: Handshake<L::Io> + Clone,
    S: HttpService,
{
    let mut server = match builder(flags, runtime) {
        Ok(b) => b.prepare(),
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let service = service(&mut server);
    let mut addrs = Vec::new();
    for InheritedListener { name, listener } in sockets.listeners {
        let served = adopt(listener)
            .map_err(|e| format!("cannot serve the {name} socket: {e}"))
            .and_then(|l| {
                match &tls {
                    None => server.serve(&name, l, service.clone()),
                    Some(tls) => server.serve_tls(&name, l, tls.clone(), service.clone()),
                }
                .map_err(|e| e.to_string())
            });
        match served {
            Ok(addr) => addrs.push(addr),
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        }
    }
    configure_sockets(flags, &mut server, sockets.predecessor, sockets.outlive);
    let scheme = if tls.is_some() { "https" } else { "http" };
    announce_and_run(server, scheme, &addrs).await
}

/// Runs `main` on a multi-threaded tokio runtime and exits the process with its code.
pub fn exit_with_tokio<F: std::future::Future<Output = i32>>(main: impl FnOnce() -> F) -> ! {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(main());
    // Connections still open after a forced shutdown are not waited for.
    runtime.shutdown_background();
    std::process::exit(code);
}
