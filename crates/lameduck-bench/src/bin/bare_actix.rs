//! The bare baseline for actix-web: the routes of `examples/actix_server.rs` (`/`, `/sleep`,
//! `/watch`) in an `App` without lameduck's middleware and health routes, and with
//! actix-web's defaults otherwise: its own SIGTERM/SIGINT handling (graceful stop, 30 s
//! shutdown timeout), default worker count (one per physical core; 2 here, as the example's
//! default). HTTP/1.1 and h2c on one port (`listen_auto_h2c`), as in the example.
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`), `--workers N`.

use actix_web::{web, App, HttpServer};
use lameduck_bench::args::Args;
use lameduck_examples::logging;
use lameduck_examples_actix::actix_routes;

fn main() -> std::io::Result<()> {
    let args = Args::from_env(&[]);
    logging::init();
    let listen = args.listen();
    let workers: Option<usize> = args.value("--workers").map(|_| args.get("--workers", 2));
    actix_web::rt::System::new().block_on(async move {
        let listener = std::net::TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let mut http = HttpServer::new(|| {
            App::new()
                .route("/", web::get().to(actix_routes::index))
                .route("/sleep", web::get().to(actix_routes::sleep))
                .route("/watch", web::get().to(actix_routes::watch))
        });
        if let Some(n) = workers {
            http = http.workers(n);
        }
        let server = http.listen_auto_h2c(listener)?.run();
        lameduck_bench::announce(addr);
        server.await
    })
}
