//! The WebSocket goodbye on actix-web (`lameduck_actix::websocket`), over loopback in real
//! time with generous bounds: an actix-ws echo serves until its turn in the drain, then the
//! client gets Close 1001 "server shutting down" and its answer is counted; a client that
//! never reads is cut within the grace period and counted unanswered; a client that sends
//! garbage after the handshake gets the error close RFC 6455 gives it (1002, 1007, 1009), and
//! the server carries on and exits 0; a client that closes its connection right after its
//! Close has its Close counted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse};
use actix_ws::Message;
use futures_util::{SinkExt, StreamExt};
use lameduck::Config;
use lameduck_actix::websocket::{self, CloseOutcome, GoingAway};
use lameduck_actix::{AutoH2cServer, Handle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as ClientMessage;

mod support;
use support::{exit_code, serve_on_loopback, until_closed, WAIT};

/// The grace period of the long-running drain.
const GRACE: Duration = Duration::from_secs(1);

/// How each socket's goodbye went (`None`: the request carried no shutdown).
type Outcomes = UnboundedSender<Option<CloseOutcome>>;

/// `/ws`: echoes text and binary messages until the socket's turn, then says goodbye.
async fn echo(
    req: HttpRequest,
    body: web::Payload,
    outcomes: web::Data<Outcomes>,
) -> Result<HttpResponse, actix_web::Error> {
    let (response, session, stream) = websocket::handle(&req, body)?;
    let shutdown = websocket::shutdown(&req);
    let outcomes = outcomes.get_ref().clone();
    actix_web::rt::spawn(async move {
        let Some(shutdown) = shutdown else {
            let _ = outcomes.send(None);
            return;
        };
        let mut ws = GoingAway::new(shutdown, session, stream);
        while let Some(Ok(message)) = ws.next().await {
            let sent = match message {
                Message::Text(text) => ws.session().text(text).await,
                Message::Binary(bytes) => ws.session().binary(bytes).await,
                _ => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
        let _ = outcomes.send(Some(ws.close().await));
    });
    Ok(response)
}

/// A running lifecycle (shutdown delay 0, grace period [`GRACE`]) on one loopback listener.
struct Running {
    addr: SocketAddr,
    handle: Handle,
    run: tokio::task::JoinHandle<u8>,
    outcomes: UnboundedReceiver<Option<CloseOutcome>>,
}

fn start() -> Running {
    let config = Config::builder()
        .shutdown_watch_termination_grace_period(GRACE)
        .build()
        .unwrap();
    let mut server = support::prepare(config);
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    let (tx, outcomes) = unbounded_channel();
    let http = AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .app_data(web::Data::new(tx.clone()))
            .route("/ws", web::get().to(echo))
    });
    let addr = serve_on_loopback(&mut server, http, |http, listener| {
        http.workers(1).listen(listener)
    });
    let support::Running { addr, handle, run } = support::spawn_run(addr, server);
    Running {
        addr,
        handle,
        run,
        outcomes,
    }
}

impl Running {
    async fn outcome(&mut self) -> Option<CloseOutcome> {
        tokio::time::timeout(WAIT, self.outcomes.recv())
            .await
            .expect("the socket's task ends")
            .expect("the server is up")
    }

    /// Waits for the run's exit, which must be code 0 with `closes` Close frames sent, of which
    /// `unanswered` went unanswered; returns how long it took from `since`.
    async fn exits_with(self, since: Instant, closes: u64, unanswered: u64) -> Duration {
        let shared = self.handle.shared().clone();
        let code = exit_code(self.run, WAIT).await;
        let took = since.elapsed();
        assert_eq!(code, 0);
        let goodbyes = shared.counters().goodbyes();
        let counted = (goodbyes.websocket_closes, goodbyes.websocket_unanswered);
        assert_eq!(counted, (closes, unanswered), "{goodbyes:?}");
        took
    }
}

type Client = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn connect(addr: SocketAddr) -> Client {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, response) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp),
    )
    .await
    .expect("the handshake ends")
    .unwrap();
    assert_eq!(response.status(), 101);
    ws
}

/// The next message the client reads, within [`WAIT`].
async fn read(ws: &mut Client) -> Option<ClientMessage> {
    tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("a message or the end")
        .and_then(Result::ok)
}

