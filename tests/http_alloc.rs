//! Heap allocations per served request: a server with lameduck must allocate no more per
//! keep-alive `GET /` than the same hyper server without it.
//!
//! A counting global allocator counts every allocation of this process. Each server runs
//! in-process on a current-thread tokio runtime of its own thread; the client is a blocking
//! socket that sends pre-built requests and reads into a reused buffer, so it allocates
//! nothing per request. After a warm-up, the allocations of a fixed number of requests are
//! counted for the bare server (the control: the counter sees hyper's own allocations) and
//! for the lameduck server, and their difference per request must be zero.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use lameduck_test_support::alloc::{allocations, in_thread, keep_alive_gets, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: usize = 500;
const REQUESTS: usize = 4_000;

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

/// Allocations per request (of `REQUESTS`, after the warm-up) of the server at `addr`.
fn allocations_per_request(addr: SocketAddr) -> f64 {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut buf = vec![0u8; 4096];
    keep_alive_gets(&mut stream, WARM_UP, &mut buf);
    let before = allocations();
    keep_alive_gets(&mut stream, REQUESTS, &mut buf);
    let after = allocations();
    (after - before) as f64 / REQUESTS as f64
}

fn bare() -> f64 {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, thread) = in_thread(|tx| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        tx.send(listener.local_addr().unwrap()).unwrap();
        let builder =
            hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
        let service = hyper_util::service::TowerToHyperService::new(tower::service_fn(hello));
        let (stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        let conn =
            builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service);
        tokio::select! {
            _ = conn => {}
            _ = stop_rx => {}
        }
    });
    let per_request = allocations_per_request(addr);
    let _ = stop_tx.send(());
    thread.join().expect("bare server");
    per_request
}

fn with_lameduck() -> f64 {
    let (handle_tx, handle_rx) = mpsc::channel();
    let (addr, thread) = in_thread(|tx| async move {
        let mut builder = lameduck_tokio::builder(lameduck::Config::default());
        builder.without_os_signals();
        let mut server = builder.prepare();
        let listener = lameduck_tokio::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server
            .serve("api", listener, tower::service_fn(hello))
            .unwrap();
        handle_tx.send(server.handle()).unwrap();
        tx.send(addr).unwrap();
        assert_eq!(server.run().await.unwrap(), 0);
    });
    let handle = handle_rx.recv().expect("handle");
    let per_request = allocations_per_request(addr);
    handle.request_shutdown();
    thread.join().expect("lameduck server");
    per_request
}

#[test]
fn lameduck_adds_no_heap_allocation_per_request() {
    let bare = bare();
    let lameduck = with_lameduck();
    eprintln!("heap allocations per keep-alive GET /: bare {bare:.3}, with lameduck {lameduck:.3}");
    // The control: the counter sees the allocations of a served request.
    assert!(
        bare > 0.5,
        "the counter saw {bare} allocations per request of the bare server"
    );
    assert!(
        lameduck - bare < 0.01,
        "lameduck adds {:.3} heap allocations per request (bare {bare:.3}, with lameduck {lameduck:.3})",
        lameduck - bare
    );
}
