//! The typestate API: configure, then prepare, then run. Misuse does not compile.
//!
//! [`Lifecycle<S>`] is a thin veneer over the runtime-checked [`Machine`]: the stage `S` is a
//! type, so the transitions that [`Machine::handle_input`] would reject at run time are
//! simply not there to call. Each stage type stands for one or more [`Phase`]s (the first
//! in [`Stage::PHASE`]; the [`phase`](crate::phase) module maps them all), and
//! [`Lifecycle::try_from_machine`] converts back from a machine in one of them.
//!
//! ```
//! use lameduck::{Config, Instant, Lifecycle};
//!
//! let mut cfg = Lifecycle::new(Config::default());
//! let flush = cfg.add_pre_shutdown_hook("flush-cache")?;
//! let lifecycle = cfg.prepare().start(Instant::ZERO);
//! assert_eq!(lifecycle.machine().hook_name(flush), Some("flush-cache"));
//! # Ok::<(), lameduck::machine::RegisterError>(())
//! ```
//!
//! Running before preparing does not compile:
//!
//! ```compile_fail,E0599
//! use lameduck::{Config, Instant, Lifecycle};
//! let running = Lifecycle::new(Config::default()).start(Instant::ZERO);
//! ```
//!
//! Registering a pre-shutdown hook after start does not compile:
//!
//! ```compile_fail,E0599
//! use lameduck::{Config, Instant, Lifecycle};
//! let mut running = Lifecycle::new(Config::default()).prepare().start(Instant::ZERO);
//! running.add_pre_shutdown_hook("too-late");
//! ```
//!
//! Nor does registering one after prepare:
//!
//! ```compile_fail,E0599
//! use lameduck::{Config, Lifecycle};
//! let mut prepared = Lifecycle::new(Config::default()).prepare();
//! prepared.add_pre_shutdown_hook("too-late");
//! ```
//!
//! Preparing twice does not compile:
//!
//! ```compile_fail,E0599
//! use lameduck::{Config, Lifecycle};
//! let prepared = Lifecycle::new(Config::default()).prepare();
//! let again = prepared.prepare();
//! ```
//!
//! Nor does using the configuring value after preparing it:
//!
//! ```compile_fail,E0382
//! use lameduck::{Config, Lifecycle};
//! let cfg = Lifecycle::new(Config::default());
//! let prepared = cfg.prepare();
//! let again = cfg.prepare();
//! ```

use alloc::sync::Arc;
use core::fmt;
use core::marker::PhantomData;

use crate::config::Config;
use crate::machine::{
    Event, HookId, HookKind, Input, InputError, ListenerId, Machine, RegisterError, RoutesReadyId,
    StopSource,
};
use crate::phase::Phase;
use crate::shared::{CheckFn, EndpointSet, Shared};
use crate::time::Instant;

mod sealed {
    use crate::machine::Machine;

    /// Seals [`Stage`](super::Stage), and holds what only the typestate API needs.
    pub trait Sealed {
        /// What a lifecycle holds at this stage besides the machine.
        type Data;
        /// That, from a machine at this stage.
        fn data(machine: &Machine) -> Option<Self::Data>;
    }
}

/// A type-level stage of a [`Lifecycle`]: [`Configuring`], [`Prepared`] or [`Running`].
/// Each stands for phases of the lifecycle ([`Phase`]): `Configuring` and `Prepared` for
/// the phases of their names, `Running` for every phase from [`Phase::Starting`] on (the
/// [`phase`](crate::phase) module has the table).
pub trait Stage: sealed::Sealed {
    /// The phase a lifecycle of this type starts in (for [`Running`], the first of its
    /// phases).
    const PHASE: Phase;
}

/// Registering hooks, listeners and checks.
#[derive(Debug)]
pub enum Configuring {}
/// Prepared: registrations frozen, health checks installed, not started.
#[derive(Debug)]
pub enum Prepared {}
/// Running: feed inputs, drain events.
#[derive(Debug)]
pub enum Running {}

impl sealed::Sealed for Configuring {
    type Data = ();
    fn data(_: &Machine) -> Option<()> {
        Some(())
    }
}
impl sealed::Sealed for Prepared {
    type Data = Arc<Shared>;
    fn data(machine: &Machine) -> Option<Arc<Shared>> {
        machine.shared().cloned()
    }
}
impl sealed::Sealed for Running {
    type Data = Arc<Shared>;
    fn data(machine: &Machine) -> Option<Arc<Shared>> {
        machine.shared().cloned()
    }
}
impl Stage for Configuring {
    const PHASE: Phase = Phase::Configuring;
}
impl Stage for Prepared {
    const PHASE: Phase = Phase::Prepared;
}
impl Stage for Running {
    /// The first running phase; a running lifecycle moves on through the later ones.
    const PHASE: Phase = Phase::Starting;
}

/// A lifecycle at stage `S`. See the [module docs](self).
pub struct Lifecycle<S: Stage> {
    machine: Machine,
    data: S::Data,
    _stage: PhantomData<S>,
}