async fn echoes(ws: &mut Client) {
    ws.send(ClientMessage::text("hello")).await.unwrap();
    assert_eq!(read(ws).await, Some(ClientMessage::text("hello")));
    ws.send(ClientMessage::binary(vec![1u8, 2, 3]))
        .await
        .unwrap();
    assert_eq!(read(ws).await, Some(ClientMessage::binary(vec![1u8, 2, 3])));
}

#[actix_web::test]
async fn a_socket_gets_going_away_and_its_answer_is_counted() {
    let mut running = start();
    let mut ws = connect(running.addr).await;
    echoes(&mut ws).await;
    // actix-ws answers no ping itself: the wrapper does.
    ws.send(ClientMessage::Ping(b"p".to_vec().into()))
        .await
        .unwrap();
    assert_eq!(
        read(&mut ws).await,
        Some(ClientMessage::Pong(b"p".to_vec().into()))
    );

    let since = Instant::now();
    assert!(running.handle.request_shutdown());
    let close = loop {
        match read(&mut ws).await {
            Some(ClientMessage::Close(frame)) => break frame.expect("a close frame"),
            Some(_) => {}
            None => panic!("the connection ended without a Close"),
        }
    };
    assert_eq!(close.code, CloseCode::Away);
    assert_eq!(close.reason.as_str(), "server shutting down");
    // Reading on sends the answer (tungstenite queued it) and sees the server let go.
    while read(&mut ws).await.is_some() {}
    assert_eq!(running.outcome().await, Some(CloseOutcome::Answered));
    running.exits_with(since, 1, 0).await;
}

#[actix_web::test]
async fn a_client_that_closes_first_gets_its_answer() {
    let mut running = start();
    let mut ws = connect(running.addr).await;
    echoes(&mut ws).await;
    ws.close(None).await.unwrap();
    while read(&mut ws).await.is_some() {}
    assert_eq!(running.outcome().await, Some(CloseOutcome::ClientClosed));
    let since = Instant::now();
    assert!(running.handle.request_shutdown());
    running.exits_with(since, 0, 0).await;
}

#[actix_web::test]
async fn a_client_that_never_answers_is_cut_within_the_grace_period() {
    let mut running = start();
    let mut ws = connect(running.addr).await;
    echoes(&mut ws).await;
    let since = Instant::now();
    assert!(running.handle.request_shutdown());
    // The client keeps its connection open and never reads again.
    assert_eq!(running.outcome().await, Some(CloseOutcome::Cut));
    // Cut ahead of the grace period's end (by actix's disconnect linger, or half of what was
    // left), not before the client had time to answer.
    let cut = since.elapsed();
    assert!(cut >= GRACE / 4 && cut < GRACE, "cut after {cut:?}");
    let took = running.exits_with(since, 1, 1).await;
    // Shutdown delay 0 + the grace period + a generous bound.
    assert!(
        took < GRACE + Duration::from_secs(4),
        "the run took {took:?}"
    );
    drop(ws);
}

/// A WebSocket handshake over a raw connection; the connection once `101` has come.
async fn raw_upgrade(addr: SocketAddr) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        b"GET /ws HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
          sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(WAIT, async {
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(conn.read(&mut byte).await.unwrap(), 1, "the head ends");
            head.push(byte[0]);
        }
    })
    .await
    .expect("the 101 comes");
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    conn
}

/// The status of the server's Close frame (unmasked, its payload under 126 bytes) that
/// `bytes` start with.
fn close_status(bytes: &[u8]) -> Option<u16> {
    match bytes {
        [0x88, len, hi, lo, rest @ ..] if usize::from(*len) == rest.len() + 2 => {
            Some(u16::from_be_bytes([*hi, *lo]))
        }
        _ => None,
    }
}

/// The server's Close frame, read whole within [`WAIT`].
async fn read_close(conn: &mut TcpStream) -> Vec<u8> {
    let mut head = [0u8; 2];
    let mut frame = tokio::time::timeout(WAIT, async {
        conn.read_exact(&mut head).await.unwrap();
        let mut payload = vec![0u8; usize::from(head[1] & 0x7F)];
        conn.read_exact(&mut payload).await.unwrap();
        payload
    })
    .await
    .expect("the Close comes");
    frame.splice(0..0, head);
    frame
}

