//! The hand-over of the listening sockets to a successor process (a hot upgrade): one more
//! trigger of the termination DAG. The driver sends the sockets when the machine says
//! [`Event::HandOverListeners`]; once the successor is ready, termination starts exactly as
//! on SIGTERM, and [`Event::HandedOver`] marks the cause in the trace.

use super::io::{Event, HandOverOutcome, HookKind, InputError};
use super::{HookState, Machine, StopRequest};

/// How far the hand-over got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HandOverState {
    /// None under way (none asked for, or the last one failed).
    Idle,
    /// The driver is sending the sockets and waiting for the successor.
    InProgress,
    /// The successor took over.
    Done,
}

impl Machine {
    /// [`Input::HandOverRequested`](super::Input::HandOverRequested).
    pub(super) fn request_hand_over(&mut self) -> Result<(), InputError> {
        if self.stop != StopRequest::NotRequested || self.hand_over == HandOverState::Done {
            return Err(InputError::HandOverAfterStop);
        }
        if self.hand_over == HandOverState::InProgress {
            return Err(InputError::HandOverInProgress);
        }
        if !self.announced_serving {
            return Err(InputError::HandOverBeforeServing);
        }
        self.hand_over = HandOverState::InProgress;
        self.events.push_back(Event::HandOverListeners);
        Ok(())
    }

    /// [`Input::HandOverFinished`](super::Input::HandOverFinished).
    pub(super) fn finish_hand_over(&mut self, outcome: HandOverOutcome) -> Result<(), InputError> {
        if self.hand_over != HandOverState::InProgress {
            return Err(InputError::NoHandOver);
        }
        match outcome {
            HandOverOutcome::SuccessorReady => {
                self.hand_over = HandOverState::Done;
                // A stop that came while the sockets were on their way already started
                // the termination; the hand-over then is not its cause.
                if self.stop == StopRequest::NotRequested {
                    self.stop = StopRequest::Event;
                    self.events.push_back(Event::HandedOver);
                }
            }
            HandOverOutcome::Failed => {
                self.hand_over = HandOverState::Idle;
                self.events.push_back(Event::HandOverFailed);
            }
        }
        Ok(())
    }

    /// Whether this process is up: every listener serves, every post-start hook has
    /// succeeded, and termination has not started. A successor tells its predecessor it is
    /// ready (and the predecessor terminates) only from then on.
    #[must_use]
    pub fn is_up(&self) -> bool {
        self.announced_serving
            && self.stop == StopRequest::NotRequested
            && self
                .hooks_of(HookKind::PostStart)
                .all(|h| h.state == HookState::Done(super::HookOutcome::Succeeded))
    }
}
