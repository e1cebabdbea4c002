//! Counting heap allocations per served request: a global allocator that counts, a server
//! harness on a runtime of its own thread, and a client that allocates nothing per request.
//!
//! A test binary installs the allocator itself:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: lameduck_test_support::alloc::Counting = lameduck_test_support::alloc::Counting;
//! # fn main() {}
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The system allocator, counting every allocation and reallocation of the process.
pub struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

/// The allocations counted so far (none unless [`Counting`] is the global allocator).
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Sends `n` keep-alive `GET /` on `stream`, reading each whole response (its body is the two
/// bytes `ok`) into `buf`; allocates nothing itself.
pub fn keep_alive_gets(stream: &mut (impl Read + Write), n: usize, buf: &mut [u8]) {
    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    for _ in 0..n {
        stream.write_all(REQUEST).expect("send");
        stream.flush().expect("flush");
        let mut got = 0;
        loop {
            let read = stream.read(&mut buf[got..]).expect("read");
            assert!(read > 0, "the server closed the connection");
            got += read;
            if buf[..got].ends_with(b"\r\n\r\nok") {
                break;
            }
        }
    }
}

/// Runs `serve` (which reports its address and returns when the server is done) on a
/// current-thread tokio runtime in a thread of its own; the address and the thread.
pub fn in_thread<F, Fut>(serve: F) -> (SocketAddr, std::thread::JoinHandle<()>)
where
    F: FnOnce(mpsc::Sender<SocketAddr>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(serve(tx));
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the server started");
    (addr, thread)
}
