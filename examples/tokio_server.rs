//! The example server on tokio + hyper (DESIGN section 6).
//!
//! `cargo run --release --example tokio_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use std::convert::Infallible;
use std::io::Write;

use lameduck_suite::{flags, logging, routes};
use lameduck_tokio::TokioRuntime;
use tower::ServiceBuilder;

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
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
    let code = runtime.block_on(run(flags));
    // Connections still open after a forced shutdown are not waited for.
    runtime.shutdown_background();
    std::process::exit(code);
}

async fn run(flags: flags::Flags) -> i32 {
    let mut builder = lameduck_tokio::builder(flags.config.clone());
    if let Some(d) = flags.pre_shutdown_hook_duration {
        let registered = builder.pre_shutdown_hook("demo-sleep", move || async move {
            tokio::time::sleep(d).await;
            Ok::<_, Infallible>(())
        });
        if let Err(e) = registered {
            eprintln!("error: {e}");
            return 1;
        }
    }
    let mut server = builder.prepare();
    let listener = match lameduck_tokio::bind(flags.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: failed to listen on {}: {e}", flags.listen);
            return 1;
        }
    };
    let service = ServiceBuilder::new()
        .layer(server.layer().long_running(routes::is_long_running))
        .service(routes::service(TokioRuntime));
    let addr = match server.serve("api", listener, service) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
    match server.run().await {
        Ok(code) => i32::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
