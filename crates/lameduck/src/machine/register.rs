//! Registration: hooks, listeners, routes-ready reports and health checks, legal
//! while configuring; then `prepare`, which freezes them into the shared state.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::io::{HookId, HookKind, ListenerId, RegisterError, RoutesReadyId};
use super::{Hook, HookState, ListenerState, Machine, MachineStage, PendingCheck};
use crate::health::is_valid_check_name;
use crate::shared::{Check, CheckFn, CheckKind, EndpointSet, Shared};

fn id16(len: usize, what: &'static str) -> Result<u16, RegisterError> {
    u16::try_from(len).map_err(|_| RegisterError::TooMany { what })
}

impl Machine {
    fn check_configuring(&self, what: &'static str, name: &str) -> Result<(), RegisterError> {
        if self.stage() != MachineStage::Configuring {
            return Err(RegisterError::AlreadyPrepared {
                what,
                name: name.into(),
            });
        }
        if !is_valid_check_name(name) {
            return Err(RegisterError::InvalidName {
                what,
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Registers a hook of `kind` named `name`.
    pub fn add_hook(&mut self, kind: HookKind, name: &str) -> Result<HookId, RegisterError> {
        let what = kind.name();
        self.check_configuring(what, name)?;
        if self.hooks.iter().any(|h| h.kind == kind && h.name == name) {
            return Err(RegisterError::Duplicate {
                what,
                name: name.into(),
            });
        }
        if kind == HookKind::PostStart {
            self.check_name_free_for_check(&post_start_check_name(name), what)?;
        }
        let id = HookId(id16(self.hooks.len(), what)?);
        let post_start_slot = self
            .hooks
            .iter()
            .filter(|h| h.kind == HookKind::PostStart)
            .count();
        self.hooks.push(Hook {
            name: name.into(),
            kind,
            state: HookState::Registered,
            post_start_slot,
        });
        Ok(id)
    }

    fn check_name_free_for_check(
        &self,
        name: &str,
        what: &'static str,
    ) -> Result<(), RegisterError> {
        let taken = matches!(name, "ping" | "shutdown")
            || self.pending_checks.iter().any(|c| c.name == name)
            || self
                .hooks
                .iter()
                .any(|h| h.kind == HookKind::PostStart && post_start_check_name(&h.name) == name);
        if taken {
            return Err(RegisterError::Duplicate {
                what,
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Registers a listener (one server of this lifecycle). Legal while configuring and
    /// once prepared (servers are usually built from the prepared shared state), not after
    /// start.
    pub fn add_listener(&mut self, name: &str) -> Result<ListenerId, RegisterError> {
        if self.stage() == MachineStage::Prepared {
            if !is_valid_check_name(name) {
                return Err(RegisterError::InvalidName {
                    what: "listener",
                    name: name.into(),
                });
            }
        } else {
            self.check_configuring("listener", name)?;
        }
        if self.listener_names.iter().any(|n| n == name) {
            return Err(RegisterError::Duplicate {
                what: "listener",
                name: name.into(),
            });
        }
        let id = ListenerId(id16(self.listeners.len(), "listener")?);
        self.listener_names.push(name.into());
        self.listeners.push(ListenerState::default());
        Ok(id)
    }

    /// Registers a routes-ready report.
    pub fn add_routes_ready(&mut self, name: &str) -> Result<RoutesReadyId, RegisterError> {
        self.check_configuring("routes-ready report", name)?;
        if self.routes_ready_names.iter().any(|n| n == name) {
            return Err(RegisterError::Duplicate {
                what: "routes-ready report",
                name: name.into(),
            });
        }
        let id = RoutesReadyId(id16(self.routes_ready_names.len(), "routes-ready report")?);
        self.routes_ready_names.push(name.into());
        self.routes_ready_flags.push(false);
        Ok(id)
    }

    /// Registers a user health check on `endpoints`. Checks run in registration order, after
    /// `ping` and the post-start hook checks registered before them, and before `shutdown`.
    pub fn add_health_check(
        &mut self,
        name: &str,
        endpoints: EndpointSet,
        check: CheckFn,
    ) -> Result<(), RegisterError> {
        self.check_configuring("health check", name)?;
        self.check_name_free_for_check(name, "health check")?;
        self.pending_checks.push(PendingCheck {
            name: name.into(),
            endpoints,
            check,
        });
        Ok(())
    }

    /// Freezes the registrations and builds the shared state. Only called in
    /// `MachineStage::Configuring` (checked by `handle_input`, or by the typestate API's types).
    pub(crate) fn prepare(&mut self) -> Arc<Shared> {
        // Check order as kube-apiserver: ping, post-start hooks and user checks in
        // registration order, then `shutdown` (readyz only) last.
        let mut checks = Vec::with_capacity(self.pending_checks.len() + self.hooks.len() + 2);
        checks.push(Check {
            name: "ping".into(),
            endpoints: EndpointSet::ALL,
            kind: CheckKind::Ping,
        });
        for h in self.hooks.iter().filter(|h| h.kind == HookKind::PostStart) {
            checks.push(Check {
                name: post_start_check_name(&h.name),
                endpoints: EndpointSet::ALL,
                kind: CheckKind::PostStartHook {
                    slot: h.post_start_slot,
                },
            });
        }
        for c in self.pending_checks.drain(..) {
            checks.push(Check {
                name: c.name,
                endpoints: c.endpoints,
                kind: CheckKind::User(c.check),
            });
        }
        checks.push(Check {
            name: "shutdown".into(),
            endpoints: EndpointSet::READYZ,
            kind: CheckKind::Shutdown,
        });
        let post_start = self
            .hooks
            .iter()
            .filter(|h| h.kind == HookKind::PostStart)
            .count();
        let shared = Arc::new(Shared::new(self.config.clone(), checks, post_start));
        self.shared = Some(Arc::clone(&shared));
        shared
    }
}

fn post_start_check_name(hook: &str) -> String {
    let mut s = String::from("poststarthook/");
    s.push_str(hook);
    s
}
