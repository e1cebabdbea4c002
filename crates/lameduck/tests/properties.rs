//! Property tests over random event sequences: signals fire at most once and never before
//! their DAG predecessors, the machine always terminates once all inputs arrive, every trace
//! the machine produces passes `check_trace`, and mutated traces are rejected.

use lameduck::sim::{Op, Setup};
use lameduck::trace::{check_trace, predecessors, Rule, TraceEvent, TracedEvent};
use lameduck::LifecycleSignal;
use proptest::prelude::*;

fn setup() -> impl Strategy<Value = Setup> {
    (
        0u8..30,
        0u8..30,
        0u8..100,
        any::<bool>(),
        any::<[u8; 4]>(),
        0u8..3,
        0u8..3,
    )
        .prop_map(
            |(
                delay_tenths,
                grace_tenths,
                request_timeout_tenths,
                send_retry_after,
                hooks,
                extra_listeners,
                routes_ready,
            )| Setup {
                delay_tenths,
                grace_tenths,
                request_timeout_tenths,
                send_retry_after,
                hooks,
                extra_listeners,
                routes_ready,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u16..5000).prop_map(|millis| Op::Advance { millis }),
        any::<bool>().prop_map(|os_signal| Op::Stop { os_signal }),
        (0u8..14, any::<u8>()).prop_map(|(index, outcome)| Op::FinishHook { index, outcome }),
        (0u8..4).prop_map(|index| Op::ListenerServing { index }),
        (0u8..4).prop_map(|index| Op::ListenerStopped { index }),
        (0u8..4).prop_map(|index| Op::ServerStopped { index }),
        (0u8..3).prop_map(|index| Op::RoutesReady { index }),
        any::<bool>().prop_map(|long_running| Op::OpenRequest { long_running }),
        any::<bool>().prop_map(|long_running| Op::OpenRequest { long_running }),
        any::<u8>().prop_map(|index| Op::EndRequest { index }),
        Just(Op::DrainProgress),
        any::<u8>().prop_map(|endpoint| Op::Health { endpoint }),
        (0u8..4).prop_map(|index| Op::ConnectionsCut { index }),
        Just(Op::OpenExempt),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step_and_the_machine_terminates(
        setup in setup(),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut sim = setup.simulator().unwrap();
        sim.check_invariants().unwrap();
        for op in ops {
            // Illegal inputs are allowed here: they must return an error and change nothing
            // observable, which the invariants check.
            let _ = sim.apply(op);
            if let Err(e) = sim.check_invariants() {
                prop_assert!(false, "after {:?}: {}", op, e);
            }
        }
        let exit = sim.finish(200);
        prop_assert!(exit.is_some(), "did not terminate: {:?}", sim);
        sim.check_invariants().unwrap();
        let summary = sim.check_trace().unwrap();
        prop_assert!(summary.complete());
        // Each signal at most once (check_trace enforces it too; count explicitly).
        let signals = sim.signals();
        for s in LifecycleSignal::ALL {
            prop_assert!(signals.iter().filter(|x| **x == s).count() <= 1);
        }
        // A clean exit saw the whole termination.
        if exit == Some(0) {
            for s in [LifecycleSignal::ShutdownInitiated, LifecycleSignal::NotAcceptingNewRequest,
                      LifecycleSignal::InFlightRequestsDrained, LifecycleSignal::HTTPServerStoppedListening] {
                prop_assert!(signals.contains(&s));
            }
        }
    }

    /// Each mutation breaks one rule of the reference model, and `check_trace` must name
    /// that rule at that event (not merely reject the trace for some other reason).
    #[test]
    fn mutated_traces_are_rejected(
        setup in setup(),
        ops in proptest::collection::vec(op(), 0..30),
        pick in any::<prop::sample::Index>(),
        mutation in 0u8..4,
    ) {
        let mut sim = setup.simulator().unwrap();
        for op in ops {
            let _ = sim.apply(op);
        }
        sim.finish(200);
        let trace = sim.trace();
        let config = sim.machine.config().clone();
        prop_assert!(check_trace(&config, &trace).is_ok());
        let signal_at = |i: usize| match trace[i].event {
            TraceEvent::Signal(s) => Some(s),
            _ => None,
        };
        let signal_positions: Vec<usize> =
            (0..trace.len()).filter(|i| signal_at(*i).is_some()).collect();
        let position = |s: LifecycleSignal| trace.iter().position(|e| e.event == TraceEvent::Signal(s));
        let mut bad = trace.clone();
        let (index, rule) = match mutation {
            // Repeat a signal right after itself (same time, so time stays monotone).
            0 => {
                if signal_positions.is_empty() {
                    return Ok(());
                }
                let i = signal_positions[pick.index(signal_positions.len())];
                bad.insert(i + 1, trace[i]);
                (i + 1, Rule::SignalFiresOnce(signal_at(i).unwrap()))
            }
            // Move a signal before one of its DAG predecessors (untimed, so only the order
            // is judged).
            1 => {
                let movable: Vec<(usize, usize)> = signal_positions
                    .iter()
                    .flat_map(|&i| {
                        predecessors(signal_at(i).unwrap(), config.mode())
                            .iter()
                            .filter_map(|x| position(*x))
                            .map(move |p| (i, p))
                    })
                    .collect();
                if movable.is_empty() {
                    return Ok(());
                }
                let (i, p) = movable[pick.index(movable.len())];
                let s = signal_at(i).unwrap();
                let e = bad.remove(i);
                bad.insert(p, TracedEvent::untimed(e.event));
                let seen: Vec<LifecycleSignal> = (0..p).filter_map(signal_at).collect();
                let needs = *predecessors(s, config.mode())
                    .iter()
                    .find(|x| !seen.contains(x))
                    .unwrap();
                (p, Rule::Predecessor { event: Some(s), needs })
            }
            // Exit 0 just before the drain (or the listeners) completed.
            2 => {
                let done = [LifecycleSignal::InFlightRequestsDrained, LifecycleSignal::HTTPServerStoppedListening];
                let Some(cut) = done.into_iter().filter_map(position).min() else {
                    return Ok(());
                };
                bad.truncate(cut);
                bad.push(TracedEvent::untimed(TraceEvent::Exit(0)));
                (cut, Rule::CleanExitBeforeDone)
            }
            // Drop ShutdownInitiated when anything depends on it.
            _ => {
                let Some(i) = position(LifecycleSignal::ShutdownInitiated) else {
                    return Ok(());
                };
                let Some(j) = (i..trace.len()).find(|j| matches!(signal_at(*j),
                    Some(LifecycleSignal::AfterShutdownDelayDuration | LifecycleSignal::PreShutdownHooksStopped)))
                else {
                    return Ok(());
                };
                bad.remove(i);
                (j - 1, Rule::Predecessor {
                    event: signal_at(j),
                    needs: LifecycleSignal::ShutdownInitiated,
                })
            }
        };
        let err = check_trace(&config, &bad);
        prop_assert!(err.is_err(), "accepted {:?}", bad);
        let err = err.unwrap_err();
        prop_assert_eq!((err.index, err.rule), (index, rule), "{:?}", bad);
    }
}
