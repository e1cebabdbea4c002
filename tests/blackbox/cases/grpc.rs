//! The gRPC example server's gRPC contract (`docs/design.md#grpc`), with tonic's client over
//! real sockets and real signals: health turns `NOT_SERVING` at the signal while calls are
//! still served, unary calls in flight complete, streaming calls end with OK at the paced
//! rate, rejections are `UNAVAILABLE` with the pushback, deadlines are `DEADLINE_EXCEEDED`,
//! and the connection gets GOAWAY at `NotAcceptingNewRequest`.

use std::time::{Duration, Instant};

use lameduck_examples_grpc::grpc::{SleepRequest, TicksRequest, SERVICE};
use tonic::Code;

use crate::support::grpc::{channel, check, demo, tapped_channel, ServingStatus};
use crate::support::h2::{runtime, single_thread_runtime};
use crate::support::h2tap::seen;
use crate::support::*;

/// How soon health must say `NOT_SERVING` after the signal.
const NOT_SERVING_WITHIN: Duration = Duration::from_millis(50);

fn sleep_request(d: &str) -> SleepRequest {
    SleepRequest { duration: d.into() }
}

pub fn grpc_health_not_serving_while_calls_served(bin: &'static str) {
    let flags = ["--shutdown-delay", "1500ms"];
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    runtime().block_on(async {
        let ch = channel(addr).await;
        for name in ["", SERVICE] {
            assert_eq!(
                check(&ch, name).await.ok(),
                Some(ServingStatus::Serving),
                "{name:?}"
            );
        }
        // A Watch of the server's health sees the change as it happens.
        let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
        let mut watch = health
            .watch(tonic_health::pb::HealthCheckRequest {
                service: SERVICE.into(),
            })
            .await
            .expect("Watch")
            .into_inner();
        let first = watch
            .message()
            .await
            .expect("first Watch message")
            .expect("a message");
        assert_eq!(first.status, ServingStatus::Serving as i32);
        // A unary call in flight across the signal, and past the delay.
        let mut client = demo(&ch);
        let in_flight = tokio::spawn(async move { client.sleep(sleep_request("2500ms")).await });
        tokio::time::sleep(Duration::from_millis(300)).await;

        let sent = server.signal("TERM");
        let changed = tokio::time::timeout(Duration::from_secs(3), watch.message())
            .await
            .expect("a Watch message within 3 s of the signal")
            .expect("Watch stream")
            .expect("a message");
        let watch_after = sent.after.elapsed();
        assert_eq!(changed.status, ServingStatus::NotServing as i32);
        // Check, polled on the open channel.
        let mut polled = None;
        while sent.after.elapsed() < Duration::from_secs(1) {
            if check(&ch, "").await.ok() == Some(ServingStatus::NotServing) {
                polled = Some(sent.after.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let polled = polled.expect("Check never said NOT_SERVING");
        eprintln!(
            "{bin}: NOT_SERVING seen by Watch {watch_after:?}, by Check {polled:?} after kill"
        );
        assert!(
            watch_after <= NOT_SERVING_WITHIN && polled <= NOT_SERVING_WITHIN,
            "NOT_SERVING later than {NOT_SERVING_WITHIN:?}: Watch {watch_after:?}, Check {polled:?}"
        );
        assert_eq!(
            check(&ch, SERVICE).await.ok(),
            Some(ServingStatus::NotServing)
        );
        // Calls are still served during the delay, on the open channel and on a new one.
        for ch in [ch.clone(), channel(addr).await] {
            let reply = demo(&ch)
                .sleep(sleep_request("10ms"))
                .await
                .expect("Sleep during the delay");
            assert_eq!(reply.get_ref().message, "Welcome gRPC Server");
        }
        assert!(
            !server.signals().has(NOT_ACCEPTING),
            "the delay was meant to last during these calls\n{}",
            server.describe()
        );
        let done = in_flight.await.expect("task");
        assert!(
            done.is_ok(),
            "the call in flight across the termination: {done:?}"
        );
    });
    server.assert_exit(0, Duration::from_secs(15));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(&flags);
}

pub fn grpc_streams_end_ok_paced(bin: &'static str) {
    const STREAMS: usize = 200;
    const CHANNELS: usize = 4;
    let flags = [
        "--shutdown-delay",
        "200ms",
        "--shutdown-watch-termination-grace-period",
        "10s",
    ];
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    let ends = runtime().block_on(async {
        let mut channels = Vec::new();
        for _ in 0..CHANNELS {
            channels.push(channel(addr).await);
        }
        let mut tasks = Vec::new();
        for i in 0..STREAMS {
            let mut client = demo(&channels[i % CHANNELS]);
            let (started_tx, started_rx) = tokio::sync::oneshot::channel();
            tasks.push((
                started_rx,
                tokio::spawn(async move {
                    let mut stream = client.ticks(TicksRequest {}).await?.into_inner();
                    let first = stream.message().await?;
                    let _ = started_tx.send(first.is_some());
                    let mut ticks = 1;
                    let end = tokio::time::timeout(Duration::from_secs(20), async {
                        while stream.message().await?.is_some() {
                            ticks += 1;
                        }
                        Ok::<_, tonic::Status>(())
                    })
                    .await
                    .map_err(|_| tonic::Status::unknown("still streaming after 20 s"))?;
                    end.map(|()| (Instant::now(), ticks))
                }),
            ));
        }
        let mut handles = Vec::new();
        for (started, handle) in tasks {
            assert_eq!(started.await.ok(), Some(true), "a stream did not start");
            handles.push(handle);
        }
        server.signal("TERM");
        let mut ends = Vec::new();
        for h in handles {
            ends.push(h.await.expect("task"));
        }
        ends
    });
    let failed: Vec<_> = ends.iter().filter_map(|e| e.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {STREAMS} streams did not end with OK, e.g. {:?}\n{}",
        failed.len(),
        failed.first(),
        server.describe()
    );
    let times: Vec<Instant> = ends.iter().flatten().map(|(at, _)| *at).collect();
    let (first, last) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let not_accepting = server.wait_signal(NOT_ACCEPTING, Duration::from_secs(5));
    let spread = last - first;
    eprintln!(
        "{bin}: {STREAMS} streams ended OK from {:?} to {:?} after NotAcceptingNewRequest",
        first.saturating_duration_since(not_accepting),
        last.saturating_duration_since(not_accepting)
    );
    // 200 streams at max(200 / 10 s, 200/s) = 200/s: about one second, never all at once.
    assert!(
        spread >= Duration::from_millis(600),
        "stream ends not paced: all {STREAMS} within {spread:?}"
    );
    assert!(
        last.saturating_duration_since(not_accepting) < Duration::from_secs(10),
        "streams ended after the grace period"
    );
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}

pub fn grpc_retry_after_mode_unavailable_with_pushback(bin: &'static str) {
    let flags = ["--shutdown-delay", "200ms", "--shutdown-send-retry-after"];
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    single_thread_runtime().block_on(async {
        let ch = channel(addr).await;
        // Keeps the drain going while the new call is made.
        let mut client = demo(&ch);
        let held = tokio::spawn(async move { client.sleep(sleep_request("2s")).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.signal("TERM");
        server.wait_signal(NOT_ACCEPTING, Duration::from_secs(5));
        let status = demo(&channel(addr).await)
            .sleep(sleep_request("10ms"))
            .await
            .expect_err("a new call after NotAcceptingNewRequest is rejected");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        let pushback = status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .map(|v| v.to_str().ok());
        assert_eq!(pushback, Some(Some("5000")), "{status:?}");
        // The same answer seen as HTTP: 200, trailers-only.
        let raw = raw_grpc_call(addr, &sleep_request("10ms"), &[]).await;
        assert_eq!(raw.0, 200, "{raw:?}");
        assert_eq!(
            raw.1.get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"14"[..]),
            "{raw:?}"
        );
        assert!(
            raw.2,
            "not trailers-only (the head must end the stream): {raw:?}"
        );
        let held = held.await.expect("task");
        assert!(held.is_ok(), "the call in flight: {held:?}");
    });
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}

/// A gRPC `Sleep` call by hand over h2c, with `headers` added: the status, the head's
/// headers, and whether the head ended the stream (no data, no trailers).
async fn raw_grpc_call(
    addr: std::net::SocketAddr,
    message: &SleepRequest,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, bool) {
    use http_body_util::{BodyExt, Full};
    use prost::Message;
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake::<_, Full<bytes::Bytes>>(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("h2c handshake");
    tokio::spawn(conn);
    // The length-prefixed message: no compression flag, the length, the bytes.
    let encoded = message.encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(encoded.len()).expect("small").to_be_bytes());
    body.extend_from_slice(&encoded);
    let mut request = http::Request::post(format!("http://{addr}/lameduck.example.Demo/Sleep"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(body)))
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let (parts, body) = response.into_parts();
    let ended = http_body::Body::is_end_stream(&body);
    let collected = body.collect().await.expect("body");
    let trailers_only = ended && collected.trailers().is_none();
    (parts.status.as_u16(), parts.headers, trailers_only)
}

pub fn grpc_deadline_exceeded(bin: &'static str) {
    let flags = ["--request-timeout", "1s"];
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    runtime().block_on(async {
        let ch = channel(addr).await;
        // Past the server's request timeout.
        let started = Instant::now();
        let status = demo(&ch)
            .sleep(sleep_request("3s"))
            .await
            .expect_err("past the timeout");
        let took = started.elapsed();
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
        assert!(
            status.message().contains("allotted timeout"),
            "the server's answer, not the client's: {status:?}"
        );
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(2),
            "{took:?}"
        );
        // The client's grpc-timeout, shorter than the request timeout. (tonic's client
        // enforces it too, so the call is made by hand to see the server's answer.)
        let started = Instant::now();
        let raw = raw_grpc_call(addr, &sleep_request("3s"), &[("grpc-timeout", "300m")]).await;
        let took = started.elapsed();
        assert_eq!(raw.0, 200, "{raw:?}");
        assert_eq!(
            raw.1.get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"4"[..]),
            "{raw:?}"
        );
        assert!(raw.2, "not trailers-only: {raw:?}");
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_millis(900),
            "grpc-timeout not honoured: {took:?}"
        );
        // A call within the timeout still succeeds.
        demo(&ch)
            .sleep(sleep_request("100ms"))
            .await
            .expect("a short call");
    });
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}

pub fn grpc_goaway_at_not_accepting(bin: &'static str) {
    let flags = ["--shutdown-delay", "300ms"];
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    let (seen_tap, result) = runtime().block_on(async {
        let (ch, seen_tap) = tapped_channel(addr).await;
        demo(&ch)
            .sleep(sleep_request("1ms"))
            .await
            .expect("warm-up call");
        let mut client = demo(&ch);
        let in_flight = tokio::spawn(async move { client.sleep(sleep_request("1500ms")).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.signal("TERM");
        (seen_tap, in_flight.await.expect("task"))
    });
    assert!(
        result.is_ok(),
        "the call in flight across GOAWAY: {result:?}"
    );
    let not_accepting = server.wait_signal(NOT_ACCEPTING, Duration::from_secs(5));
    let goaways = seen(&seen_tap, |s| s.goaways.clone());
    assert!(
        !goaways.is_empty(),
        "no GOAWAY on the gRPC connection\n{}",
        server.describe()
    );
    assert!(
        goaways.iter().all(|g| g.error_code == 0),
        "GOAWAY NO_ERROR: {goaways:?}"
    );
    let lag = goaways[0].at.saturating_duration_since(not_accepting);
    assert!(
        goaways[0].at + Duration::from_millis(50) >= not_accepting && lag < Duration::from_secs(1),
        "GOAWAY {lag:?} after NotAcceptingNewRequest (must follow it closely)"
    );
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}
