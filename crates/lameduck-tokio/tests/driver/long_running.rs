//! Long-running requests in the drain: watch bodies end at the paced rate and hold the drain,
//! an upgraded connection stays counted until its ticket drops, and event streams keep their
//! events until their turn, then end with a retry hint.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use lameduck_tokio::{ShutdownNotice, TokioRuntime};
use tower::{service_fn, Layer, ServiceExt};

use crate::support::builder;
use crate::{config, serve_idle_api, PreparedServer};

#[tokio::test(start_paused = true)]
async fn long_running_bodies_end_at_the_paced_rate_and_hold_the_drain() {
    let builder = builder(config(|c| {
        c.shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    // A stream that ends as soon as the server says so.
    let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
        let notice = req.extensions().get::<ShutdownNotice>().cloned().unwrap();
        let body = http_body_util::StreamBody::new(futures_util::stream::once(async move {
            notice.wait().await;
            Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"bye\n")))
        }));
        Ok::<_, Infallible>(Response::new(body))
    }));
    let mut ends = Vec::new();
    for _ in 0..4 {
        let req = Request::builder()
            .uri("/x?watch=true")
            .body(Empty::new())
            .unwrap();
        let res = svc.clone().oneshot(req).await.unwrap();
        ends.push(tokio::spawn(async move {
            res.into_body().collect().await.unwrap();
            tokio::time::Instant::now()
        }));
    }
    assert_eq!(
        handle.in_flight(),
        lameduck::gate::InFlight {
            normal: 0,
            long_running: 4
        }
    );
    let run = tokio::spawn(server.run());
    tokio::time::sleep(Duration::from_millis(1)).await;
    handle.request_shutdown();
    let mut at = Vec::new();
    for e in ends {
        at.push(e.await.unwrap());
    }
    at.sort();
    // max(4 / 10 s, 200/s) = 200/s: one end every 5 ms, the first at once.
    let span = at[3] - at[0];
    assert!(
        span >= Duration::from_millis(15) && span <= Duration::from_millis(20),
        "{span:?}"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(
        handle.in_flight(),
        lameduck::gate::InFlight {
            normal: 0,
            long_running: 0
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_upgraded_connection_stays_counted_until_its_ticket_drops() {
    let builder = builder(config(|c| {
        c.shutdown_watch_termination_grace_period(Duration::from_secs(30))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    let (ticket_tx, ticket_rx) = tokio::sync::oneshot::channel();
    let ticket_tx = std::sync::Mutex::new(Some(ticket_tx));
    let svc = layer.layer(service_fn(move |req: Request<Empty<Bytes>>| {
        // The one call a WebSocket handler makes: keep the ticket with the upgraded socket.
        let ticket = lameduck_tokio::take_upgrade_ticket(&req);
        if let Some(tx) = ticket_tx.lock().unwrap().take() {
            let _ = tx.send(ticket);
        }
        async {
            let mut res = Response::new(Empty::<Bytes>::new());
            *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            Ok::<_, Infallible>(res)
        }
    }));
    let req = Request::builder()
        .uri("/ws")
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .body(Empty::new())
        .unwrap();
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SWITCHING_PROTOCOLS);
    res.into_body().collect().await.unwrap();
    let ticket = ticket_rx
        .await
        .unwrap()
        .expect("an upgrade request carries a ticket");
    // The 101's body ended, but the upgraded connection is still counted.
    assert_eq!(
        handle.in_flight(),
        lameduck::gate::InFlight {
            normal: 0,
            long_running: 1
        }
    );
    // Not running yet: the handle reports the machine's own phase.
    assert_eq!(handle.phase(), lameduck::Phase::Prepared);
    let run = tokio::spawn(server.run());
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        handle.phase(),
        lameduck::Phase::Draining,
        "the drain waits for the socket"
    );
    drop(ticket);
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(handle.phase(), lameduck::Phase::Exited);
}

#[tokio::test(start_paused = true)]
async fn event_streams_keep_their_events_until_their_turn_then_send_a_retry_hint() {
    let builder = builder(config(|c| {
        c.shutdown_delay(Duration::from_millis(300))
            .shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    // An event every 100 ms, without end.
    let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
        let notice = req.extensions().get::<ShutdownNotice>().cloned();
        let ticks = futures_util::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Bytes::from(format!("data: {n}\n\n")), n + 1))
        });
        let events = futures_util::StreamExt::map(
            lameduck_tokio::sse::end_at_turn(TokioRuntime, notice, ticks),
            |e| Ok::<_, Infallible>(http_body::Frame::data(e)),
        );
        Ok::<_, Infallible>(Response::new(http_body_util::StreamBody::new(events)))
    }));
    let started = tokio::time::Instant::now();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let req = Request::builder()
            .uri("/events")
            .header("accept", "text/event-stream")
            .body(Empty::new())
            .unwrap();
        let res = svc.clone().oneshot(req).await.unwrap();
        streams.push(tokio::spawn(async move {
            let mut body = res.into_body();
            let mut events = Vec::new();
            while let Some(frame) = body.frame().await {
                let data = frame.unwrap().into_data().unwrap();
                events.push((tokio::time::Instant::now(), data));
            }
            (events, tokio::time::Instant::now())
        }));
    }
    let run = tokio::spawn(server.run());
    tokio::time::sleep(Duration::from_millis(250)).await;
    handle.request_shutdown();
    let mut ends = Vec::new();
    for s in streams {
        let (events, ended) = s.await.unwrap();
        let (last_at, last) = events.last().unwrap();
        // Close-listener mode: the 503's Retry-After of 1 s.
        assert_eq!(&last[..], b"retry: 1000\n\n");
        assert_eq!(*last_at, ended, "the stream ends with its retry event");
        // The events kept coming through the 300 ms shutdown delay.
        let data = events
            .iter()
            .filter(|(_, e)| e.starts_with(b"data:"))
            .count();
        assert!(data >= 5, "{data} events: {events:?}");
        ends.push(ended - started);
    }
    ends.sort();
    // NotAcceptingNewRequest at 250 + 300 ms; max(3 / 10 s, 200/s): one turn every 5 ms.
    assert_eq!(
        ends,
        [
            Duration::from_millis(550),
            Duration::from_millis(555),
            Duration::from_millis(560)
        ]
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(handle.in_flight().long_running, 0);
}
