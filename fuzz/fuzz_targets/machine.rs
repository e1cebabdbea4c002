//! Drives the lifecycle machine through the simulator with arbitrary registrations and
//! inputs, and checks every invariant after each step.
//!
//! Input: a [`Setup`] (configuration, hooks, listeners, routes-ready reports) and up to
//! [`MAX_OPS`] [`Op`]s. Illegal inputs are expected and must return an error that changes
//! nothing observable; the oracle is [`Simulator::check_invariants`] after every op, and, once
//! everything a well-behaved environment delivers has arrived, an exit with a complete,
//! legal trace.
//!
//! [`Simulator::check_invariants`]: lameduck::sim::Simulator::check_invariants
#![no_main]

use lameduck::sim::{Op, Setup};
use lameduck::LifecycleSignal;
use libfuzzer_sys::fuzz_target;

/// Ops past this many are ignored, to keep each run short.
const MAX_OPS: usize = 256;

/// `Simulator::finish`'s step budget.
const FINISH_STEPS: usize = 500;

fuzz_target!(|input: (Setup, Vec<Op>)| {
    let (setup, ops) = input;
    let mut sim = match setup.simulator() {
        Ok(sim) => sim,
        Err(err) => panic!("{setup:?} did not start: {err}"),
    };
    if let Err(err) = sim.check_invariants() {
        panic!("at start of {setup:?}: {err}");
    }
    for (i, op) in ops.into_iter().take(MAX_OPS).enumerate() {
        // Illegal inputs are expected: they must return an error and change nothing.
        let _ = sim.apply(op);
        if let Err(err) = sim.check_invariants() {
            panic!("after op #{i} {op:?}: {err}\n{sim:?}");
        }
    }

    let exit = sim.finish(FINISH_STEPS);
    let Some(code) = exit else {
        panic!("did not terminate once every input arrived: {sim:?}");
    };
    assert!(code <= 1, "exit code {code}");
    if let Err(err) = sim.check_invariants() {
        panic!("after finish: {err}");
    }
    let summary = match sim.check_trace() {
        Ok(summary) => summary,
        Err(violation) => panic!("illegal trace after finish: {violation:?}"),
    };
    assert!(summary.complete(), "incomplete trace: {summary:?}");
    assert_eq!(summary.exit_code, Some(code));

    let signals = sim.signals();
    for s in LifecycleSignal::ALL {
        let n = signals.iter().filter(|x| **x == s).count();
        assert!(n <= 1, "{s:?} fired {n} times");
    }
    if code == 0 {
        // A clean exit saw the whole termination.
        for s in [
            LifecycleSignal::ShutdownInitiated,
            LifecycleSignal::NotAcceptingNewRequest,
            LifecycleSignal::InFlightRequestsDrained,
            LifecycleSignal::HTTPServerStoppedListening,
        ] {
            assert!(signals.contains(&s), "exit 0 without {s:?}: {signals:?}");
        }
    }
});
