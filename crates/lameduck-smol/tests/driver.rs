//! The smol driver on real async-io timers (the core's decisions are covered with a
//! simulated clock in the core's own tests; here only the wiring is checked, with generous
//! bounds), under `smol::block_on` and under a multi-threaded executor.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use lameduck::{Config, LifecycleSignal};
use tower::service_fn;

type Req = Request<hyper::body::Incoming>;

async fn hello(_req: Req) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

#[test]
fn block_on_runs_the_whole_sequence_with_the_delay() {
    smol::block_on(async {
        let config = Config::builder()
            .shutdown_delay(Duration::from_millis(150))
            .build()
            .unwrap();
        let mut b = lameduck_smol::builder(config);
        b.without_os_signals();
        let mut server = b.prepare();
        let listener = lameduck_smol::bind(([127, 0, 0, 1], 0).into())
            .await
            .unwrap();
        server.serve("api", listener, service_fn(hello)).unwrap();
        let handle = server.handle();
        let run = smol::spawn(server.run());
        smol::Timer::after(Duration::from_millis(20)).await;
        let asked = Instant::now();
        handle.request_shutdown();
        assert_eq!(run.await.unwrap(), 0);
        assert!(asked.elapsed() >= Duration::from_millis(150));
        assert!(asked.elapsed() < Duration::from_secs(10));
        let shared = handle.shared();
        let delay = shared
            .fired_at(LifecycleSignal::AfterShutdownDelayDuration)
            .unwrap()
            - shared.fired_at(LifecycleSignal::ShutdownInitiated).unwrap();
        assert!(delay >= Duration::from_millis(150), "{delay:?}");
    });
}

#[test]
fn a_multi_threaded_executor_serves_requests_and_a_failed_hook_exits_1() {
    let executor = Arc::new(async_executor::Executor::new());
    // Two worker threads besides this one; they end on their own after a bounded time.
    for _ in 0..2 {
        let ex = Arc::clone(&executor);
        std::thread::spawn(move || {
            smol::block_on(ex.run(smol::Timer::after(Duration::from_secs(30))))
        });
    }
    let code = smol::block_on(executor.run(async {
        let mut b = lameduck_smol::builder_on(Config::default(), Arc::clone(&executor));
        b.without_os_signals();
        b.pre_shutdown_hook("fails", || async { Err::<(), _>("on purpose") })
            .unwrap();
        let mut server = b.prepare();
        let listener = lameduck_smol::bind(([127, 0, 0, 1], 0).into())
            .await
            .unwrap();
        let addr = server.serve("api", listener, service_fn(hello)).unwrap();
        let handle = server.handle();
        let run = executor.spawn(server.run());
        // A real request over loopback, served by the executor's threads.
        let mut stream = async_net::TcpStream::connect(addr).await.unwrap();
        use futures_lite::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("hello"), "{response}");
        handle.request_shutdown();
        run.await.unwrap()
    }));
    assert_eq!(
        code, 1,
        "a failed pre-shutdown hook exits 1 after the drain"
    );
}
