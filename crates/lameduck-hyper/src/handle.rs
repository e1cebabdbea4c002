//! The handle to a server: request its termination and observe it from elsewhere.

use std::fmt;
use std::sync::Arc;

use futures_channel::mpsc;
use lameduck::machine::{RoutesReadyId, StopSource};
use lameduck::{Input, LifecycleSignal, Phase, Shared};

use crate::logging;

/// Controls a server from elsewhere: request termination, read its state.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Input>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>, tx: mpsc::UnboundedSender<Input>) -> Self {
        Handle { shared, tx }
    }

    /// Starts a graceful termination from code. Returns `false` when the server is gone.
    /// Repeating it changes nothing (only a second OS signal forces exit).
    pub fn request_shutdown(&self) -> bool {
        self.send(Input::StopRequested(StopSource::Api))
    }

    /// Delivers an OS-signal-like stop (a second one forces exit 1), for embedders that own
    /// signal handling.
    pub fn deliver_os_signal(&self) -> bool {
        self.send(Input::StopRequested(StopSource::OsSignal))
    }

    /// Hands the listening sockets to a successor process, as SIGUSR2 does (see
    /// [`crate::sockets::hand_over`]); needs [`Server::hand_over_to`](crate::Server::hand_over_to).
    /// The outcome is logged: on success the server terminates gracefully, otherwise it keeps
    /// serving.
    pub fn hand_over(&self) -> bool {
        logging::hand_over_requested(None);
        self.send(Input::HandOverRequested)
    }

    /// Reports that the routes registered as `id` with
    /// [`Builder::routes_ready`](crate::Builder::routes_ready) are ready (idempotent).
    pub fn report_routes_ready(&self, id: RoutesReadyId) -> bool {
        self.send(Input::RoutesReady(id))
    }

    fn send(&self, input: Input) -> bool {
        self.tx.unbounded_send(input).is_ok()
    }

    /// The lifecycle's shared state: signals, gate counts, health.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// What the server saw of its load balancer so far: new connections and requests after
    /// the signal, the late ones, and requests before ready ([`lameduck::shared::counters::ArrivalCounts`]).
    #[must_use]
    pub fn arrivals(&self) -> lameduck::shared::counters::ArrivalCounts {
        self.shared.counters().arrivals()
    }

    /// Requests in flight, normal and long-running.
    #[must_use]
    pub fn in_flight(&self) -> lameduck::gate::InFlight {
        self.shared.gate().in_flight()
    }

    /// Resolves when `signal` fires.
    pub fn signal_fired(&self, signal: LifecycleSignal) -> lameduck::LifecycleSignalFired {
        self.shared.signal_fired(signal)
    }

    /// The lifecycle's phase: the core's one phase function ([`Shared::phase`]), the same
    /// the driver's machine reports.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.shared.phase()
    }
}
