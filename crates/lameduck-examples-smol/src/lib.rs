//! What smol_server adds to the example servers' shared code (`lameduck-examples`): its `/ws`
//! echo with async-tungstenite ([`websocket`]) and its smol executor ([`exit_with_smol`]).
//! The package also holds the examples on smol (`smol_server`, `quickstart_smol`), so that
//! they build smol's crates and not tokio's frameworks (axum, actix-web, tonic).
//!
//! This package is never published.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod websocket;

/// Runs `main` on a smol executor served by `threads` threads (the calling thread included)
/// and exits the process with its code.
pub fn exit_with_smol<F>(
    threads: usize,
    main: impl FnOnce(std::sync::Arc<async_executor::Executor<'static>>) -> F,
) -> !
where
    F: std::future::Future<Output = i32>,
{
    let executor = std::sync::Arc::new(async_executor::Executor::new());
    for i in 1..threads.max(1) {
        let ex = std::sync::Arc::clone(&executor);
        let spawned = std::thread::Builder::new()
            .name(format!("smol-worker-{i}"))
            .spawn(move || smol::block_on(ex.run(std::future::pending::<()>())));
        if let Err(e) = spawned {
            eprintln!("error: cannot start a worker thread: {e}");
            std::process::exit(1);
        }
    }
    let code = smol::block_on(executor.run(main(std::sync::Arc::clone(&executor))));
    std::process::exit(code);
}
