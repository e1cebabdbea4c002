//! A one-shot flag that can be awaited: set once, observed by any number of waiters.

use std::sync::atomic::{AtomicBool, Ordering};

use event_listener::Event;

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

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
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
