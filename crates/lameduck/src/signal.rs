//! The lifecycle signals: each fires once and never un-fires (see the repository's
//! `docs/design.md#vocabulary`).

use core::fmt;

use crate::time::Instant;

/// A named lifecycle signal, as kube-apiserver's `lifecycle_signals.go` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LifecycleSignal {
    /// Termination was requested (first SIGTERM/SIGINT or `request_shutdown`).
    ShutdownInitiated = 0,
    /// `shutdown_delay` has passed since [`LifecycleSignal::ShutdownInitiated`].
    AfterShutdownDelayDuration = 1,
    /// Every pre-shutdown hook has returned (successfully or not).
    PreShutdownHooksStopped = 2,
    /// New requests are no longer accepted (listener closed in close-listener mode, 429 in
    /// retry-after mode).
    NotAcceptingNewRequest = 3,
    /// Normal and long-running requests have drained (or their bounds ran out).
    InFlightRequestsDrained = 4,
    /// The HTTP server stopped listening.
    HTTPServerStoppedListening = 5,
    /// `/readyz` answered 200 for the first time.
    HasBeenReady = 6,
    /// Every registered routes-ready report has come in.
    MuxAndDiscoveryComplete = 7,
}

impl LifecycleSignal {
    /// How many signals there are: the length of [`LifecycleSignal::ALL`], of [`SignalTimes`] and of
    /// every per-signal table.
    pub const COUNT: usize = 8;

    /// Every signal, in declaration order.
    pub const ALL: [LifecycleSignal; LifecycleSignal::COUNT] = [
        LifecycleSignal::ShutdownInitiated,
        LifecycleSignal::AfterShutdownDelayDuration,
        LifecycleSignal::PreShutdownHooksStopped,
        LifecycleSignal::NotAcceptingNewRequest,
        LifecycleSignal::InFlightRequestsDrained,
        LifecycleSignal::HTTPServerStoppedListening,
        LifecycleSignal::HasBeenReady,
        LifecycleSignal::MuxAndDiscoveryComplete,
    ];

    /// The signal's exact name, as logged (`[graceful-termination] shutdown event name=…`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            LifecycleSignal::ShutdownInitiated => "ShutdownInitiated",
            LifecycleSignal::AfterShutdownDelayDuration => "AfterShutdownDelayDuration",
            LifecycleSignal::PreShutdownHooksStopped => "PreShutdownHooksStopped",
            LifecycleSignal::NotAcceptingNewRequest => "NotAcceptingNewRequest",
            LifecycleSignal::InFlightRequestsDrained => "InFlightRequestsDrained",
            LifecycleSignal::HTTPServerStoppedListening => "HTTPServerStoppedListening",
            LifecycleSignal::HasBeenReady => "HasBeenReady",
            LifecycleSignal::MuxAndDiscoveryComplete => "MuxAndDiscoveryComplete",
        }
    }

    /// The signal with this exact name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<LifecycleSignal> {
        LifecycleSignal::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Index in [`LifecycleSignal::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The bit of this signal in a [`SignalSet`].
    #[must_use]
    pub const fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// Whether this is one of the six termination signals (as opposed to the start-up
    /// signals [`LifecycleSignal::HasBeenReady`] and [`LifecycleSignal::MuxAndDiscoveryComplete`]).
    #[must_use]
    pub const fn is_termination(self) -> bool {
        !matches!(
            self,
            LifecycleSignal::HasBeenReady | LifecycleSignal::MuxAndDiscoveryComplete
        )
    }
}

// `COUNT` is the last discriminant plus one, so `index()` is below it, and every signal has
// a bit in a `SignalSet`'s `u8`.
const _: () =
    assert!(LifecycleSignal::MuxAndDiscoveryComplete as usize + 1 == LifecycleSignal::COUNT);
const _: () = assert!(LifecycleSignal::COUNT <= u8::BITS as usize);

impl fmt::Display for LifecycleSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of signals, one bit each.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SignalSet(u8);

impl SignalSet {
    /// The empty set.
    pub const EMPTY: SignalSet = SignalSet(0);

    /// The set with these raw bits (bit `i` is `LifecycleSignal::ALL[i]`).
    #[must_use]
    pub const fn from_bits(bits: u8) -> Self {
        SignalSet(bits)
    }

    /// The raw bits.
    #[must_use]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether `signal` is in the set.
    #[must_use]
    pub const fn contains(self, signal: LifecycleSignal) -> bool {
        self.0 & signal.bit() != 0
    }

    /// The set with `signal` added.
    #[must_use]
    pub const fn with(self, signal: LifecycleSignal) -> Self {
        SignalSet(self.0 | signal.bit())
    }

    /// Adds `signal`; returns whether it was new.
    pub fn insert(&mut self, signal: LifecycleSignal) -> bool {
        let new = !self.contains(signal);
        self.0 |= signal.bit();
        new
    }

    /// The signals in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = LifecycleSignal> {
        LifecycleSignal::ALL
            .into_iter()
            .filter(move |s| self.contains(*s))
    }
}

impl fmt::Debug for SignalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// When each signal fired, if it has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalTimes {
    at: [Option<Instant>; LifecycleSignal::COUNT],
}

impl SignalTimes {
    /// When `signal` fired, or `None`.
    #[must_use]
    pub fn get(&self, signal: LifecycleSignal) -> Option<Instant> {
        self.at[signal.index()]
    }

    /// Records that `signal` fired at `now`; a signal that has already fired keeps its first
    /// instant. Returns whether this was the first time.
    pub fn record(&mut self, signal: LifecycleSignal, now: Instant) -> bool {
        let slot = &mut self.at[signal.index()];
        if slot.is_some() {
            return false;
        }
        *slot = Some(now);
        true
    }

    /// The set of signals that have fired.
    #[must_use]
    pub fn fired(&self) -> SignalSet {
        LifecycleSignal::ALL
            .into_iter()
            .filter(|s| self.at[s.index()].is_some())
            .fold(SignalSet::EMPTY, SignalSet::with)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in LifecycleSignal::ALL {
            assert_eq!(LifecycleSignal::from_name(s.name()), Some(s));
            assert_eq!(LifecycleSignal::ALL[s.index()], s);
        }
        assert_eq!(LifecycleSignal::from_name("nope"), None);
    }

    #[test]
    fn times_keep_the_first_instant() {
        let mut t = SignalTimes::default();
        assert!(t.record(LifecycleSignal::ShutdownInitiated, Instant::from_secs(1)));
        assert!(!t.record(LifecycleSignal::ShutdownInitiated, Instant::from_secs(2)));
        assert_eq!(
            t.get(LifecycleSignal::ShutdownInitiated),
            Some(Instant::from_secs(1))
        );
        assert_eq!(
            t.fired(),
            SignalSet::EMPTY.with(LifecycleSignal::ShutdownInitiated)
        );
    }
}
