//! The WebSocket goodbye (`lameduck_tokio::websocket`) under tokio's paused clock, over an
//! in-memory socket whose messages the test reads and writes: the turn in the paced drain,
//! Close 1001, the client's answer, the cut of a silent client before the grace period ends,
//! and the protocol's error close.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use lameduck_tokio::websocket::{going_away, CloseOutcome, MessageKind, WebSocketShutdown};

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use lameduck_tokio::{AdmissionLayer, TokioRuntime};
use tokio::task::JoinHandle;
use tower::{service_fn, Layer, ServiceExt};

use crate::support::builder;
use crate::{config, serve_idle_api, PreparedServer, RunningServer};

/// A WebSocket message, as far as the goodbye cares.
#[derive(Clone, Debug, PartialEq)]
enum Message {
    Text(String),
    Close(u16, &'static str),
}

const KIND: MessageKind<Message, Refused> = MessageKind {
    close: Message::Close,
    is_close: |m| matches!(m, Message::Close(..)),
    error_status: |refused| refused.0,
};

/// A frame the socket refused (garbage, an invalid close code, text that is not UTF-8), with
/// the close status that answers it.
#[derive(Debug)]
struct Refused(u16);

/// A socket whose client has gone: the channel to it is closed.
fn gone<T>(_: T) -> Refused {
    Refused(1002)
}

/// The server's end of an in-memory socket; `Err(Refused)` from the client stands for a frame
/// the socket refused.
struct ServerEnd {
    incoming: UnboundedReceiver<Result<Message, Refused>>,
    outgoing: UnboundedSender<Message>,
}

impl Stream for ServerEnd {
    type Item = Result<Message, Refused>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.incoming.poll_next_unpin(cx)
    }
}

impl Sink<Message> for ServerEnd {
    type Error = Refused;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        self.outgoing.poll_ready_unpin(cx).map_err(gone)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Refused> {
        self.outgoing.start_send_unpin(item).map_err(gone)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        self.outgoing.poll_flush_unpin(cx).map_err(gone)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        self.outgoing.poll_close_unpin(cx).map_err(gone)
    }
}

/// The client's end: what it sends, and what it received, timed.
struct ClientEnd {
    send: UnboundedSender<Result<Message, Refused>>,
    received: UnboundedReceiver<Message>,
}

/// Opens a socket through the admission layer (an upgrade request, so it is counted as
/// long-running) and serves it in a task: echo until the turn, then the goodbye.
async fn open(layer: &AdmissionLayer<TokioRuntime>) -> (ClientEnd, JoinHandle<CloseOutcome>) {
    let (shutdown_tx, shutdown_rx) = futures_channel::oneshot::channel();
    let shutdown_tx = std::sync::Mutex::new(Some(shutdown_tx));
    let svc = layer.layer(service_fn(move |req: Request<Empty<Bytes>>| {
        let shutdown = WebSocketShutdown::take(&req);
        if let Some(tx) = shutdown_tx.lock().unwrap().take() {
            let _ = tx.send(shutdown);
        }
        async { Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new())) }
    }));
    let req = Request::builder()
        .uri("/ws")
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .body(Empty::new())
        .unwrap();
    let res = svc.oneshot(req).await.unwrap();
    // The 101's (empty) body ends at once; the socket stays counted through its shutdown.
    let _ = res.into_body().collect().await;
    let shutdown = shutdown_rx
        .await
        .unwrap()
        .expect("an upgrade is long-running");
    let (client_send, incoming) = unbounded();
    let (outgoing, received) = unbounded();
    let socket = ServerEnd { incoming, outgoing };
    let serve = tokio::spawn(async move {
        let mut ws = going_away(shutdown, socket, KIND);
        while let Some(Ok(message)) = ws.next().await {
            if ws.send(message).await.is_err() {
                break;
            }
        }
        ws.close().await
    });
    let client = ClientEnd {
        send: client_send,
        received,
    };
    (client, serve)
}

