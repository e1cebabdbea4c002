//! [`Simulator::apply`]: one random [`Op`] as the input or the request it stands for.

use alloc::vec::Vec;
use core::time::Duration;

use super::{Op, Simulator};
use crate::classify::RequestClass;
use crate::machine::{
    HandOverOutcome, HookId, HookKind, HookOutcome, Input, InputError, ListenerId, Machine,
    RoutesReadyId, StopSource,
};

impl Simulator {
    /// Applies one random operation. Errors from illegal inputs are expected and returned.
    pub fn apply(&mut self, op: Op) -> Result<(), InputError> {
        let pick_hook = |m: &Machine, i: u8| -> HookId {
            let all: Vec<HookId> = [
                HookKind::PreShutdown,
                HookKind::PostStart,
                HookKind::AfterDrain,
                HookKind::Destroy,
            ]
            .into_iter()
            .flat_map(|k| m.hooks(k).map(|(id, _)| id).collect::<Vec<_>>())
            .collect();
            match all.get(usize::from(i)) {
                Some(id) => *id,
                None => HookId::from_raw(u16::from(i)),
            }
        };
        let pick_listener = |s: &Self, i: u8| -> ListenerId {
            s.listeners
                .get(usize::from(i))
                .copied()
                .unwrap_or(ListenerId::from_raw(u16::from(i)))
        };
        match op {
            Op::Advance { millis } => {
                self.advance(Duration::from_millis(u64::from(millis)));
                Ok(())
            }
            Op::Stop { os_signal } => self.input(Input::StopRequested(if os_signal {
                StopSource::OsSignal
            } else {
                StopSource::Api
            })),
            Op::FinishHook { index, outcome } => {
                let hook = pick_hook(&self.machine, index);
                let outcome = match outcome % 4 {
                    0 => HookOutcome::Failed,
                    1 => HookOutcome::Panicked,
                    _ => HookOutcome::Succeeded,
                };
                self.finish_hook(hook, outcome)
            }
            Op::ListenerServing { index } => {
                let l = pick_listener(self, index);
                self.input(Input::ListenerServing(l))
            }
            Op::ListenerStopped { index } => {
                let l = pick_listener(self, index);
                self.input(Input::ListenerStopped(l))
            }
            Op::ServerStopped { index } => {
                let l = pick_listener(self, index);
                self.input(Input::ServerStopped(l))
            }
            Op::ConnectionsCut { index } => {
                let l = pick_listener(self, index);
                self.input(Input::ConnectionsCut(l))
            }
            Op::OpenExempt => {
                self.open_request(RequestClass::Exempt);
                Ok(())
            }
            Op::RoutesReady { index } => self.input(Input::RoutesReady(RoutesReadyId::from_raw(
                u16::from(index),
            ))),
            Op::OpenRequest { long_running } => {
                self.open_request(if long_running {
                    RequestClass::LongRunning
                } else {
                    RequestClass::Normal
                });
                Ok(())
            }
            Op::EndRequest { index } => {
                self.end_request(usize::from(index));
                Ok(())
            }
            Op::DrainProgress => self.input(Input::DrainProgress),
            Op::Health { endpoint } => {
                if let Some(shared) = self.shared() {
                    let path = ["/readyz", "/livez", "/healthz", "/readyz/shutdown"]
                        [usize::from(endpoint % 4)];
                    let _ = shared.health(path, Some("verbose"), self.now);
                }
                Ok(())
            }
            Op::HandOver { step } => self.input(match step % 3 {
                0 => Input::HandOverRequested,
                1 => Input::HandOverFinished(HandOverOutcome::SuccessorReady),
                _ => Input::HandOverFinished(HandOverOutcome::Failed),
            }),
        }
    }
}
