//! The lifecycle signals as request tasks see them: which have fired and when, and a future
//! that resolves when one fires.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use event_listener::EventListener;

use super::{Shared, NOT_YET};
use crate::signal::{LifecycleSignal, SignalSet};
use crate::sync::Ordering;
use crate::time::Instant;

impl Shared {
    /// Fires `signal` at `now`; returns whether it was the first time.
    pub(crate) fn fire(&self, signal: LifecycleSignal, now: Instant) -> bool {
        // Record the instant first so that anyone who sees the bit also sees the instant.
        let _ = self.fired_at[signal.index()].compare_exchange(
            NOT_YET,
            now.as_nanos(),
            Ordering::Release,
            Ordering::Relaxed,
        );
        let prev = self.fired.fetch_or(signal.bit(), Ordering::AcqRel);
        let first = prev & signal.bit() == 0;
        if first {
            self.arrivals.follow(signal);
            self.signal_event.notify(usize::MAX);
        }
        first
    }

    /// Fires `signal` at `now` unless `blocker` has fired, in one atomic step: a readiness
    /// answer computed just before `ShutdownInitiated` cannot publish `HasBeenReady` after it.
    pub(super) fn fire_unless(
        &self,
        signal: LifecycleSignal,
        blocker: LifecycleSignal,
        now: Instant,
    ) -> bool {
        let _ = self.fired_at[signal.index()].compare_exchange(
            NOT_YET,
            now.as_nanos(),
            Ordering::Release,
            Ordering::Relaxed,
        );
        let mut current = self.fired.load(Ordering::Acquire);
        loop {
            if current & (signal.bit() | blocker.bit()) != 0 {
                return false;
            }
            match self.fired.compare_exchange_weak(
                current,
                current | signal.bit(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.arrivals.follow(signal);
                    self.signal_event.notify(usize::MAX);
                    return true;
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// The signals fired so far.
    #[must_use]
    pub fn fired(&self) -> SignalSet {
        SignalSet::from_bits(self.fired.load(Ordering::Acquire))
    }

    /// Whether `signal` has fired.
    #[must_use]
    pub fn has_fired(&self, signal: LifecycleSignal) -> bool {
        self.fired().contains(signal)
    }

    /// When `signal` fired, if it has.
    #[must_use]
    pub fn fired_at(&self, signal: LifecycleSignal) -> Option<Instant> {
        if !self.has_fired(signal) {
            return None;
        }
        match self.fired_at[signal.index()].load(Ordering::Acquire) {
            NOT_YET => None,
            n => Some(Instant::from_nanos(n)),
        }
    }

    /// A future that resolves once `signal` has fired (at once if it already has).
    ///
    /// Runtime-agnostic: it is woken through `event_listener`. Long-running handlers await
    /// `signal_fired(LifecycleSignal::NotAcceptingNewRequest)` to learn when to end their streams.
    pub fn signal_fired(self: &Arc<Self>, signal: LifecycleSignal) -> LifecycleSignalFired {
        LifecycleSignalFired {
            shared: Arc::clone(self),
            signal,
            listener: None,
        }
    }

    /// Whether every registered routes-ready report has come in. Before that, adapters
    /// answer unknown paths with [`crate::responses::ROUTES_NOT_READY`].
    #[must_use]
    pub fn routes_complete(&self) -> bool {
        self.has_fired(LifecycleSignal::MuxAndDiscoveryComplete)
    }
}

/// Resolves once a signal has fired; see [`Shared::signal_fired`].
#[must_use = "futures do nothing unless polled"]
pub struct LifecycleSignalFired {
    shared: Arc<Shared>,
    signal: LifecycleSignal,
    listener: Option<EventListener>,
}

impl fmt::Debug for LifecycleSignalFired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LifecycleSignalFired")
            .field("signal", &self.signal)
            .finish()
    }
}

impl Future for LifecycleSignalFired {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            if this.shared.has_fired(this.signal) {
                return Poll::Ready(());
            }
            match this.listener.as_mut() {
                None => this.listener = Some(this.shared.signal_event.listen()),
                Some(l) => {
                    if Pin::new(l).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.listener = None;
                }
            }
        }
    }
}
