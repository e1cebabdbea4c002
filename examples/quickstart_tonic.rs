use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init(); // lameduck logs each step of the termination
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:50051".into());
    let config = lameduck::Config::builder()
        .shutdown_delay(Duration::from_secs(5)) // NOT_SERVING, still serving, for 5 s
        .shutdown_watch_termination_grace_period(Duration::from_secs(10)) // for streams
        .build()?;
    let mut server = lameduck_tokio::builder(config).prepare();
    let (reporter, health) = tonic_health::server::health_reporter();
    // Add your services here: `.add_service(GreeterServer::new(MyGreeter))`.
    let routes = tonic::service::Routes::new(health);
    let listener = lameduck_tokio::bind(addr.parse()?).await?;
    let addr = lameduck_tonic::Grpc::new()
        .streaming("/helloworld.Greeter/SayHellos") // server-streaming or bidi: long-running
        .health(reporter, ["helloworld.Greeter"]) // NOT_SERVING from the signal on
        .serve(&mut server, "grpc", listener, routes)?;
    tracing::info!("listening on http://{addr}");
    std::process::exit(server.run().await?.into()); // 0 after a graceful termination
}
