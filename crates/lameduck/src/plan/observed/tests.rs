use super::*;
use crate::config::Config;
use crate::plan::{plan, PlanInput, ProbeSettings};
use alloc::format;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn line(lame_duck: &str, arrivals: &str) -> String {
    format!(
        "2026-11-27T05:07:33.916Z INFO lameduck_hyper::server: [graceful-termination] \
         termination summary: cause=signal signal_to_exit=3.503s lame_duck={lame_duck} \
         normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 \
         streams_ended=0 streams_remaining=0 rejected=4 rejected_not_accepting=0 \
         rejected_retry_after=4 rejected_request_timeout=0 rejected_routes_not_ready=0 \
         {arrivals} code=0"
    )
}

fn arrivals(last: &str, late: u64) -> String {
    format!(
        "last_new_connection={last} last_new_request=1.950s late_connections={late} \
         late_requests=5 requests_before_ready=0"
    )
}

fn termination(lame_duck: u64, last: Option<u64>, late: u64) -> ObservedTermination {
    ObservedTermination {
        lame_duck: Some(ms(lame_duck)),
        arrivals: Some(ArrivalCounts {
            last_new_connection: last.map(ms),
            last_new_request: None,
            late_connections: late,
            late_requests: 0,
            ..ArrivalCounts::default()
        }),
    }
}

