//! `--kubernetes`: a Deployment whose probes, flags and `terminationGracePeriodSeconds` match
//! the plan.

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::duration::GoDuration;
use lameduck::plan::{ceil_seconds, Plan, PlanInput, DEFAULT_TERMINATION_GRACE_PERIOD};

/// `terminationGracePeriodSeconds` for the snippet: the suggestion (worst case rounded up plus
/// the margin), or the given budget when that is larger. Without a bound on the total, the
/// given budget or Kubernetes' default.
pub fn grace_period_seconds(plan: &Plan) -> u64 {
    let given = plan.termination_grace_period.map(ceil_seconds);
    match (plan.suggested_termination_grace_period, given) {
        (Some(s), Some(g)) => s.as_secs().max(g),
        (Some(s), None) => s.as_secs(),
        (None, Some(g)) => g,
        (None, None) => DEFAULT_TERMINATION_GRACE_PERIOD.as_secs(),
    }
}

/// Whole seconds (at least 1, as Kubernetes requires), and a comment when rounded.
fn k8s_seconds(d: Duration) -> (u64, String) {
    let s = ceil_seconds(d).max(1);
    if Duration::from_secs(s) == d {
        (s, String::new())
    } else {
        (s, format!("  # rounded up from {}", GoDuration(d)))
    }
}

/// The YAML document, with the verdict as comments at the top.
pub fn render(input: &PlanInput, plan: &Plan, verdict: &str) -> String {
    let probes = &input.probes;
    let config = &input.config;
    let mut s = String::new();
    let _ = writeln!(s, "# lameduck plan: {verdict}");
    for problem in &plan.problems {
        let _ = writeln!(s, "#   - {problem}");
    }
    let total = match plan.total_worst_case {
        Some(t) => format!("worst-case termination {}", GoDuration(t)),
        None => String::from("the drain has no bound (--request-timeout 0)"),
    };
    let grace = grace_period_seconds(plan);
    let (period, period_note) = k8s_seconds(probes.interval);
    let (timeout, timeout_note) = k8s_seconds(probes.timeout);
    let _ = writeln!(
        s,
        "# The readiness probe matches the load balancer's settings; if your load balancer probes
# /readyz itself, configure it the same way. Replace the names, the image and the port.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-service
spec:
  selector:
    matchLabels:
      app: my-service
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        app: my-service
    spec:
      # {total}, rounded up, plus 5s
      terminationGracePeriodSeconds: {grace}
      containers:
        - name: my-service
          image: my-service:latest
          args:
            - --shutdown-delay={delay}
            - --request-timeout={rt}
            - --shutdown-watch-termination-grace-period={watch}{mode_b}
          ports:
            - name: http
              containerPort: 8080
          # /readyz turns red at SIGTERM; out of service after at most {t}
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: {period}{period_note}
            timeoutSeconds: {timeout}{timeout_note}
            failureThreshold: {threshold}
            successThreshold: 1
          # /livez stays 200 during the whole termination
          livenessProbe:
            httpGet:
              path: /livez
              port: http
            periodSeconds: {period}
            timeoutSeconds: {timeout}
            failureThreshold: 3",
        delay = GoDuration(config.shutdown_delay()),
        rt = GoDuration(config.request_timeout()),
        watch = GoDuration(config.shutdown_watch_termination_grace_period()),
        mode_b = if config.shutdown_send_retry_after() {
            "\n            - --shutdown-send-retry-after"
        } else {
            ""
        },
        t = GoDuration(plan.detection_worst_case),
        threshold = probes.unhealthy_threshold,
    );
    s
}
