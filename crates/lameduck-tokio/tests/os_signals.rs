//! Real OS signals (raised in this test process, which has its own binary so no other test
//! shares the handlers): deliveries are counted one by one from the moment the server is
//! prepared, so two SIGTERMs before `run()` still mean "exit 1 at once".

use std::time::Duration;

use lameduck::Config;

#[tokio::test]
async fn two_sigterms_before_run_exit_1() {
    let config = Config::builder()
        .shutdown_delay(Duration::from_secs(60))
        .build()
        .unwrap();
    let server = lameduck_tokio::builder(config).prepare();
    // Both arrive before the server runs; a merging signal stream would see one.
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let code = tokio::time::timeout(Duration::from_secs(10), server.run())
        .await
        .expect("exits at once, not after the 60 s delay")
        .unwrap();
    assert_eq!(code, 1);
}
