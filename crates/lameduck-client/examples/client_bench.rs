//! The cost of lameduck-client's layer on a call that needs no retry (`scripts/bench-client.py`):
//! hyper-util's client, keep-alive `GET` of `--target` one call after the other on one
//! connection, with the layer (`--layer`) or without it, on a current-thread runtime.
//!
//! It sends `--warmup` calls, prints `ready` and waits for a line on stdin (the script zeroes
//! callgrind's counters then), sends `--requests` calls, prints `done ALLOCS` (the heap
//! allocations of those calls, counted by its global allocator) and waits for a line again
//! (the script dumps the counters), then exits 0. Every call must answer 200.
//!
//! `cargo run --release -p lameduck-client --example client_bench -- --target http://127.0.0.1:8080/ --requests 5000 --layer`

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::BufRead;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lameduck_client::RetryLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

/// The system allocator, counting allocations and reallocations.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `n` calls of `GET uri` through `service`; exits 2 on a failed call.
async fn calls<S>(service: &mut S, uri: &http::Uri, n: usize)
where
    S: Service<http::Request<Empty<Bytes>>, Response = http::Response<hyper::body::Incoming>>,
    S::Error: std::fmt::Display,
{
    for _ in 0..n {
        let request = http::Request::get(uri.clone()).body(Empty::new());
        let Ok(request) = request else {
            std::process::exit(2);
        };
        let result = match service.ready().await {
            Ok(s) => s.call(request).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(r) if r.status() == 200 => {
                if r.into_body().collect().await.is_err() {
                    eprintln!("error: a body failed");
                    std::process::exit(2);
                }
            }
            Ok(r) => {
                eprintln!("error: status {}", r.status());
                std::process::exit(2);
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
}

fn wait_for_line() {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

fn main() {
    let mut target = None;
    let (mut requests, mut warmup, mut layer) = (5000usize, 500usize, false);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse().ok());
        match flag.as_str() {
            "--target" => target = it.next(),
            "--requests" => requests = number(it.next()).unwrap_or(requests),
            "--warmup" => warmup = number(it.next()).unwrap_or(warmup),
            "--layer" => layer = true,
            other => {
                eprintln!("error: unknown flag {other}");
                std::process::exit(2);
            }
        }
    }
    let Some(uri) = target.and_then(|t| t.parse::<http::Uri>().ok()) else {
        eprintln!("error: --target URL is needed");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        std::process::exit(2);
    };
    runtime.block_on(async move {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let layer = layer.then(RetryLayer::default);
        let mut service = ServiceBuilder::new().option_layer(layer).service(client);
        calls(&mut service, &uri, warmup).await;
        println!("ready");
        wait_for_line();
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        calls(&mut service, &uri, requests).await;
        let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
        println!("done {allocations}");
        wait_for_line();
    });
}
