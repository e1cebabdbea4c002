//! Server-Sent Events at shutdown: an event stream keeps its events coming until its turn in
//! the paced long-running drain, then sends a last event carrying `retry: <ms>` and ends, so
//! that a browser's `EventSource` reconnects (to another instance, through the balancer) no
//! sooner than a rejected request would come back, and not all at once.
//!
//! ```
//! use bytes::Bytes;
//! use futures_util::StreamExt;
//! use lameduck_hyper::{sse, Runtime, ShutdownNotice};
//!
//! /// A handler's event stream: `data:` events from `source`, ended at the stream's turn.
//! fn events<R: Runtime>(
//!     runtime: R,
//!     notice: Option<ShutdownNotice>,
//!     source: impl futures_util::Stream<Item = String> + Send + 'static,
//! ) -> impl futures_util::Stream<Item = Bytes> + Send {
//!     let events = source.map(|text| Bytes::from(format!("data: {text}\n\n")));
//!     sse::end_at_turn(runtime, notice, events)
//! }
//! ```

use std::pin::{pin, Pin};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{select, Either};
use futures_util::{Stream, StreamExt};

use crate::request::notice::ShutdownNotice;
use crate::runtime::Runtime;

/// The content type of an event stream.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// The last event of a stream ended at shutdown: `retry: <milliseconds>` and the blank line
/// that ends the event. It dispatches nothing; it sets the client's reconnection time.
#[must_use]
pub fn retry_event(retry: Duration) -> Bytes {
    Bytes::from(format!("retry: {}\n\n", retry.as_millis()))
}

/// Passes `events` (each item one or more whole events, each ending with a blank line) on
/// until the stream's turn to end in the paced long-running drain, then sends
/// [`retry_event`] with the [`ShutdownNotice::retry_after`] of the server's mode and ends.
///
/// Without a notice (a request the server did not classify as long-running) the events
/// pass on unchanged. A source that ends by itself ends the stream (no `retry:`). The
/// response body's end keeps the turn reserved here, so the end is not held again. The
/// stream is `Unpin`.
pub fn end_at_turn<R, S>(
    runtime: R,
    notice: Option<ShutdownNotice>,
    events: S,
) -> impl Stream<Item = Bytes> + Send + Unpin
where
    R: Runtime,
    S: Stream<Item = Bytes> + Send + 'static,
{
    let state = match notice {
        Some(notice) => State::Serving {
            runtime,
            notice,
            events: Box::pin(events),
        },
        None => State::Unwatched(Box::pin(events)),
    };
    // Boxed once per stream, so that the stream is `Unpin` (a body's `frame()`, `next()`).
    Box::pin(futures_util::stream::unfold(state, next))
}

type Events = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

enum State<R: Runtime> {
    /// No notice: the events pass on.
    Unwatched(Events),
    /// Before the notice fired.
    Serving {
        runtime: R,
        notice: ShutdownNotice,
        events: Events,
    },
    /// The notice fired: events pass on until `turn`, then `retry`.
    Ending {
        events: Events,
        turn: Pin<Box<R::Sleep>>,
        retry: Bytes,
    },
    /// The last event was sent.
    Done,
}

/// What one wait gave.
enum Step {
    Event(Bytes),
    SourceEnded,
    Turn,
}

async fn next<R: Runtime>(mut state: State<R>) -> Option<(Bytes, State<R>)> {
    loop {
        match state {
            State::Unwatched(mut events) => {
                let event = events.next().await?;
                return Some((event, State::Unwatched(events)));
            }
            State::Serving {
                runtime,
                notice,
                mut events,
            } => {
                if !notice.is_fired() {
                    let step = match select(events.next(), pin!(notice.wait())).await {
                        Either::Left((Some(event), _)) => Step::Event(event),
                        Either::Left((None, _)) => Step::SourceEnded,
                        Either::Right(_) => Step::Turn,
                    };
                    match step {
                        Step::Event(event) => {
                            let state = State::Serving {
                                runtime,
                                notice,
                                events,
                            };
                            return Some((event, state));
                        }
                        Step::SourceEnded => return None,
                        Step::Turn => {}
                    }
                }
                let retry = retry_event(notice.retry_after());
                state = match notice.reserve_turn(runtime.now()) {
                    Some(at) => State::Ending {
                        events,
                        turn: Box::pin(runtime.sleep_until(at)),
                        retry,
                    },
                    None => return Some((retry, State::Done)),
                };
            }
            State::Ending {
                mut events,
                mut turn,
                retry,
            } => {
                let step = match select(events.next(), turn.as_mut()).await {
                    Either::Left((Some(event), _)) => Step::Event(event),
                    Either::Left((None, _)) => Step::SourceEnded,
                    Either::Right(_) => Step::Turn,
                };
                return match step {
                    Step::Event(event) => Some((
                        event,
                        State::Ending {
                            events,
                            turn,
                            retry,
                        },
                    )),
                    Step::SourceEnded => None,
                    Step::Turn => Some((retry, State::Done)),
                };
            }
            State::Done => return None,
        }
    }
}
