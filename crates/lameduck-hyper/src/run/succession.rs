//! The driver's side of a hand-over (see [`crate::sockets::hand_over`]): as the predecessor,
//! it keeps a copy of every listening socket and sends them when the machine says
//! [`Event::HandOverListeners`](lameduck::Event::HandOverListeners); as a successor, it
//! tells its predecessor once the machine [is up](lameduck::Machine::is_up). The blocking
//! Unix-socket work runs on a thread of its own; its outcome comes back as an input.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use futures_channel::mpsc;
use lameduck::machine::HandOverOutcome;
use lameduck::{Input, Machine};

use crate::logging;
use crate::sockets::hand_over::{send_listeners, HandOver, HandOverError, Predecessor};

/// What the run loop holds for hand-overs.
#[derive(Debug, Default)]
pub(crate) struct Succession {
    /// Where to hand over, when configured.
    pub(crate) target: Option<HandOver>,
    /// A copy of every listening socket, by listener name; dropped once the listeners stop
    /// (so that a closed listener refuses connections) or were handed over.
    pub(crate) sockets: Vec<(String, OwnedFd)>,
    /// The predecessor to tell once this process is up.
    pub(crate) predecessor: Option<Predecessor>,
    /// The successor's process id, once it is ready.
    successor: Arc<Mutex<Option<u32>>>,
}

impl Succession {
    /// Keeps a copy of `socket`, the listening socket of `listener`.
    pub(crate) fn keep(&mut self, listener: &str, socket: BorrowedFd<'_>) -> std::io::Result<()> {
        self.sockets
            .push((listener.to_string(), socket.try_clone_to_owned()?));
        Ok(())
    }

    /// Sends the sockets on a thread; the outcome comes back on `tx`.
    pub(crate) fn start(&self, tx: &mpsc::UnboundedSender<Input>) {
        let failed = |tx: &mpsc::UnboundedSender<Input>, error: HandOverError| {
            logging::hand_over_failed(&error);
            let _ = tx.unbounded_send(Input::HandOverFinished(HandOverOutcome::Failed));
        };
        let Some(target) = self.target.clone() else {
            return failed(tx, HandOverError::NotConfigured);
        };
        let copies: std::io::Result<Vec<(String, OwnedFd)>> = self
            .sockets
            .iter()
            .map(|(name, fd)| Ok((name.clone(), fd.as_fd().try_clone_to_owned()?)))
            .collect();
        let copies = match copies {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => return failed(tx, HandOverError::NoSockets),
            Err(e) => return failed(tx, HandOverError::Io(e)),
        };
        logging::handing_over(target.path(), copies.len());
        let (thread_tx, successor) = (tx.clone(), Arc::clone(&self.successor));
        let spawned = std::thread::Builder::new()
            .name("lameduck-hand-over".into())
            .spawn(move || {
                let borrowed: Vec<(String, BorrowedFd<'_>)> = copies
                    .iter()
                    .map(|(name, fd)| (name.clone(), fd.as_fd()))
                    .collect();
                match send_listeners(&target, &borrowed) {
                    Ok(pid) => {
                        *successor.lock().unwrap_or_else(|p| p.into_inner()) = Some(pid);
                        let _ = thread_tx.unbounded_send(Input::HandOverFinished(
                            HandOverOutcome::SuccessorReady,
                        ));
                    }
                    Err(e) => failed(&thread_tx, e),
                }
            });
        if let Err(e) = spawned {
            failed(tx, HandOverError::Io(e));
        }
    }

    /// The successor's process id, once ready.
    pub(crate) fn successor(&self) -> Option<u32> {
        *self.successor.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the copies of the listening sockets.
    pub(crate) fn release_sockets(&mut self) {
        self.sockets.clear();
    }

    /// As a successor: tells the predecessor once `machine` is up (and systemd that this
    /// process is now the service's main process); gives up on it once termination started.
    pub(crate) fn tell_predecessor_when_up(&mut self, machine: &Machine) {
        if self.predecessor.is_none() {
            return;
        }
        if machine.is_up() {
            if let Some(predecessor) = self.predecessor.take() {
                notify_systemd(&[
                    sd_notify::NotifyState::MainPid(std::process::id()),
                    sd_notify::NotifyState::Ready,
                ]);
                logging::told_predecessor(&predecessor.report_ready());
            }
        } else if machine.has_fired(lameduck::LifecycleSignal::ShutdownInitiated) {
            // Dropped unanswered: the predecessor keeps serving.
            self.predecessor = None;
        }
    }
}

/// Sends `state` to systemd, when the process runs under it (`NOTIFY_SOCKET` is set).
pub(crate) fn notify_systemd(state: &[sd_notify::NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, state) {
        logging::systemd_notify_failed(&e);
    }
}
