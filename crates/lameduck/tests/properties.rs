//! Property tests over random event sequences: signals fire at most once and never before
//! their DAG predecessors, the machine always terminates once all inputs arrive, every trace
//! the machine produces passes `check_trace`, and mutated traces are rejected.

use lameduck::sim::{Op, Setup};
use lameduck::trace::{check_trace, TraceEvent, TracedEvent};
use lameduck::Signal;
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
                mux_signals,
            )| Setup {
                delay_tenths,
                grace_tenths,
                request_timeout_tenths,
                send_retry_after,
                hooks,
                extra_listeners,
                mux_signals,
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
        (0u8..3).prop_map(|index| Op::MuxSignalFired { index }),
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
        for s in Signal::ALL {
            prop_assert!(signals.iter().filter(|x| **x == s).count() <= 1);
        }
        // A clean exit saw the whole termination.
        if exit == Some(0) {
            for s in [Signal::ShutdownInitiated, Signal::NotAcceptingNewRequest,
                      Signal::InFlightRequestsDrained, Signal::HTTPServerStoppedListening] {
                prop_assert!(signals.contains(&s));
            }
        }
    }

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
        let signal_positions: Vec<usize> = trace
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.event, TraceEvent::Signal(_)))
            .map(|(i, _)| i)
            .collect();
        let mut bad = trace.clone();
        match mutation {
            // Repeat a signal.
            0 if !signal_positions.is_empty() => {
                let i = signal_positions[pick.index(signal_positions.len())];
                let e = bad[i];
                let at = bad.len() - 1; // before the exit
                bad.insert(at, e);
            }
            // Something after the exit.
            1 => bad.push(TracedEvent::untimed(TraceEvent::Signal(Signal::HasBeenReady))),
            // A clean exit with nothing done.
            2 => bad = vec![TracedEvent::untimed(TraceEvent::Exit(0))],
            // Drop ShutdownInitiated when anything depends on it.
            _ => {
                let Some(i) = trace.iter().position(|e| e.event == TraceEvent::Signal(Signal::ShutdownInitiated)) else {
                    return Ok(());
                };
                let has_successor = trace.iter().any(|e| matches!(e.event,
                    TraceEvent::Signal(Signal::AfterShutdownDelayDuration | Signal::PreShutdownHooksStopped)));
                if !has_successor {
                    return Ok(());
                }
                bad.remove(i);
            }
        }
        prop_assert!(check_trace(&config, &bad).is_err(), "accepted {:?}", bad);
    }
}
