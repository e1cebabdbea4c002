//! Configuring a server: hooks, health checks, routes-ready reports and OS-signal
//! handling, frozen by [`Builder::prepare`].

use std::collections::HashMap;
use std::fmt;
use std::future::Future;

use lameduck::machine::{HookKind, RegisterError, RoutesReadyId};
use lameduck::shared::EndpointSet;
use lameduck::{Config, Configuring, Lifecycle};

use crate::error::BoxError;
use crate::run::hooks::{HookFn, Hooks};
use crate::run::os_signals;
use crate::runtime::{BoxFuture, Runtime};
use crate::server::Server;

/// A hook: an async function run once, returning `Ok` or an error. Implemented for every
/// `FnOnce() -> impl Future<Output = Result<(), E>>` with `E: Into<BoxError>`.
pub trait Hook: Send + 'static {
    /// Boxes the hook.
    fn into_boxed(self) -> Box<dyn FnOnce() -> BoxFuture<Result<(), BoxError>> + Send>;
}

impl<F, Fut, E> Hook for F
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    fn into_boxed(self) -> HookFn {
        Box::new(move || Box::pin(async move { self().await.map_err(Into::into) }))
    }
}

/// Configures hooks and checks before the server is prepared.
pub struct Builder<R: Runtime> {
    lifecycle: Lifecycle<Configuring>,
    runtime: R,
    hooks: Hooks,
    handle_os_signals: bool,
}

impl<R: Runtime> fmt::Debug for Builder<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").finish_non_exhaustive()
    }
}

impl<R: Runtime> Builder<R> {
    /// A builder for `config` on `runtime`.
    pub fn new(config: Config, runtime: R) -> Self {
        Builder {
            lifecycle: Lifecycle::new(config),
            runtime,
            hooks: HashMap::new(),
            handle_os_signals: true,
        }
    }

    /// Adds a hook of `kind`; the methods below name each kind.
    pub fn hook(
        &mut self,
        kind: HookKind,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        let id = match kind {
            HookKind::PreShutdown => self.lifecycle.add_pre_shutdown_hook(name)?,
            HookKind::PostStart => self.lifecycle.add_post_start_hook(name)?,
            HookKind::AfterDrain => self.lifecycle.add_after_drain_hook(name)?,
            HookKind::Destroy => self.lifecycle.add_destroy_hook(name)?,
        };
        self.hooks.insert(id, f.into_boxed());
        Ok(self)
    }

    /// Adds a pre-shutdown hook: runs from `ShutdownInitiated`, concurrently with the delay
    /// and the other pre-shutdown hooks; `NotAcceptingNewRequest` waits for it. A failure
    /// or panic is logged with the hook's name and makes the exit code 1, after the drain.
    pub fn pre_shutdown_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::PreShutdown, name, f)
    }

    /// Adds a post-start hook: runs once every listener serves; the health check
    /// `poststarthook/<name>` fails until it returns. A failure starts a graceful
    /// termination that exits 1.
    pub fn post_start_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::PostStart, name, f)
    }

    /// Adds an after-drain hook (flush logs, traces, exporters): runs after
    /// `InFlightRequestsDrained`; the exit waits for it.
    pub fn after_drain_hook(
        &mut self,
        name: &str,
        f: impl Hook,
    ) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::AfterDrain, name, f)
    }

    /// Adds a destroy hook: runs once on every exit path but the second stop signal (which
    /// exits at once), one after the other in registration order, for at most
    /// [`DESTROY_HOOKS_TIMEOUT`](lameduck::machine::DESTROY_HOOKS_TIMEOUT) in all.
    pub fn destroy_hook(&mut self, name: &str, f: impl Hook) -> Result<&mut Self, RegisterError> {
        self.hook(HookKind::Destroy, name, f)
    }

    /// Registers a routes-ready report: `MuxAndDiscoveryComplete` fires once every
    /// registered one has come in with [`Handle::report_routes_ready`]; until then the
    /// admission layer answers paths your service does not know (404) with 503
    /// `Retry-After: 5`.
    ///
    /// [`Handle::report_routes_ready`]: crate::Handle::report_routes_ready
    pub fn routes_ready(&mut self, name: &str) -> Result<RoutesReadyId, RegisterError> {
        self.lifecycle.add_routes_ready(name)
    }

    /// Adds a health check on `endpoints`.
    pub fn health_check(
        &mut self,
        name: &str,
        endpoints: EndpointSet,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<&mut Self, RegisterError> {
        self.lifecycle
            .add_health_check(name, endpoints, Box::new(check))?;
        Ok(self)
    }

    /// Leaves SIGTERM/SIGINT alone, for embedders who own signals; terminate through
    /// [`Handle::request_shutdown`].
    ///
    /// [`Handle::request_shutdown`]: crate::Handle::request_shutdown
    pub fn without_os_signals(&mut self) -> &mut Self {
        self.handle_os_signals = false;
        self
    }

    /// Freezes hooks and checks, and (unless [`Builder::without_os_signals`]) installs the
    /// SIGTERM/SIGINT handlers, so a signal is caught from here on even before
    /// [`Server::run`] (print your "listening" line after this). Call it inside the runtime.
    /// Listeners are added to the prepared server.
    #[must_use]
    pub fn prepare(self) -> Server<R> {
        let os_signals = self
            .handle_os_signals
            .then(|| os_signals::install(&self.runtime));
        Server::new(
            self.lifecycle.prepare(),
            self.runtime,
            self.hooks,
            os_signals,
        )
    }
}
