use std::time::Duration;

use actix_web::{web, App};

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5)) // /readyz red, still serving, for 5 s
        .build()?;
    let mut server = lameduck_actix::builder(config).prepare();
    // Admits every request, and answers /readyz, /livez and /healthz itself.
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    // HTTP/1 and h2c; its HTTP/2 connections get GOAWAY (actix-web's `HttpServer` works too).
    let http = lameduck_actix::AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(|| async { "hello\n" }))
    });
    // lameduck configures it (actix's own signal handling off, actix's shutdown timeout above
    // every lameduck bound, connections counted), binds it with this closure, runs it and
    // stops it at the right moment.
    lameduck_actix::serve(&mut server, "api", http, |http| http.workers(2).bind(&addr))?;
    tracing::info!("listening on http://{addr}");
    std::process::exit(server.run().await?.into()); // 0 after a graceful termination
}
