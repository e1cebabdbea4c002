//! The process-wide SIGTERM/SIGINT (terminate) and SIGUSR2 (hand over) handling: installed once per process (a second server
//! gets [`ServeError::OsSignalsAlreadyInstalled`]), at prepare time so that a signal is caught
//! even before the server runs, and forwarded to the run loop as [`Input::StopRequested`]
//! or [`Input::HandOverRequested`].

use std::sync::atomic::{AtomicBool, Ordering};

use futures_channel::mpsc;
use futures_util::StreamExt;
use lameduck::machine::StopSource;
use lameduck::Input;

use crate::error::ServeError;
use crate::logging;
use crate::runtime::{OsSignal, Runtime};

/// Whether a server of this process holds the signal handlers.
static OS_SIGNALS_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Clears [`OS_SIGNALS_INSTALLED`] when the server that set it ends.
pub(crate) struct OsSignalsInstalled;

impl Drop for OsSignalsInstalled {
    fn drop(&mut self) {
        OS_SIGNALS_INSTALLED.store(false, Ordering::Release);
    }
}

/// The process's signal handlers, installed at prepare time.
pub(crate) struct InstalledOsSignals<R: Runtime> {
    guard: OsSignalsInstalled,
    stream: R::OsSignals,
}

/// Installs the handlers, unless a server of this process already did.
pub(crate) fn install<R: Runtime>(runtime: &R) -> Result<InstalledOsSignals<R>, ServeError> {
    if OS_SIGNALS_INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(ServeError::OsSignalsAlreadyInstalled);
    }
    let guard = OsSignalsInstalled;
    let stream = runtime.os_signals().map_err(ServeError::OsSignals)?;
    Ok(InstalledOsSignals { guard, stream })
}

impl<R: Runtime> InstalledOsSignals<R> {
    /// Forwards every delivery to the run loop (a second one forces the exit: the machine
    /// decides). Returns the guard to hold while the server runs.
    pub(crate) fn forward(
        self,
        runtime: &R,
        tx: mpsc::UnboundedSender<Input>,
    ) -> OsSignalsInstalled {
        let InstalledOsSignals { guard, mut stream } = self;
        runtime.spawn(async move {
            while let Some(signal) = stream.next().await {
                let input = if signal == OsSignal::HandOver {
                    logging::hand_over_requested(Some(signal));
                    Input::HandOverRequested
                } else {
                    logging::received_os_signal(signal);
                    Input::StopRequested(StopSource::OsSignal)
                };
                if tx.unbounded_send(input).is_err() {
                    break;
                }
            }
        });
        guard
    }
}
