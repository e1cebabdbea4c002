//! Hooks: a slow pre-shutdown hook holds `NotAcceptingNewRequest` (after the shutdown
//! delay), a failing or panicking one still lets the drain run and makes the exit code 1, and
//! destroy hooks hold the exit unless a second signal cuts them short.

use std::convert::Infallible;
use std::time::Duration;

use lameduck::{Config, LifecycleSignal};

use crate::support::builder;
use crate::{config, serve_idle_api, RunningServer};

#[tokio::test(start_paused = true)]
async fn not_accepting_waits_for_the_delay_and_a_slow_hook_then_exits_0() {
    let mut builder = builder(config(|c| c.shutdown_delay(Duration::from_secs(5))));
    builder
        .pre_shutdown_hook("slow", || async {
            tokio::time::sleep(Duration::from_secs(7)).await;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(handle.request_shutdown());
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let shared = handle.shared();
    let t0 = shared.fired_at(LifecycleSignal::ShutdownInitiated).unwrap();
    let delay = shared
        .fired_at(LifecycleSignal::AfterShutdownDelayDuration)
        .unwrap()
        - t0;
    let n = shared
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap()
        - t0;
    // Virtual time: exact up to the scheduler's millisecond rounding.
    assert!(
        delay >= Duration::from_secs(5) && delay < Duration::from_millis(5010),
        "{delay:?}"
    );
    assert!(
        n >= Duration::from_secs(7) && n < Duration::from_millis(7010),
        "{n:?}"
    );
    for s in [
        LifecycleSignal::InFlightRequestsDrained,
        LifecycleSignal::HTTPServerStoppedListening,
    ] {
        assert!(shared.has_fired(s), "{s}");
    }
}

#[tokio::test(start_paused = true)]
async fn failing_and_panicking_hooks_still_drain_and_exit_1() {
    for panic in [false, true] {
        let mut builder = builder(Config::default());
        builder
            .pre_shutdown_hook("bad", move || async move {
                if panic {
                    panic!("hook panicked on purpose");
                }
                Err::<(), _>("hook failed on purpose")
            })
            .unwrap();
        let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
        handle.request_shutdown();
        assert_eq!(run.await.unwrap().unwrap(), 1, "panic = {panic}");
        assert!(handle
            .shared()
            .has_fired(LifecycleSignal::InFlightRequestsDrained));
    }
}

#[tokio::test(start_paused = true)]
async fn destroy_hooks_hold_the_exit_and_a_second_signal_cuts_them_short() {
    for second_signal in [false, true] {
        let mut builder = builder(Config::default());
        builder
            .destroy_hook("flush", || async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Ok::<_, Infallible>(())
            })
            .unwrap();
        let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
        handle.deliver_os_signal();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!run.is_finished(), "the exit waits for the destroy hook");
        let started = tokio::time::Instant::now();
        if second_signal {
            handle.deliver_os_signal();
        }
        let code = run.await.unwrap().unwrap();
        let waited = started.elapsed();
        if second_signal {
            assert_eq!(code, 1);
            assert!(waited < Duration::from_millis(10), "{waited:?}");
        } else {
            assert_eq!(code, 0);
            assert!(
                waited >= Duration::from_millis(2890) && waited < Duration::from_millis(2910),
                "{waited:?}"
            );
        }
    }
}
