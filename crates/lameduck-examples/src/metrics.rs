//! The example servers' metrics: `metrics-exporter-prometheus` installed as the global
//! recorder of the `metrics` facade, and its text exposition rendered at `/metrics` after
//! lameduck has recorded the lifecycle's current state (`lameduck::metrics::record_state`).

use std::sync::OnceLock;

use lameduck::Shared;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder (once per process; later calls do nothing) and describes
/// lameduck's series. Call it before the lifecycle starts, so that no event is missed.
pub fn install() {
    HANDLE.get_or_init(|| match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => {
            lameduck::metrics::describe();
            Some(handle)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot install the Prometheus recorder; /metrics will be empty");
            None
        }
    });
}

/// The text exposition of every series, with lameduck's state as of now (`shared`). Installs
/// the recorder first if [`install`] was not called.
#[must_use]
pub fn render(shared: &Shared) -> String {
    install();
    lameduck::metrics::record_state(shared);
    match HANDLE.get() {
        Some(Some(handle)) => {
            handle.run_upkeep();
            handle.render()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_exposition() {
        use lameduck::LifecycleSignal;
        let mut lc = lameduck::Lifecycle::new(lameduck::Config::default());
        lc.add_listener("api").unwrap();
        let prepared = lc.prepare();
        let shared = std::sync::Arc::clone(prepared.shared());
        let text = render(&shared);
        for line in [
            "lameduck_in_flight_requests{class=\"normal\"} 0",
            "lameduck_in_flight_requests{class=\"long_running\"} 0",
            "lameduck_phase{phase=\"prepared\"} 1",
            "lameduck_phase{phase=\"serving\"} 0",
            "lameduck_rejected_requests_total{reason=\"retry_after\"} 0",
            "lameduck_requests_served_after_close_total 0",
            "lameduck_termination_budget_seconds 60",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        for signal in LifecycleSignal::ALL {
            let line = format!("lameduck_signal_fired{{signal=\"{}\"}} 0", signal.name());
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(text.contains("# TYPE lameduck_rejected_requests_total counter"));
        assert!(text.contains("# HELP lameduck_phase "));
    }
}
