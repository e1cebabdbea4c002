//! The machine's coarse stage and its phase are both read from the one value that records
//! its progress, and never disagree: `Machine::stage` is always `Machine::phase().stage()`,
//! in random runs from start to exit, and each typestate type converts back from a machine
//! exactly at the stage of its `Stage::PHASE`.

use crate::config::Config;
use crate::lifecycle::{Configuring, Lifecycle, Prepared, Running, Stage};
use crate::machine::{Input, Machine, StopSource};
use crate::phase::MachineStage;
use crate::sim::{Op, Setup};
use crate::time::Instant;

fn assert_twins(m: &Machine) {
    assert_eq!(m.stage(), m.phase().stage(), "phase {:?}", m.phase());
}

#[test]
fn stage_is_the_phase_s_stage_in_random_runs() {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..200 {
        let r = next().to_le_bytes();
        let setup = Setup {
            delay_tenths: r[0] % 30,
            grace_tenths: r[1] % 30,
            request_timeout_tenths: r[2] % 100,
            send_retry_after: r[3] % 2 == 0,
            hooks: [r[4], r[5], r[6], r[7]],
            extra_listeners: 1,
            routes_ready: 1,
        };
        let Ok(mut sim) = setup.simulator() else {
            continue;
        };
        assert_twins(&sim.machine);
        for _ in 0..40 {
            let b = next().to_le_bytes();
            let op = match b[0] % 8 {
                0 => Op::Advance {
                    millis: u16::from_le_bytes([b[1], b[2]]) % 3000,
                },
                1 => Op::Stop {
                    os_signal: b[1] % 4 == 0,
                },
                2 => Op::FinishHook {
                    index: b[1] % 8,
                    outcome: b[2],
                },
                3 => Op::OpenRequest {
                    long_running: b[1] % 2 == 0,
                },
                4 => Op::EndRequest { index: b[1] },
                5 => Op::ListenerServing { index: b[1] % 2 },
                6 => Op::ListenerStopped { index: b[1] % 2 },
                _ => Op::ServerStopped { index: b[1] % 2 },
            };
            let _ = sim.apply(op);
            assert_twins(&sim.machine);
        }
        sim.finish(1000);
        assert_twins(&sim.machine);
        assert_eq!(sim.machine.stage(), MachineStage::Exited);
    }
}

#[test]
fn typestate_types_convert_back_at_their_stage() {
    fn converts<S: Stage>(m: Machine) -> Machine {
        let stage = m.stage();
        match Lifecycle::<S>::try_from_machine(m) {
            Ok(l) => {
                assert_eq!(stage, S::PHASE.stage());
                l.into_machine()
            }
            Err(m) => {
                assert_ne!(stage, S::PHASE.stage());
                m
            }
        }
    }
    fn all(m: Machine) -> Machine {
        converts::<Running>(converts::<Prepared>(converts::<Configuring>(m)))
    }
    let mut m = all(Machine::new(Config::default()));
    let api = m.add_listener("api").unwrap();
    m.handle_input(Input::Prepare, Instant::ZERO).unwrap();
    m = all(m);
    m.handle_input(Input::Start, Instant::ZERO).unwrap();
    m = all(m);
    m.handle_input(Input::ListenerServing(api), Instant::ZERO)
        .unwrap();
    m.handle_input(Input::StopRequested(StopSource::OsSignal), Instant::ZERO)
        .unwrap();
    m = all(m);
    m.handle_input(Input::StopRequested(StopSource::OsSignal), Instant::ZERO)
        .unwrap();
    assert_eq!(m.stage(), MachineStage::Exited);
    all(m);
}
