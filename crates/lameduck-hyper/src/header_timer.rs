//! hyper's HTTP/1 header-read timeout (a request head must arrive within 30 s of the
//! connection waiting for it: the slowloris protection) at almost no cost per request.
//!
//! hyper asks its timer for a new sleep every time a keep-alive connection starts waiting
//! for the next request head, and drops it once the head is parsed. With the runtime's timer
//! that is a timer registration and removal per request. Here, a connection has one *slot*
//! that hyper's sleep only writes its deadline into, and the connection's own task keeps one
//! real timer (the *watchdog*), armed at the earliest deadline and re-armed only when it
//! fires early (once per timeout period at most): under load, no timer operation per request.
//!
//! hyper polls the header sleep from inside the connection's future, which
//! [`serve_connection`](crate::connection) polls together with the watchdog, so a fired slot
//! is always noticed. A second sleep while the slot is taken (HTTP/1 has one at a time; this
//! is a safety net) falls back to the runtime's own timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

use crate::runtime::Runtime;

/// The deadline slot of one connection.
struct Slot {
    /// Deadlines are stored as nanoseconds after this instant (plus one, so 0 means none).
    base: Instant,
    /// The deadline of the live header sleep, or 0.
    deadline: AtomicU64,
    /// Set by the watchdog when the live deadline has passed.
    fired: AtomicBool,
}

impl Slot {
    fn encode(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    fn decode(&self, deadline: u64) -> Instant {
        self.base + Duration::from_nanos(deadline - 1)
    }
}

/// hyper's timer for one HTTP/1 connection.
pub(crate) struct HeaderTimer<T> {
    slot: Arc<Slot>,
    /// The runtime's own timer, for anything but the one header sleep.
    fallback: T,
}

/// The header sleep hyper holds.
struct SlotSleep {
    slot: Arc<Slot>,
    deadline: u64,
}

impl Future for SlotSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        // Woken through the connection task, which the watchdog wakes.
        if self.slot.fired.load(Ordering::Acquire)
            && self.slot.deadline.load(Ordering::Acquire) == self.deadline
        {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl hyper::rt::Sleep for SlotSleep {}

impl Drop for SlotSleep {
    fn drop(&mut self) {
        let _ = self.slot.deadline.compare_exchange(
            self.deadline,
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

impl<T: hyper::rt::Timer> hyper::rt::Timer for HeaderTimer<T> {
    fn now(&self) -> Instant {
        // The runtime's clock (tokio's paused clock in tests), as the watchdog reads it.
        self.fallback.now()
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(self.fallback.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let encoded = self.slot.encode(deadline);
        let taken =
            self.slot
                .deadline
                .compare_exchange(0, encoded, Ordering::AcqRel, Ordering::Relaxed);
        if taken.is_err() {
            return self.fallback.sleep_until(deadline);
        }
        self.slot.fired.store(false, Ordering::Release);
        Box::pin(SlotSleep {
            slot: Arc::clone(&self.slot),
            deadline: encoded,
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        if let Some(mut ours) = sleep.as_mut().downcast_mut_pin::<SlotSleep>() {
            let encoded = self.slot.encode(new_deadline);
            let moved = self.slot.deadline.compare_exchange(
                ours.deadline,
                encoded,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            if moved.is_ok() {
                self.slot.fired.store(false, Ordering::Release);
                ours.deadline = encoded;
                return;
            }
        }
        *sleep = self.sleep_until(new_deadline);
    }
}

/// Wakes the connection task when the watchdog's timer fires, and says that it did, so the
/// connection polls the timer only then.
#[derive(Default)]
struct WatchdogWake {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for WatchdogWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// The connection task's side: one real timer at the earliest header deadline.
pub(crate) struct Watchdog<R: Runtime> {
    slot: Arc<Slot>,
    runtime: R,
    /// The armed timer and the deadline it fires at (encoded).
    armed: Option<(u64, Pin<Box<R::Sleep>>)>,
    wake: Arc<WatchdogWake>,
    waker: Waker,
}

/// A connection's header timer (for hyper) and its watchdog (for the connection task).
pub(crate) fn header_timer<R: Runtime>(runtime: &R) -> (HeaderTimer<R::HyperTimer>, Watchdog<R>) {
    let slot = Arc::new(Slot {
        base: runtime.now(),
        deadline: AtomicU64::new(0),
        fired: AtomicBool::new(false),
    });
    let wake = Arc::new(WatchdogWake::default());
    let timer = HeaderTimer {
        slot: Arc::clone(&slot),
        fallback: runtime.hyper_timer(),
    };
    let watchdog = Watchdog {
        slot,
        runtime: runtime.clone(),
        armed: None,
        waker: Waker::from(Arc::clone(&wake)),
        wake,
    };
    (timer, watchdog)
}

impl<R: Runtime> Watchdog<R> {
    /// Call after the connection returned `Pending`. Returns `true` when a header deadline
    /// has passed: poll the connection again (its header sleep is now ready).
    pub(crate) fn after_pending(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.slot.deadline.load(Ordering::Acquire);
        if self.slot.fired.load(Ordering::Acquire) {
            // Already reported; hyper's next sleep clears it.
            return false;
        }
        match &self.armed {
            // Nothing to watch: an armed timer (a deadline that ended early) is left to
            // fire, once, and is then found idle.
            _ if deadline == 0 && !self.wake.fired.load(Ordering::Acquire) => return false,
            // Armed at or before the live deadline and not fired: nothing to do (the
            // common case under load, one atomic load apart from the above).
            Some((at, _)) if *at <= deadline && !self.wake.fired.load(Ordering::Acquire) => {
                return false
            }
            _ => {}
        }
        self.wake.fired.store(false, Ordering::Release);
        if let Some((_, sleep)) = self.armed.as_mut() {
            self.wake.task.register(cx.waker());
            let mut own = Context::from_waker(&self.waker);
            if sleep.as_mut().poll(&mut own).is_pending() {
                if deadline == 0 || self.armed.as_ref().is_some_and(|(at, _)| *at <= deadline) {
                    return false;
                }
            } else {
                self.armed = None;
            }
        }
        if deadline == 0 {
            return false;
        }
        let at = self.slot.decode(deadline);
        if at <= self.runtime.now() {
            self.slot.fired.store(true, Ordering::Release);
            self.armed = None;
            return true;
        }
        // Arm (or re-arm, earlier) at the live deadline.
        let mut sleep = Box::pin(self.runtime.sleep_until(at));
        self.wake.task.register(cx.waker());
        let mut own = Context::from_waker(&self.waker);
        if sleep.as_mut().poll(&mut own).is_ready() {
            self.slot.fired.store(true, Ordering::Release);
            return true;
        }
        self.armed = Some((deadline, sleep));
        false
    }
}
