//! Where a lifecycle is: one enum, computed in one place ([`Shared::phase`](crate::Shared::phase)).

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
