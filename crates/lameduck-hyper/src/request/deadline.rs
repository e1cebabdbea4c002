//! A request's deadline, armed lazily: nothing is read from the clock and no timer is
//! registered until the request first has to wait. A handler that answers at once and a body
//! that is ready at once (most requests) cost nothing; a slow one gets one boxed timer, which
//! moves with the request from the response future to its body.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::runtime::Runtime;

/// A request timeout, anchored the first time the request waits (a few microseconds after
/// admission at most: the first poll of the handler or of its body), then armed.
pub struct Deadline<R: Runtime>(State<R>);

// The timer is boxed: nothing in a `Deadline` is pinned in place.
impl<R: Runtime> Unpin for Deadline<R> {}

enum State<R: Runtime> {
    /// No timeout (long-running and exempt-after-close requests, or `request_timeout` 0).
    None,
    /// Not anchored yet: this long after the first wait.
    After(Duration),
    /// Armed: the timer.
    Armed(Pin<Box<R::Sleep>>),
    /// Passed.
    Expired,
}

impl<R: Runtime> fmt::Debug for Deadline<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            State::None => f.write_str("Deadline::None"),
            State::After(d) => write!(f, "Deadline::After({d:?})"),
            State::Armed(_) => f.write_str("Deadline::Armed"),
            State::Expired => f.write_str("Deadline::Expired"),
        }
    }
}

/// What a [`Deadline`] hands over to a body's end.
pub(crate) enum DeadlineState<R: Runtime> {
    /// Not armed (or none): the body's end arms its own from the request's timeout.
    Unarmed,
    /// Armed: this timer.
    Armed(Pin<Box<R::Sleep>>),
    /// Passed.
    Expired,
}

impl<R: Runtime> Deadline<R> {
    pub(crate) fn into_state(self) -> DeadlineState<R> {
        match self.0 {
            State::None | State::After(_) => DeadlineState::Unarmed,
            State::Armed(timer) => DeadlineState::Armed(timer),
            State::Expired => DeadlineState::Expired,
        }
    }

    /// A deadline `timeout` after the request first waits; `None`: no deadline.
    #[must_use]
    pub fn after(timeout: Option<Duration>) -> Self {
        Deadline(timeout.map_or(State::None, State::After))
    }

    /// No deadline.
    #[must_use]
    pub fn none() -> Self {
        Deadline(State::None)
    }

    /// Call whenever the request waits (its handler or body returned `Pending`): resolves
    /// once the deadline has passed (then stays resolved). Pending forever without one.
    pub fn poll_expired(&mut self, runtime: &R, cx: &mut Context<'_>) -> Poll<()> {
        if let State::After(timeout) = self.0 {
            let at = runtime.now() + timeout;
            self.0 = State::Armed(Box::pin(runtime.sleep_until(at)));
        }
        match &mut self.0 {
            State::None => Poll::Pending,
            State::Expired => Poll::Ready(()),
            State::After(_) => Poll::Pending, // armed above
            State::Armed(sleep) => {
                std::task::ready!(sleep.as_mut().poll(cx));
                self.0 = State::Expired;
                Poll::Ready(())
            }
        }
    }
}
