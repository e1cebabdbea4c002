//! Real OS signals (raised in this test process, which has its own binary so no other test
//! shares the handlers): deliveries are counted one by one from the moment the server is
//! prepared, so two SIGTERMs before `run()` still mean "exit 1 at once".

use std::time::Duration;

use lameduck::Config;

#[test]
fn two_sigterms_before_run_exit_1() {
    smol::block_on(async {
        let config = Config::builder()
            .shutdown_delay(Duration::from_secs(60))
            .build()
            .unwrap();
        let server = lameduck_smol::builder(config).prepare();
        // Both arrive before the server runs; a merging signal stream would see one.
        signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
        signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
        smol::Timer::after(Duration::from_millis(50)).await;
        let run = async { Some(server.run().await) };
        let limit = async {
            smol::Timer::after(Duration::from_secs(10)).await;
            None
        };
        let code = futures_lite::future::or(run, limit)
            .await
            .expect("exits at once, not after the 60 s delay")
            .unwrap();
        assert_eq!(code, 1);
    });
}
