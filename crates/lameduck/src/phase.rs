//! Where a lifecycle is: one enum, computed in one place ([`Shared::phase`](crate::Shared::phase)),
//! and the coarse [`MachineStage`] it belongs to.

/// Where a lifecycle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Registering hooks, listeners, checks.
    Configuring,
    /// Prepared; health checks frozen; not started.
    Prepared,
    /// Started, waiting for every listener to serve.
    Starting,
    /// Serving; `/readyz` can pass.
    Serving,
    /// From `ShutdownInitiated` to `NotAcceptingNewRequest`: `/readyz` fails, requests are
    /// served normally (the lame-duck window and the pre-shutdown hooks).
    LameDuck,
    /// From `NotAcceptingNewRequest` until requests drained and the listeners stopped.
    Draining,
    /// Drained and stopped; waiting for the servers and after-drain hooks.
    Stopping,
    /// An exit code was decided; nothing more happens.
    Exited,
}

impl Phase {
    /// The coarse stage this phase belongs to.
    #[must_use]
    pub const fn stage(self) -> MachineStage {
        match self {
            Phase::Configuring => MachineStage::Configuring,
            Phase::Prepared => MachineStage::Prepared,
            Phase::Starting
            | Phase::Serving
            | Phase::LameDuck
            | Phase::Draining
            | Phase::Stopping => MachineStage::Running,
            Phase::Exited => MachineStage::Exited,
        }
    }
}

/// The machine's coarse stage: which registrations and inputs are legal. Each stage of
/// the typestate API names its twin here in
/// [`lifecycle::Stage::STAGE`](crate::lifecycle::Stage::STAGE); the finer [`Phase`] says
/// where a running lifecycle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MachineStage {
    /// Registering hooks, listeners, checks ([`Phase::Configuring`]).
    Configuring,
    /// Registrations frozen, not started ([`Phase::Prepared`]); listeners may still be added.
    Prepared,
    /// Started: inputs are handled and time passes ([`Phase::Starting`] to
    /// [`Phase::Stopping`]).
    Running,
    /// An exit was decided ([`Phase::Exited`]); every input is refused.
    Exited,
}