#[test]
fn lines_are_read_or_refused() {
    let t = ObservedTermination::parse_line(&line("2.000s", &arrivals("1.900s", 3)))
        .unwrap()
        .unwrap();
    assert_eq!(t.lame_duck, Some(ms(2000)));
    let a = t.arrivals.unwrap();
    assert_eq!(a.last_new_connection, Some(ms(1900)));
    assert_eq!((a.late_connections, a.late_requests), (3, 5));
    // Another log line.
    assert_eq!(
        ObservedTermination::parse_line("INFO listening on 0.0.0.0:8080"),
        Ok(None)
    );
    // An old line: no arrival fields.
    let old = ObservedTermination::parse_line(&line("2.000s", "")).unwrap();
    assert_eq!(old.unwrap().arrivals, None);
    // Malformed lines name the field.
    let missing = line("2.000s", &arrivals("1.900s", 0)).replace("streams_ended=0 ", "");
    assert_eq!(
        ObservedTermination::parse_line(&missing),
        Err(MalformedSummary::MissingField(String::from(
            "streams_ended"
        )))
    );
    let cut = &line("2.000s", "")[..150];
    assert!(matches!(
        ObservedTermination::parse_line(cut),
        Err(MalformedSummary::MissingField(_))
    ));
    let bad = line("2s", &arrivals("1.900s", 0));
    assert_eq!(
        ObservedTermination::parse_line(&bad),
        Err(MalformedSummary::InvalidValue {
            field: String::from("lame_duck"),
            value: String::from("2s")
        })
    );
    let bad =
        line("2.000s", &arrivals("1.900s", 0)).replace("late_connections=0", "late_connections=x");
    assert!(matches!(
        ObservedTermination::parse_line(&bad),
        Err(MalformedSummary::InvalidValue { field, .. }) if field == "late_connections"
    ));
    let total = line("2.000s", "").replace("rejected=4", "rejected=5");
    assert_eq!(
        ObservedTermination::parse_line(&total),
        Err(MalformedSummary::RejectedTotal)
    );
    let huge = line("2.000s", "").replace("code=0", &format!("code={}", "9".repeat(10_000)));
    match ObservedTermination::parse_line(&huge) {
        Err(MalformedSummary::InvalidValue { field, value }) => {
            assert_eq!(field, "code");
            assert_eq!(value.len(), QUOTED_VALUE_CHARS);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn figures_add_up_and_merge() {
    let a = termination(2000, Some(1200), 0);
    let b = termination(2000, Some(1500), 0);
    let c = termination(5000, Some(4500), 2);
    let old = ObservedTermination {
        lame_duck: Some(ms(3000)),
        arrivals: None,
    };
    let all = Observed::from_terminations(&[a, b, c, old]);
    assert_eq!(all.terminations, 4);
    assert_eq!(all.without_arrivals, 1);
    assert_eq!(all.shutdown_delay_min, Some(ms(2000)));
    assert_eq!(all.shutdown_delay_max, Some(ms(5000)));
    assert_eq!(all.last_new_connection, Some(ms(4500)));
    assert_eq!(all.min_margin, Some(ms(500)));
    assert_eq!((all.with_late_connections, all.late_connections), (1, 2));
    assert_eq!(all.late_shutdown_delay, Some(ms(5000)));
    // Per file, then merged: the same figures.
    let mut merged = Observed::from_terminations(&[a, old]);
    merged.merge(&Observed::from_terminations(&[b, c]));
    assert_eq!(merged, all);
    // Nothing merged into nothing.
    let mut empty = Observed::default();
    empty.merge(&Observed::default());
    assert_eq!(empty, Observed::default());
}

#[test]
fn the_smallest_delay_not_late() {
    // 1.9 s / 0.8 = 2.375 s → 2.4 s; exactly 2 s / 0.8 = 2.5 s is late under 2.5 s.
    assert_eq!(min_delay_not_late(ms(1900), 20), ms(2400));
    assert_eq!(min_delay_not_late(ms(2000), 20), ms(2600));
    assert_eq!(min_delay_not_late(Duration::ZERO, 20), ms(100));
    assert_eq!(min_delay_not_late(ms(1000), 0), ms(1100));
    assert_eq!(min_delay_not_late(ms(1000), 50), ms(2100));
    // 100 % is clamped: no delay leaves nothing late, so the largest finite part.
    assert_eq!(min_delay_not_late(ms(10), 100), ms(1100));
    assert_eq!(min_delay_not_late(Duration::MAX, 20), Duration::MAX);
    // The server's own arithmetic agrees, and 100 ms less would be late.
    for last in [0, 1, 99, 799, 800, 801, 1900, 1999, 2000, 12_345, 30_000] {
        for percent in [0u8, 1, 20, 50, 99] {
            let d = min_delay_not_late(ms(last), percent);
            let from = |d| {
                Config::builder()
                    .shutdown_delay(d)
                    .late_arrival_percent(percent)
                    .build()
                    .unwrap()
                    .late_arrivals_from()
            };
            assert!(from(d) > ms(last), "{last} {percent}");
            assert_eq!(d.as_nanos() % NOT_LATE_STEP.as_nanos(), 0);
            if d > NOT_LATE_STEP {
                assert!(from(d - NOT_LATE_STEP) <= ms(last), "{last} {percent}");
            }
        }
    }
}

#[test]
fn rounding() {
    assert_eq!(ceil_to(ms(4001), LATE_STEP), ms(4500));
    assert_eq!(ceil_to(ms(4000), LATE_STEP), ms(4000));
    assert_eq!(ceil_to(Duration::ZERO, LATE_STEP), Duration::ZERO);
    assert_eq!(ceil_to(ms(7), Duration::ZERO), ms(7));
    assert_eq!(ceil_to(Duration::MAX, LATE_STEP), Duration::MAX);
}

#[test]
fn a_clean_log_holds_and_may_offer_a_reduction() {
    let o = Observed::from_terminations(&[termination(5000, Some(1900), 0)]);
    let r = recommend(&o, None, 20);
    assert_eq!(r.verdict, ObservedVerdict::Holds);
    assert!(r.verdict.is_ok());
    assert_eq!(r.shutdown_delay, Some(ms(5000)));
    assert!(!r.configured);
    assert_eq!(r.min_delay_for_observed, Some(ms(2400)));
    assert_eq!(
        r.recommended,
        Some(ms(5000)),
        "never below the delay in use"
    );
    assert_eq!(r.reduction, Some(ms(2400)));
    assert_eq!(r.late_minimum, None);
    // No reduction when the delay is already the smallest.
    let tight = Observed::from_terminations(&[termination(2400, Some(1900), 0)]);
    let r = recommend(&tight, None, 20);
    assert_eq!((r.recommended, r.reduction), (Some(ms(2400)), None));
}

#[test]
fn no_connection_after_the_signal_offers_nothing() {
    let o = Observed::from_terminations(&[termination(5000, None, 0)]);
    let r = recommend(&o, None, 20);
    assert_eq!(r.verdict, ObservedVerdict::Holds);
    assert_eq!(
        (r.min_delay_for_observed, r.reduction, r.recommended),
        (None, None, Some(ms(5000)))
    );
    assert_eq!(o.min_margin, None);
    // Only old lines: nothing is known of arrivals.
    let old = ObservedTermination {
        lame_duck: Some(ms(3000)),
        arrivals: None,
    };
    let r = recommend(&Observed::from_terminations(&[old]), None, 20);
    assert_eq!(r.verdict, ObservedVerdict::Holds);
    assert_eq!(r.reduction, None);
    // Nothing at all.
    let r = recommend(&Observed::default(), None, 20);
    assert_eq!((r.recommended, r.shutdown_delay), (None, None));
}

#[test]
fn a_configured_delay_is_checked() {
    let o = Observed::from_terminations(&[termination(5000, Some(1900), 0)]);
    let r = recommend(&o, Some(ms(2000)), 20);
    assert_eq!(r.verdict, ObservedVerdict::ConfiguredTooShort);
    assert!(!r.verdict.is_ok());
    assert_eq!(r.recommended, Some(ms(2400)));
    let r = recommend(&o, Some(ms(10_000)), 20);
    assert_eq!(r.verdict, ObservedVerdict::Holds);
    assert_eq!(
        (r.recommended, r.reduction),
        (Some(ms(10_000)), Some(ms(2400)))
    );
}

#[test]
fn late_connections_double_the_delay() {
    let o = Observed::from_terminations(&[
        termination(2000, Some(1900), 3),
        termination(2200, Some(1000), 0),
    ]);
    let r = recommend(&o, None, 20);
    assert_eq!(r.verdict, ObservedVerdict::LateConnections);
    assert!(!r.verdict.is_ok());
    // 2 × 2 s = 4 s; the clean termination's longer delay does not count.
    assert_eq!(r.late_minimum, Some(ms(4000)));
    assert_eq!(r.recommended, Some(ms(4000)));
    assert_eq!(r.reduction, None);
    // Rounded up to 500 ms.
    let o = Observed::from_terminations(&[termination(2100, Some(1900), 1)]);
    assert_eq!(recommend(&o, None, 20).recommended, Some(ms(4500)));
    // Never below what the latest connection needs, nor the configured delay.
    let o = Observed::from_terminations(&[
        termination(1000, Some(900), 1),
        termination(10_000, Some(4000), 0),
    ]);
    let r = recommend(&o, None, 20);
    assert_eq!(
        (r.late_minimum, r.recommended),
        (Some(ms(2000)), Some(ms(5100)))
    );
    assert_eq!(
        recommend(&o, Some(ms(8000)), 20).recommended,
        Some(ms(8000))
    );
    // A late termination without a lame duck: its latest connection stands for it.
    let t = ObservedTermination {
        lame_duck: None,
        arrivals: Some(ArrivalCounts {
            last_new_connection: Some(ms(1600)),
            late_connections: 1,
            ..ArrivalCounts::default()
        }),
    };
    let r = recommend(&Observed::from_terminations(&[t]), None, 20);
    assert_eq!(r.late_minimum, Some(ms(3500)));
}

#[test]
fn late_requests_alone_are_no_failure() {
    let mut t = termination(2000, Some(500), 0);
    if let Some(a) = t.arrivals.as_mut() {
        a.late_requests = 40;
        a.requests_before_ready = 3;
    }
    let o = Observed::from_terminations(&[t]);
    assert_eq!((o.late_requests, o.requests_before_ready), (40, 3));
    assert_eq!(recommend(&o, None, 20).verdict, ObservedVerdict::Holds);
}

fn model(interval: u64, timeout: u64, threshold: u32, delay: u64) -> Plan {
    let probes = ProbeSettings::new(
        Duration::from_secs(interval),
        Duration::from_secs(timeout),
        threshold,
    );
    let config = Config::builder()
        .shutdown_delay(Duration::from_secs(delay))
        .build()
        .unwrap();
    plan(&PlanInput::new(probes, config)).unwrap()
}

#[test]
fn combined_with_the_model_the_larger_wins() {
    // Late: 2 × 5 s = 10 s observed, the model's 30 s wins.
    let late = Observed::from_terminations(&[termination(5000, Some(4500), 2)]);
    let p = model(10, 10, 2, 5);
    let c = combine(&recommend(&late, Some(ms(5000)), 20), &p);
    assert_eq!(
        (c.observed, c.model, c.recommended),
        (Some(ms(10_000)), ms(30_000), ms(30_000))
    );
    assert!(!c.safe);
    // Late: 2 × 20 s = 40 s observed beats the model's 12 s.
    let late = Observed::from_terminations(&[termination(20_000, Some(19_000), 1)]);
    let p = model(5, 2, 2, 20);
    let c = combine(&recommend(&late, Some(ms(20_000)), 20), &p);
    assert_eq!(c.recommended, ms(40_000));
    assert!(!c.safe, "late connections fail even when the model is safe");
    // Clean and safe: keep the delay; the reduction is bounded by the model.
    let clean = Observed::from_terminations(&[termination(30_000, Some(3000), 0)]);
    let p = model(5, 2, 2, 30);
    let r = recommend(&clean, Some(ms(30_000)), 20);
    assert_eq!(r.reduction, Some(ms(3800)));
    let c = combine(&r, &p);
    assert_eq!((c.recommended, c.reduction), (ms(30_000), Some(ms(12_000))));
    assert!(c.safe);
    // Clean logs but an unsafe model.
    let p = model(10, 10, 3, 30);
    let c = combine(&r, &p);
    assert_eq!((c.recommended, c.reduction), (ms(40_000), None));
    assert!(!c.safe);
}

/// A late termination whose server also saw the balancer's readiness probes.
fn probed(lame_duck_ms: u64, period_ms: u64, failed_probes: u64) -> ObservedTermination {
    let mut t = termination(lame_duck_ms, Some(lame_duck_ms - 100), 2);
    if let Some(a) = t.arrivals.as_mut() {
        a.readyz_probe_interval = Some(ms(period_ms));
        a.failed_readyz_probes = failed_probes;
    }
    t
}

#[test]
fn the_probes_seen_estimate_the_balancers_detection() {
    // HAProxy `inter 2s fall 3` against a 2 s delay: one failed probe seen, and still late.
    let o = Observed::from_terminations(&[probed(2000, 2000, 1)]);
    assert_eq!(o.late_probe_interval, Some(ms(2000)));
    assert_eq!(o.late_failed_probes, 1);
    let r = recommend(&o, None, 20);
    assert_eq!(r.late_minimum, Some(ms(4000)));
    // At least 3 failed probes: 3 × 2 s + 0.5 s = 6.5 s, out of the last 20 %: 8.125 s,
    // rounded up to 500 ms.
    assert_eq!(r.failure_threshold, Some(ASSUMED_FAILURE_THRESHOLD));
    assert_eq!(r.probe_minimum, Some(ms(8500)));
    assert_eq!(r.recommended, Some(ms(8500)));
    // A balancer that ignored 4 failed probes needs at least 5:
    // 5 × 2 s + 0.5 s = 10.5 s / 0.8 = 13.125 s.
    let o = Observed::from_terminations(&[probed(10_000, 2000, 4), probed(2000, 1000, 1)]);
    let r = recommend(&o, None, 20);
    assert_eq!(
        (r.failure_threshold, r.probe_minimum),
        (Some(5), Some(ms(13_500)))
    );
    // Twice a long late delay can still be the larger.
    assert_eq!(r.recommended, Some(ms(20_000)));
}

#[test]
fn probes_of_terminations_without_late_connections_change_nothing() {
    let mut t = termination(2000, Some(400), 0);
    if let Some(a) = t.arrivals.as_mut() {
        a.readyz_probe_interval = Some(ms(250));
        a.failed_readyz_probes = 2;
    }
    let o = Observed::from_terminations(&[t]);
    assert_eq!((o.late_probe_interval, o.late_failed_probes), (None, 0));
    let r = recommend(&o, None, 20);
    assert_eq!((r.failure_threshold, r.probe_minimum), (None, None));
    assert_eq!(r.verdict, ObservedVerdict::Holds);
    // Without a probe period (endpoint removal, no health checks): twice the delay only.
    let o = Observed::from_terminations(&[termination(2000, Some(1900), 1)]);
    assert_eq!(recommend(&o, None, 20).probe_minimum, None);
}

#[test]
fn the_probe_fields_are_read_from_the_summary() {
    let line = "[graceful-termination] termination summary: cause=signal signal_to_exit=2.100s \
        lame_duck=2.000s normal_drain=0.001s long_running_drain=- requests_drained=0 \
        requests_remaining=0 streams_ended=0 streams_remaining=0 rejected=0 \
        rejected_not_accepting=0 rejected_retry_after=0 rejected_request_timeout=0 \
        rejected_routes_not_ready=0 last_new_connection=1.990s last_new_request=1.990s \
        late_connections=12 late_requests=12 requests_before_ready=0 \
        readyz_probe_interval=2.003s failed_readyz_probes=1 code=0";
    let t = ObservedTermination::parse_line(line)
        .expect("valid")
        .expect("a summary");
    let a = t.arrivals.expect("arrival fields");
    assert_eq!(a.readyz_probe_interval, Some(ms(2003)));
    assert_eq!(a.failed_readyz_probes, 1);
    let bad = line.replace("failed_readyz_probes=1", "failed_readyz_probes=x");
    assert_eq!(
        ObservedTermination::parse_line(&bad),
        Err(MalformedSummary::InvalidValue {
            field: "failed_readyz_probes".into(),
            value: "x".into()
        })
    );
}
