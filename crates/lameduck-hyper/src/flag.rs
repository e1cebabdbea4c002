//! A one-shot flag that can be awaited: set once, observed by any number of waiters.

use std::sync::atomic::{AtomicBool, Ordering};

use std::future::Future;

use event_listener::{Event, EventListener};

/// Set once; [`Flag::wait`] resolves once it is set. Woken through `event_listener`.
#[derive(Debug, Default)]
pub(crate) struct Flag {
    set: AtomicBool,
    event: Event,
}

impl Flag {
    pub(crate) fn set(&self) {
        if !self.set.swap(true, Ordering::AcqRel) {
            self.event.notify(usize::MAX);
        }
    }

    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Whether the flag is set; if not, registers `cx`'s waker (through `listener`) to be
    /// woken when it is. The waker of a task stays the same, so a task calls this once and
    /// then only [`Flag::is_set`].
    pub(crate) fn poll_register(
        &self,
        listener: &mut Option<EventListener>,
        cx: &mut std::task::Context<'_>,
    ) -> bool {
        if self.is_set() {
            return true;
        }
        let mut l = self.event.listen();
        if self.is_set() {
            return true;
        }
        if std::pin::Pin::new(&mut l).poll(cx).is_ready() {
            return true;
        }
        *listener = Some(l);
        self.is_set()
    }

    pub(crate) async fn wait(&self) {
        loop {
            if self.is_set() {
                return;
            }
            let listener = self.event.listen();
            if self.is_set() {
                return;
            }
            listener.await;
        }
    }
}
