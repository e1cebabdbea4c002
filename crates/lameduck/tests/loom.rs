//! loom model checks of the gate's atomics. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p lameduck --test loom --release`
#![cfg(loom)]

use lameduck::{Gate, ShutdownMode};
use loom::sync::Arc;
use loom::thread;

/// An admission racing the close either gets a ticket that the drain then waits for, or is
/// rejected; never both, never neither, and the count returns to zero.
#[test]
fn admission_races_close() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let g = Arc::clone(&gate);
        let requester = thread::spawn(move || match g.admit_normal() {
            Ok(ticket) => {
                drop(ticket);
                true
            }
            Err(_) => false,
        });
        let (in_flight_at_close, _) = gate.close();
        let admitted = requester.join().unwrap();
        if !admitted {
            assert_eq!(
                in_flight_at_close, 0,
                "a rejected request was counted at close"
            );
        }
        assert!(gate.normal_drained());
        assert!(gate.admit_normal().is_err());
    });
}

/// A request admitted before close releasing while a second admission races the close:
/// whatever the interleaving, the group drains to zero and stays closed.
#[test]
fn concurrent_releases_after_close() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let g1 = Arc::clone(&gate);
        let g2 = Arc::clone(&gate);
        let (tx1, rx1) = loom::sync::mpsc::channel();
        let (tx2, rx2) = loom::sync::mpsc::channel();
        let t1 = thread::spawn(move || {
            let t = g1.admit_normal().unwrap();
            tx1.send(()).unwrap();
            rx2.recv().unwrap();
            drop(t);
        });
        let t2 = thread::spawn(move || {
            let t = g2.admit_normal();
            let _ = t.is_ok();
            drop(t);
        });
        rx1.recv().unwrap();
        gate.close();
        tx2.send(()).unwrap();
        t1.join().unwrap();
        t2.join().unwrap();
        assert!(gate.normal_drained());
        assert_eq!(gate.normal_in_flight(), 0);
    });
}