/// Echo, then the Close: the client answers (or not); returns when the Close came.
async fn client(mut end: ClientEnd, answers: bool) -> (tokio::time::Instant, Message) {
    end.send
        .unbounded_send(Ok(Message::Text("hi".into())))
        .unwrap();
    assert_eq!(end.received.next().await, Some(Message::Text("hi".into())));
    let close = end.received.next().await.unwrap();
    let at = tokio::time::Instant::now();
    if answers {
        end.send
            .unbounded_send(Ok(Message::Close(1000, "")))
            .unwrap();
    }
    // A silent client keeps its end open until the server lets the connection go.
    while end.received.next().await.is_some() {}
    drop(end.send);
    (at, close)
}

#[tokio::test(start_paused = true)]
async fn websockets_close_1001_at_their_turn_and_a_silent_client_is_cut_before_the_grace_ends() {
    let builder = builder(config(|c| {
        c.shutdown_delay(Duration::from_millis(300))
            .shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    let (answering, answering_serve) = open(&layer).await;
    let (silent, silent_serve) = open(&layer).await;
    let started = tokio::time::Instant::now();
    let answering = tokio::spawn(client(answering, true));
    let silent = tokio::spawn(client(silent, false));
    let run = tokio::spawn(server.run());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(handle.in_flight().long_running, 2);
    handle.request_shutdown();

    let going_away = Message::Close(1001, "server shutting down");
    let (answered_at, close) = answering.await.unwrap();
    assert_eq!(close, going_away);
    let (silent_at, close) = silent.await.unwrap();
    assert_eq!(close, going_away);
    // NotAcceptingNewRequest at 250 + 300 ms; one turn every 5 ms (200/s).
    let mut turns = [answered_at - started, silent_at - started];
    turns.sort();
    assert_eq!(
        turns,
        [Duration::from_millis(550), Duration::from_millis(555)]
    );
    assert_eq!(answering_serve.await.unwrap(), CloseOutcome::Answered);
    assert_eq!(silent_serve.await.unwrap(), CloseOutcome::Cut);
    // The silent client is cut 100 ms before the grace period ends (550 ms + 10 s), so the
    // drain ends with it, not by its timer.
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let exited = tokio::time::Instant::now() - started;
    assert!(
        exited >= Duration::from_millis(10_450) && exited < Duration::from_millis(10_550),
        "{exited:?}"
    );
    let goodbyes = handle.shared().counters().goodbyes();
    assert_eq!(
        (goodbyes.websocket_closes, goodbyes.websocket_unanswered),
        (2, 1)
    );
    assert_eq!(handle.in_flight().long_running, 0);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_breaks_the_protocol_gets_its_error_close_and_one_that_closes_first_its_answer(
) {
    let builder = builder(config(|c| {
        c.shutdown_delay(Duration::from_millis(300))
            .shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let RunningServer { handle, layer, run } = serve_idle_api(builder).start();
    // Each refused frame gets the close status the socket's error calls for, with its reason.
    for (status, reason) in [(1002, "protocol error"), (1007, "invalid payload data")] {
        let (mut broken, broken_serve) = open(&layer).await;
        broken.send.unbounded_send(Err(Refused(status))).unwrap();
        assert_eq!(
            broken.received.next().await,
            Some(Message::Close(status, reason))
        );
        assert_eq!(broken_serve.await.unwrap(), CloseOutcome::Failed);
    }
    let (leaving, leaving_serve) = open(&layer).await;
    leaving
        .send
        .unbounded_send(Ok(Message::Close(1000, "bye")))
        .unwrap();
    assert_eq!(leaving_serve.await.unwrap(), CloseOutcome::ClientClosed);
    // Neither holds the drain: nothing is in flight, and the exit is at once.
    assert_eq!(handle.in_flight().long_running, 0);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(handle.shared().counters().goodbyes().websocket_closes, 0);
}