impl<S: Stage> fmt::Debug for Lifecycle<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lifecycle")
            .field("machine", &self.machine)
            .finish()
    }
}

impl<S: Stage> Lifecycle<S> {
    fn wrap(machine: Machine, data: S::Data) -> Self {
        Lifecycle {
            machine,
            data,
            _stage: PhantomData,
        }
    }

    /// The runtime machine underneath, for reading.
    #[must_use]
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Gives up the type-level checks: the runtime-checked machine.
    #[must_use]
    pub fn into_machine(self) -> Machine {
        self.machine
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        self.machine.config()
    }

    /// Wraps a machine in a phase this type stands for ([`Stage`]); gives it back otherwise.
    ///
    /// For [`Running`], any phase from [`Phase::Starting`] up to (not including)
    /// [`Phase::Exited`] matches.
    // The machine is handed back by value on mismatch so the caller keeps it; it is moved
    // once, not on a hot path, so its size does not matter here.
    #[allow(clippy::result_large_err)]
    pub fn try_from_machine(machine: Machine) -> Result<Self, Machine> {
        match S::data(&machine) {
            Some(data) if machine.stage() == S::PHASE.stage() => Ok(Self::wrap(machine, data)),
            _ => Err(machine),
        }
    }
}

impl Lifecycle<Configuring> {
    /// A new lifecycle.
    #[must_use]
    pub fn new(config: Config) -> Self {
        Self::wrap(Machine::new(config), ())
    }

    /// Registers a pre-shutdown hook (runs from `ShutdownInitiated`, concurrently with the
    /// shutdown delay; `NotAcceptingNewRequest` waits for it).
    pub fn add_pre_shutdown_hook(&mut self, name: &str) -> Result<HookId, RegisterError> {
        self.machine.add_hook(HookKind::PreShutdown, name)
    }

    /// Registers a post-start hook (runs once every listener serves; adds the health check
    /// `poststarthook/<name>`).
    pub fn add_post_start_hook(&mut self, name: &str) -> Result<HookId, RegisterError> {
        self.machine.add_hook(HookKind::PostStart, name)
    }

    /// Registers an after-drain hook (runs after `InFlightRequestsDrained`; exit waits for it).
    pub fn add_after_drain_hook(&mut self, name: &str) -> Result<HookId, RegisterError> {
        self.machine.add_hook(HookKind::AfterDrain, name)
    }

    /// Registers a destroy hook (runs once on every exit path).
    pub fn add_destroy_hook(&mut self, name: &str) -> Result<HookId, RegisterError> {
        self.machine.add_hook(HookKind::Destroy, name)
    }

    /// Registers a listener; the lifecycle exits when every listener's server has stopped.
    pub fn add_listener(&mut self, name: &str) -> Result<ListenerId, RegisterError> {
        self.machine.add_listener(name)
    }

    /// Registers a routes-ready report.
    pub fn add_routes_ready(&mut self, name: &str) -> Result<RoutesReadyId, RegisterError> {
        self.machine.add_routes_ready(name)
    }

    /// Registers a user health check.
    pub fn add_health_check(
        &mut self,
        name: &str,
        endpoints: EndpointSet,
        check: CheckFn,
    ) -> Result<(), RegisterError> {
        self.machine.add_health_check(name, endpoints, check)
    }

    /// Freezes the registrations and installs the health checks.
    #[must_use]
    pub fn prepare(mut self) -> Lifecycle<Prepared> {
        let shared = self.machine.prepare();
        Lifecycle::wrap(self.machine, shared)
    }
}

impl Lifecycle<Prepared> {
    /// The shared state: hand it to request handlers before starting.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.data
    }

    /// Registers a listener; servers are usually built once the shared state exists, so
    /// listeners may still be added here, before start.
    pub fn add_listener(&mut self, name: &str) -> Result<ListenerId, RegisterError> {
        self.machine.add_listener(name)
    }

    /// Starts running at `now`.
    #[must_use]
    pub fn start(mut self, now: Instant) -> Lifecycle<Running> {
        self.machine.start(now);
        Lifecycle::wrap(self.machine, self.data)
    }
}

impl Lifecycle<Running> {
    /// The shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.data
    }

    /// See [`Machine::handle_input`].
    pub fn handle_input(&mut self, input: Input, now: Instant) -> Result<(), InputError> {
        self.machine.handle_input(input, now)
    }

    /// Requests termination (see [`StopSource`]).
    pub fn request_stop(&mut self, source: StopSource, now: Instant) -> Result<(), InputError> {
        self.machine.handle_input(Input::StopRequested(source), now)
    }

    /// See [`Machine::handle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now);
    }

    /// See [`Machine::poll_event`].
    #[must_use = "events must be acted on"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.machine.poll_event()
    }

    /// See [`Machine::poll_timeout`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    /// The current phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.machine.phase()
    }
}
