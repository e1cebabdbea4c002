//! Reading the signal lines of `docs/design.md#logs` out of a server's stderr.

use std::time::Instant;

pub const SHUTDOWN_INITIATED: &str = "ShutdownInitiated";
pub const AFTER_SHUTDOWN_DELAY: &str = "AfterShutdownDelayDuration";
pub const PRE_SHUTDOWN_HOOKS_STOPPED: &str = "PreShutdownHooksStopped";
pub const NOT_ACCEPTING: &str = "NotAcceptingNewRequest";
pub const IN_FLIGHT_DRAINED: &str = "InFlightRequestsDrained";
pub const STOPPED_LISTENING: &str = "HTTPServerStoppedListening";
pub const HAS_BEEN_READY: &str = "HasBeenReady";
pub const MUX_AND_DISCOVERY_COMPLETE: &str = "MuxAndDiscoveryComplete";

/// The six termination signals every graceful termination fires.
pub const TERMINATION_SIGNALS: [&str; 6] = [
    SHUTDOWN_INITIATED,
    AFTER_SHUTDOWN_DELAY,
    PRE_SHUTDOWN_HOOKS_STOPPED,
    NOT_ACCEPTING,
    IN_FLIGHT_DRAINED,
    STOPPED_LISTENING,
];

const MARKER: &str = "[graceful-termination]";

/// One line of a child's output and when the test read it.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub at: Instant,
    pub text: String,
}

/// The lines of a log, with lookups of signal lines.
pub struct SignalLog {
    lines: Vec<LogLine>,
}

impl SignalLog {
    pub fn new(lines: Vec<LogLine>) -> SignalLog {
        SignalLog { lines }
    }

    /// Index of the first `[graceful-termination]` line naming signal `name` (as a whole word).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.lines
            .iter()
            .position(|l| l.text.contains(MARKER) && contains_word(&l.text, name))
    }

    /// When the first line of signal `name` was read.
    pub fn time_of(&self, name: &str) -> Option<Instant> {
        self.index_of(name).map(|i| self.lines[i].at)
    }

    pub fn has(&self, name: &str) -> bool {
        self.index_of(name).is_some()
    }

    /// Asserts that every name in `names` has a line.
    pub fn assert_all(&self, names: &[&str]) {
        let missing: Vec<&str> = names.iter().copied().filter(|n| !self.has(n)).collect();
        assert!(
            missing.is_empty(),
            "no `{MARKER}` log line for {missing:?}\n{}",
            self.render()
        );
    }

    /// Asserts that the line of `first` comes before the line of `then`.
    pub fn assert_before(&self, first: &str, then: &str) {
        match (self.index_of(first), self.index_of(then)) {
            (Some(a), Some(b)) => assert!(
                a < b,
                "log order: {first} (line {a}) should come before {then} (line {b})\n{}",
                self.render()
            ),
            (a, b) => panic!(
                "log order {first} < {then}: missing line ({first}: {a:?}, {then}: {b:?})\n{}",
                self.render()
            ),
        }
    }

    /// The DAG order (`docs/design.md#dag`) that holds in both modes.
    pub fn assert_common_dag_order(&self) {
        self.assert_all(&TERMINATION_SIGNALS);
        self.assert_before(SHUTDOWN_INITIATED, AFTER_SHUTDOWN_DELAY);
        self.assert_before(SHUTDOWN_INITIATED, PRE_SHUTDOWN_HOOKS_STOPPED);
        self.assert_before(AFTER_SHUTDOWN_DELAY, NOT_ACCEPTING);
        self.assert_before(PRE_SHUTDOWN_HOOKS_STOPPED, NOT_ACCEPTING);
        self.assert_before(NOT_ACCEPTING, IN_FLIGHT_DRAINED);
        self.assert_before(NOT_ACCEPTING, STOPPED_LISTENING);
    }

    /// The whole log, numbered, for failure messages.
    pub fn render(&self) -> String {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{i:4}: {}", l.text))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn contains_word(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[test]
fn signal_names_match_as_whole_words() {
    assert!(contains_word(
        "[graceful-termination] shutdown event name=NotAcceptingNewRequest",
        NOT_ACCEPTING
    ));
    assert!(contains_word(
        "name=\"ShutdownInitiated\"",
        SHUTDOWN_INITIATED
    ));
    assert!(!contains_word(
        "name=NotAcceptingNewRequests",
        NOT_ACCEPTING
    ));
    assert!(!contains_word("xShutdownInitiated", SHUTDOWN_INITIATED));
}
