//! Random registrations and configuration for property tests and fuzzers.

use core::time::Duration;

use super::Simulator;
use crate::config::Config;
use crate::machine::{HookKind, InputError};

/// A random configuration and registrations for property tests and fuzzers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Setup {
    /// Shutdown delay in 100 ms units.
    pub delay_tenths: u8,
    /// Watch grace in 100 ms units.
    pub grace_tenths: u8,
    /// Request timeout in 100 ms units (0: none).
    pub request_timeout_tenths: u8,
    /// Mode B.
    pub send_retry_after: bool,
    /// Pre-shutdown, post-start, after-drain and destroy hooks (each modulo 4).
    pub hooks: [u8; 4],
    /// Extra listeners besides `api` (modulo 3).
    pub extra_listeners: u8,
    /// Readiness-of-routes signals (modulo 3).
    pub mux_signals: u8,
}

impl Setup {
    /// The configuration.
    #[must_use]
    pub fn config(&self) -> Config {
        let tenths = |t: u8| Duration::from_millis(u64::from(t) * 100);
        Config::builder()
            .shutdown_delay(tenths(self.delay_tenths))
            .shutdown_watch_termination_grace_period(tenths(self.grace_tenths))
            .request_timeout(tenths(self.request_timeout_tenths))
            .shutdown_send_retry_after(self.send_retry_after)
            .build()
            .unwrap_or_default()
    }

    /// A serving simulator with these registrations.
    pub fn simulator(&self) -> Result<Simulator, InputError> {
        let kinds = [
            HookKind::PreShutdown,
            HookKind::PostStart,
            HookKind::AfterDrain,
            HookKind::Destroy,
        ];
        let hooks = self.hooks;
        let (extra, mux) = (self.extra_listeners % 3, self.mux_signals % 3);
        Simulator::serving(self.config(), |m| {
            for (kind, n) in kinds.into_iter().zip(hooks) {
                for i in 0..n % 4 {
                    let _ = m.add_hook(kind, HOOK_NAMES[usize::from(i)]);
                }
            }
            for i in 0..extra {
                let _ = m.add_listener(HOOK_NAMES[usize::from(i)]);
            }
            for i in 0..mux {
                let _ = m.add_mux_signal(HOOK_NAMES[usize::from(i)]);
            }
        })
    }
}

const HOOK_NAMES: [&str; 4] = ["a", "b", "c", "d"];
