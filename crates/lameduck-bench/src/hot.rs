//! The admission hot-path variants compared by `benches/hot_path.rs` and counted for heap
//! allocations by `src/bin/bench_alloc.rs`: one "admit and release one request" each.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::task::noop_waker_ref;
use lameduck::gate::Gate;
use lameduck::{Admission, Config, Lifecycle, RequestClass, Shared};
use tokio_util::task::TaskTracker;

/// Keeps a hammered word off the cache line of anything else the threads touch.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

/// The floor: `fetch_add(1, Relaxed)` then `fetch_sub(1, AcqRel)`, both results kept (the
/// gate branches on both), as in `crates/lameduck/benches/gate.rs`.
#[inline(always)]
pub fn bare_pair(word: &AtomicUsize) {
    let word = black_box(word);
    black_box(word.fetch_add(1, Ordering::Relaxed));
    black_box(word.fetch_sub(1, Ordering::AcqRel));
}

/// lameduck's gate, borrowed ticket: `Gate::admit_normal`, drop the ticket.
#[inline(always)]
pub fn lameduck_borrowed(gate: &Gate) {
    let ticket = black_box(gate).admit_normal();
    drop(black_box(ticket));
}

/// lameduck's owned admission, what the HTTP adapters do per request:
/// `Shared::admit(RequestClass::Normal)` (also clones and drops the `Arc<Shared>`).
#[inline(always)]
pub fn lameduck_owned(shared: &Arc<Shared>) {
    let admission = black_box(shared).admit(RequestClass::Normal);
    debug_assert!(matches!(admission, Admission::Normal(_)));
    drop(black_box(admission));
}

/// tokio-util: `TaskTracker::token`, drop the token.
#[inline(always)]
pub fn tokio_util_token(tracker: &TaskTracker) {
    let token = black_box(tracker).token();
    drop(black_box(token));
}

/// tokio-util: `TaskTracker::track_future` on a ready future, polled once, dropped (what
/// `tracker.spawn` adds around a task, without the spawn).
#[inline(always)]
pub fn tokio_util_track_ready(tracker: &TaskTracker) {
    let mut cx = Context::from_waker(noop_waker_ref());
    let fut = pin!(black_box(tracker).track_future(std::future::ready(())));
    let _ = black_box(fut.poll(&mut cx));
}

/// hyper-util's graceful shutdown, the public part: `GracefulShutdown::watcher()` (a
/// `watch::Sender::subscribe`), dropped.
#[inline(always)]
pub fn hyper_util_watcher(graceful: &hyper_util::server::graceful::GracefulShutdown) {
    drop(black_box(black_box(graceful).watcher()));
}

/// hyper-util's `GracefulShutdown::watch` on a ready connection, polled once, dropped.
///
/// `watch` only accepts hyper's own connection types (its `GracefulConnection` trait is
/// sealed), so this is its code (hyper-util 0.1.21, `server/graceful.rs`: `Watcher::watch`
/// and `GracefulConnectionFuture::poll`) over the same `tokio::sync::watch` channel, with
/// `std::future::ready` as the connection: subscribe, poll `rx.changed()` once (which
/// registers a waiter in the channel's `Notify`), poll the connection (ready), drop both.
#[inline(always)]
pub fn hyper_util_watch_ready(tx: &tokio::sync::watch::Sender<()>) {
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut rx = black_box(tx).subscribe();
    let mut cancel = pin!(async move {
        let _ = rx.changed().await;
        rx
    });
    let mut conn = pin!(std::future::ready(Ok::<(), ()>(())));
    let mut cancelled_guard = None;
    if let Poll::Ready(guard) = cancel.as_mut().poll(&mut cx) {
        cancelled_guard = Some(guard);
    }
    black_box(&cancelled_guard);
    let _ = black_box(conn.as_mut().poll(&mut cx));
}

/// A prepared lifecycle's shared state, as request handlers get it.
#[must_use]
pub fn prepared_shared() -> Arc<Shared> {
    Lifecycle::new(Config::default()).prepare().shared().clone()
}

/// hyper-util's graceful shutdown sender, built as `GracefulShutdown::new` builds it.
#[must_use]
pub fn hyper_util_channel() -> tokio::sync::watch::Sender<()> {
    tokio::sync::watch::channel(()).0
}
