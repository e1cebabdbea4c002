//! The hand-over of the listening sockets to a successor process (a hot upgrade): one more
//! trigger of the termination DAG. The driver sends the sockets when the machine says
//! [`Event::HandOverListeners`]; once the successor is ready, termination starts exactly as
//! on SIGTERM, and [`Event::HandedOver`] marks the cause in the trace.

use super::io::{Event, HandOverOutcome, HookKind, InputError};
use super::{HandOverState, HookState, Machine, StopRequest};

impl Machine {
    /// [`Input::HandOverRequested`](super::Input::HandOverRequested).
    pub(super) fn request_hand_over(&mut self) -> Result<(), InputError> {
        if self.stop != StopRequest::NotRequested || self.hand_over == HandOverState::Done {
            return Err(InputError::HandOverAfterStop);
        }
        if matches!(
            self.hand_over,
            HandOverState::InProgress | HandOverState::Pending
        ) {
            return Err(InputError::HandOverInProgress);
        }
        // Asked for before every listener serves (a signal right after start): it waits.
        self.hand_over = HandOverState::Pending;
        self.start_pending_hand_over();
        Ok(())
    }

    /// Starts a pending hand-over once every listener serves (and termination has not
    /// started: then it is dropped).
    pub(super) fn start_pending_hand_over(&mut self) {
        if self.hand_over != HandOverState::Pending {
            return;
        }
        if self.stop != StopRequest::NotRequested {
            self.hand_over = HandOverState::Idle;
        } else if self.has_served() {
            self.hand_over = HandOverState::InProgress;
            self.events.push_back(Event::HandOverListeners);
        }
    }

    /// [`Input::HandOverFinished`](super::Input::HandOverFinished).
    pub(super) fn finish_hand_over(&mut self, outcome: HandOverOutcome) -> Result<(), InputError> {
        if self.hand_over != HandOverState::InProgress {
            return Err(InputError::NoHandOver);
        }
        match outcome {
            HandOverOutcome::SuccessorReady => {
                self.hand_over = HandOverState::Done;
                if let Some(shared) = &self.shared {
                    shared.set_sockets_outlive();
                }
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
        self.has_served()
            && self.stop == StopRequest::NotRequested
            && self
                .hooks_of(HookKind::PostStart)
                .all(|h| h.state == HookState::Done(super::HookOutcome::Succeeded))
    }
}
