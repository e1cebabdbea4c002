//! What is counted of the connections closed at their bound with their peers silent
//! (`Shared::connection_bound` says when that is), and when the last connection closed. The
//! adapters count each such connection ([`Counters::count_connection_cut`]); the termination
//! summary reports the count and the last close ([`Counters::peer_counts`]).
//!
//! [`Counters::count_connection_cut`]: super::counters::Counters::count_connection_cut
//! [`Counters::peer_counts`]: super::counters::Counters::peer_counts

use core::time::Duration;

use crate::connection::CutKind;
use crate::sync::{AtomicU64, Ordering};

/// `Peers::last_closed` before any close after `ShutdownInitiated`: offsets are stored plus
/// one nanosecond.
const NONE: u64 = 0;

/// The counters behind [`PeerCounts`], in `Shared`.
#[derive(Debug)]
pub(crate) struct Peers {
    /// Connections cut since the start, by kind.
    cut: [AtomicU64; CutKind::COUNT],
    /// Connections cut from `ShutdownInitiated` on, by kind.
    cut_in_termination: [AtomicU64; CutKind::COUNT],
    /// Nanoseconds from `ShutdownInitiated` to the latest connection close, plus one.
    last_closed: AtomicU64,
}

impl Peers {
    pub(crate) fn new() -> Self {
        Peers {
            cut: core::array::from_fn(|_| AtomicU64::new(0)),
            cut_in_termination: core::array::from_fn(|_| AtomicU64::new(0)),
            last_closed: AtomicU64::new(NONE),
        }
    }

    /// A connection of `kind` cut at its bound (`in_termination`: from `ShutdownInitiated`
    /// on).
    pub(crate) fn cut(&self, kind: CutKind, in_termination: bool) {
        self.cut[kind.index()].fetch_add(1, Ordering::Relaxed);
        if in_termination {
            self.cut_in_termination[kind.index()].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A connection closed `offset` after `ShutdownInitiated`.
    pub(crate) fn closed(&self, offset: Duration) {
        let stored = u64::try_from(offset.as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1);
        self.last_closed.fetch_max(stored, Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> PeerCounts {
        let read = |counters: &[AtomicU64; CutKind::COUNT]| {
            core::array::from_fn(|i| counters[i].load(Ordering::Relaxed))
        };
        let last = self.last_closed.load(Ordering::Relaxed);
        PeerCounts {
            cut_since_start: read(&self.cut),
            cut_in_termination: read(&self.cut_in_termination),
            last_connection_closed: (last != NONE).then(|| Duration::from_nanos(last - 1)),
        }
    }
}

/// What was counted of the connections closed at their bound with their peers silent, and
/// when the last connection closed (see
/// [`Counters::peer_counts`](super::counters::Counters::peer_counts)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PeerCounts {
    /// Connections cut since the start, by kind ([`CutKind::index`]).
    pub cut_since_start: [u64; CutKind::COUNT],
    /// Connections cut from `ShutdownInitiated` on, by kind ([`CutKind::index`]).
    pub cut_in_termination: [u64; CutKind::COUNT],
    /// How long after `ShutdownInitiated` the last connection closed; `None` when none closed
    /// after it.
    pub last_connection_closed: Option<Duration>,
}

impl PeerCounts {
    /// The connections cut during the termination, every kind together: the summary's
    /// `connections_cut`.
    #[must_use]
    pub fn connections_cut(&self) -> u64 {
        self.cut_in_termination.iter().sum()
    }

    /// The connections of `kind` cut during the termination.
    #[must_use]
    pub fn cut_in_termination(&self, kind: CutKind) -> u64 {
        self.cut_in_termination[kind.index()]
    }
}
