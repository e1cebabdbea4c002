//! The goodbyes of upgraded connections at shutdown: the WebSocket Close frames a server sent
//! at each stream's turn in the paced drain, and how many of them the clients answered.
//!
//! An upgraded connection leaves the HTTP server's hands at its `101`, so the lifecycle only
//! knows of its end through the handler's helper, which counts here. The termination summary
//! reports both figures (`websocket_closes`, `websocket_unanswered`): a client that never
//! answered, whether cut at the bound or still silent at the exit, counts as unanswered.

use crate::sync::{AtomicU64, Ordering};

/// The counters behind [`Counters::goodbyes`](crate::shared::counters::Counters::goodbyes).
pub(crate) struct Goodbyes {
    sent: AtomicU64,
    answered: AtomicU64,
}

impl Goodbyes {
    pub(crate) fn new() -> Self {
        Goodbyes {
            sent: AtomicU64::new(0),
            answered: AtomicU64::new(0),
        }
    }

    pub(crate) fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> GoodbyeCounts {
        // Answered is read first: an answer counted after it only raises `unanswered`
        // by one that is still in flight, never makes it wrap.
        let answered = self.answered.load(Ordering::Relaxed);
        let sent = self.sent.load(Ordering::Relaxed);
        GoodbyeCounts {
            websocket_closes: sent,
            websocket_unanswered: sent.saturating_sub(answered),
        }
    }
}

/// How upgraded connections were told goodbye (see
/// [`Counters::goodbyes`](crate::shared::counters::Counters::goodbyes)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GoodbyeCounts {
    /// WebSocket Close frames (status 1001, Going Away) sent at the streams' turns.
    pub websocket_closes: u64,
    /// Of those, the ones whose client had not answered with its own Close when the count
    /// was taken: cut at the bound, or still silent.
    pub websocket_unanswered: u64,
}

impl GoodbyeCounts {
    /// The counts as read back from a summary line.
    #[must_use]
    pub const fn new(websocket_closes: u64, websocket_unanswered: u64) -> Self {
        GoodbyeCounts {
            websocket_closes,
            websocket_unanswered,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn unanswered_is_sent_minus_answered() {
        let g = Goodbyes::new();
        for _ in 0..5 {
            g.sent();
        }
        g.answered();
        g.answered();
        assert_eq!(g.counts(), GoodbyeCounts::new(5, 3));
    }

    #[test]
    fn an_answer_without_a_close_never_wraps() {
        let g = Goodbyes::new();
        g.answered();
        assert_eq!(g.counts(), GoodbyeCounts::new(0, 0));
    }
}
