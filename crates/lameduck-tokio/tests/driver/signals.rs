//! Signals: a second one exits 1 at once, even after `request_shutdown()`; a second server
//! of the process can not install the signal handler again.

use std::time::Duration;

use lameduck::{Config, LifecycleSignal};
use lameduck_hyper::ServeError;

use crate::support::builder;
use crate::{config, serve_idle_api, RunningServer};

#[tokio::test(start_paused = true)]
async fn a_second_signal_exits_1_at_once() {
    let builder = builder(config(|c| c.shutdown_delay(Duration::from_secs(60))));
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    handle.deliver_os_signal();
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.deliver_os_signal();
    let started = tokio::time::Instant::now();
    assert_eq!(run.await.unwrap().unwrap(), 1);
    assert!(started.elapsed() < Duration::from_millis(10));
    assert!(!handle
        .shared()
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
}

#[tokio::test(start_paused = true)]
async fn installing_the_signal_handler_twice_is_an_error() {
    // The first server installs the signal handler.
    let first = lameduck_tokio::builder(Config::default());
    let RunningServer { handle, run, .. } = serve_idle_api(first).start();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = lameduck_tokio::builder(Config::default()).prepare();
    assert!(matches!(
        second.run().await,
        Err(ServeError::OsSignalsAlreadyInstalled)
    ));
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_signal_after_request_shutdown_exits_1() {
    let builder = builder(config(|c| c.shutdown_delay(Duration::from_secs(60))));
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    handle.request_shutdown();
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !run.is_finished(),
        "repeating request_shutdown() changes nothing"
    );
    handle.deliver_os_signal();
    assert_eq!(run.await.unwrap().unwrap(), 1);
}
