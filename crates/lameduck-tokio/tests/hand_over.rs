//! The hand-over through the library API, both sides in one process on real loopback
//! sockets: the successor serves as soon as it has the sockets, tells its predecessor only
//! once its post-start hook succeeded, and the predecessor then terminates and exits 0.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use lameduck::{Config, LifecycleSignal};
use lameduck_hyper::sockets::hand_over::{receive_listeners, HandOver};

mod support;
use support::service;

/// `GET /` on a new connection; the body.
fn get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.rsplit("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn the_successor_serves_at_once_and_is_ready_after_its_post_start_hook() {
    let path = std::env::temp_dir().join(format!("lameduck-ho-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let config = Config::builder()
        .shutdown_delay(Duration::from_millis(100))
        .build()
        .unwrap();

    // The running server, which will hand over.
    let mut old = support::prepare(config.clone());
    let listener = lameduck_tokio::bind(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let addr = old.serve("api", listener, service("old")).unwrap();
    old.hand_over_to(HandOver::new(&path, Duration::from_secs(20)));
    let old_handle = old.handle();
    let old_run = tokio::spawn(old.run());
    let body = tokio::task::spawn_blocking(move || get(addr))
        .await
        .unwrap();
    assert_eq!(body, "old");

    // The successor waits for the sockets on a thread of its own (the call blocks).
    let receive = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || receive_listeners(&path, Duration::from_secs(20)))
    };
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(old_handle.hand_over());
    let (predecessor, mut listeners) = receive.await.unwrap().expect("the sockets arrive");
    assert_eq!(listeners.len(), 1);
    assert_eq!(listeners[0].name, "api");
    let inherited = listeners.remove(0).listener;
    assert_eq!(inherited.local_addr().unwrap(), addr);

    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let mut new = {
        let mut b = support::builder(config);
        b.post_start_hook("warm-up", move || async move {
            let _ = released.await;
            Ok::<_, Infallible>(())
        })
        .unwrap();
        b.prepare()
    };
    let listener = lameduck_tokio::from_std(inherited).unwrap();
    new.serve("api", listener, service("new")).unwrap();
    new.report_up_to(predecessor);
    let new_handle = new.handle();
    let new_run = tokio::spawn(new.run());

    // Both serve the socket while the successor warms up; the old one has not started to
    // terminate.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!old_handle
        .shared()
        .has_fired(LifecycleSignal::ShutdownInitiated));
    let mut seen_new = false;
    for _ in 0..40 {
        let body = tokio::task::spawn_blocking(move || get(addr))
            .await
            .unwrap();
        assert!(body == "old" || body == "new", "{body:?}");
        seen_new |= body == "new";
    }
    assert!(seen_new, "the successor accepts before it is ready");

    // Up: the old server terminates gracefully and exits 0; the address keeps serving.
    release.send(()).unwrap();
    let code = tokio::time::timeout(Duration::from_secs(10), old_run)
        .await
        .expect("the old server exits")
        .unwrap()
        .unwrap();
    assert_eq!(code, 0);
    for _ in 0..5 {
        let body = tokio::task::spawn_blocking(move || get(addr))
            .await
            .unwrap();
        assert_eq!(body, "new");
    }
    assert!(new_handle.request_shutdown());
    let code = new_run.await.unwrap().unwrap();
    assert_eq!(code, 0);
    assert!(!path.exists(), "the successor removed its hand-over socket");
}
