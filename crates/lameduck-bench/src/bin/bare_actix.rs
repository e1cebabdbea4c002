//! The bare baseline for actix-web: the routes of `examples/actix_server.rs` (`/`, `/sleep`,
//! `/watch`) in an `App` without lameduck's middleware and health routes, and with
//! actix-web's defaults otherwise: its own SIGTERM/SIGINT handling (graceful stop, 30 s
//! shutdown timeout), default worker count (one per physical core; 2 here, as the example's
//! default). HTTP/1.1 and h2c on one port (`listen_auto_h2c`), as in the example.
//!
//! Flags: `--listen ADDR` (default `127.0.0.1:0`), `--workers N`.

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::StreamExt;
use lameduck_bench::args::Args;
use lameduck_suite::{logging, routes};
use lameduck_tokio::TokioRuntime;

async fn index() -> &'static str {
    "ok"
}

async fn sleep(req: HttpRequest) -> HttpResponse {
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    match routes::sleep_duration(query) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            HttpResponse::Ok().body("Welcome HTTP Server")
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

async fn watch() -> HttpResponse {
    let lines = routes::watch_lines(TokioRuntime, None).map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .streaming(lines)
}

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
                .route("/", web::get().to(index))
                .route("/sleep", web::get().to(sleep))
                .route("/watch", web::get().to(watch))
        });
        if let Some(n) = workers {
            http = http.workers(n);
        }
        let server = http.listen_auto_h2c(listener)?.run();
        lameduck_bench::announce(addr);
        server.await
    })
}