#[actix_web::test]
async fn garbage_after_the_handshake_gets_the_error_close_rfc_6455_gives_it() {
    let mut running = start();
    let mut oversized = vec![0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0];
    oversized.resize(oversized.len() + 65_537, b'x');
    let (protocol, not_utf8, too_big) = (1002, 1007, 1009);
    let garbage: &[(&[u8], u16)] = &[
        // An unmasked text frame from the client.
        (&[0x81, 0x02, b'h', b'i'], protocol),
        // A reserved opcode.
        (&[0x83, 0x80, 0, 0, 0, 0], protocol),
        // A 64-bit length with its most significant bit set (actix-ws: past any limit).
        (
            &[0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            too_big,
        ),
        // A frame past the size limit (64 KiB), sent whole.
        (&oversized, too_big),
        // Text that is not UTF-8.
        (&[0x81, 0x82, 0, 0, 0, 0, 0xFF, 0xFE], not_utf8),
        // A Close with a reserved code (999).
        (&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE7], protocol),
        // A continuation nothing started.
        (&[0x80, 0x80, 0, 0, 0, 0], protocol),
        // Bytes of no frame at all.
        (
            b"\xde\xad\xbe\xef GET / HTTP/1.1\r\n\r\n\x00\xff\x00\xff",
            protocol,
        ),
    ];
    for (i, (bytes, status)) in garbage.iter().enumerate() {
        let mut conn = raw_upgrade(running.addr).await;
        conn.write_all(bytes).await.unwrap();
        let head = &bytes[..bytes.len().min(16)];
        let answer = if i == 0 {
            // The server closes the connection itself (actix lingers up to its client
            // disconnect timeout, 1 s, for the client to close first).
            until_closed(&mut conn, WAIT).await
        } else {
            read_close(&mut conn).await
        };
        assert_eq!(
            close_status(&answer),
            Some(*status),
            "after {head:?}: {answer:?}"
        );
        assert_eq!(
            running.outcome().await,
            Some(CloseOutcome::Failed),
            "after {head:?}"
        );
    }
    // A frame cut short, then the client's end of the connection.
    let mut conn = raw_upgrade(running.addr).await;
    conn.write_all(&[0x81, 0x85, 0, 0]).await.unwrap();
    conn.shutdown().await.unwrap();
    let _ = until_closed(&mut conn, WAIT).await;
    assert_eq!(running.outcome().await, Some(CloseOutcome::Failed));

    // The server carries on.
    let mut ws = connect(running.addr).await;
    echoes(&mut ws).await;
    ws.close(None).await.unwrap();
    while read(&mut ws).await.is_some() {}
    assert_eq!(running.outcome().await, Some(CloseOutcome::ClientClosed));

    let since = Instant::now();
    assert!(running.handle.request_shutdown());
    running.exits_with(since, 0, 0).await;
}

#[actix_web::test]
async fn a_client_that_closes_its_connection_right_after_its_close_has_it_counted() {
    // Close 1000, masked (with a zero key), as a client sends it.
    const CLIENT_CLOSE: [u8; 8] = [0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE8];
    let mut running = start();
    // Before the shutdown: the client closes first, and at once.
    let mut conn = raw_upgrade(running.addr).await;
    conn.write_all(&CLIENT_CLOSE).await.unwrap();
    drop(conn);
    assert_eq!(running.outcome().await, Some(CloseOutcome::ClientClosed));

    // At the goodbye: the answer, then the connection's end, in one go (as Go's
    // golang.org/x/net/websocket does): the answer is not lost to the disconnect.
    let mut conn = raw_upgrade(running.addr).await;
    let since = Instant::now();
    assert!(running.handle.request_shutdown());
    let close = read_close(&mut conn).await;
    assert_eq!(close_status(&close), Some(1001), "{close:?}");
    conn.write_all(&CLIENT_CLOSE).await.unwrap();
    drop(conn);
    assert_eq!(running.outcome().await, Some(CloseOutcome::Answered));
    running.exits_with(since, 1, 0).await;
}
