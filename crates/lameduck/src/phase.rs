//! Where a lifecycle is: [`Phase`], the one answer every reader gets, computed in one place
//! ([`Shared::phase`](crate::Shared::phase); [`Machine::phase`](crate::Machine::phase) and
//! the adapters' handles return it).
//!
//! # The mapping
//!
//! Each phase, the typestate type of [`Lifecycle`](crate::Lifecycle) that stands for it
//! ([`Configuring`](crate::Configuring), [`Prepared`](crate::Prepared) or
//! [`Running`](crate::Running), the [`Stage`](crate::lifecycle::Stage)s), and what marks it:
//!
//! | Phase | typestate type | marked by |
//! |---|---|---|
//! | `Configuring` | `Configuring` | no shared state yet |
//! | `Prepared` | `Prepared` | prepared (registrations frozen), not started |
//! | `Starting` | `Running` | started; not every listener has served |
//! | `Serving` | `Running` | every listener served once (`Event::NotifyReady`) |
//! | `LameDuck` | `Running` | `ShutdownInitiated` fired |
//! | `Draining` | `Running` | `NotAcceptingNewRequest` fired |
//! | `Stopping` | `Running` | `InFlightRequestsDrained` and `HTTPServerStoppedListening` fired |
//! | `Exited` | `Running`, once its machine exits | an exit was decided (`Event::Exit`) |
//!
//! A type's [`Stage::PHASE`](crate::lifecycle::Stage::PHASE) is the first of its phases,
//! and [`Lifecycle::try_from_machine`](crate::Lifecycle::try_from_machine) accepts a machine
//! in any of them but `Exited`.
//!
//! Inside the crate, the phase is read from two things only: the signals fired, and what the
//! machine records of its progress besides them (started, every listener served, exited),
//! both in [`Shared`](crate::Shared). The coarser stage that decides which registrations and
//! inputs are legal is derived from the phase, never stored.

/// Where a lifecycle is. See the [module docs](self) for what marks each phase and which
/// typestate type stands for it.
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
    pub(crate) const fn stage(self) -> MachineStage {
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

/// The machine's coarse stage: which registrations and inputs are legal. Derived from the
/// [`Phase`] ([`Phase::stage`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MachineStage {
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

/// What the machine records of its progress besides the signals: one bit each, set once and
/// never cleared, in one atomic of [`Shared`](crate::Shared). None set: prepared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Progress {
    /// Started.
    Started = 1,
    /// Every listener served once (the machine said `NotifyReady`).
    Serving = 2,
    /// The exit was decided.
    Exited = 4,
}

impl Progress {
    /// The bit of this step.
    pub(crate) const fn bit(self) -> u8 {
        self as u8
    }
}

#[cfg(all(test, feature = "testing", not(loom)))]
mod tests;
