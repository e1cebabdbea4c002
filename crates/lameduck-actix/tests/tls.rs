//! `AutoH2cServer::listen_tls`: TLS terminated by lameduck, below the HTTP/2 frame watcher.
//! HTTP/1.1 and HTTP/2 (chosen by ALPN) are served over TLS next to a plain-text listener; a
//! plaintext request on the TLS port is answered 400 and the server carries on; a silent
//! client is cut at the handshake timeout, and a second after the stop when the server stops
//! first (counted); an HTTP/2 connection over TLS gets the same GOAWAY (and PING) as h2c when
//! the server stops accepting, and the server exits 0.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper::{Request, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck::connection::CutKind;
use lameduck::Config;
use lameduck_actix::{AutoH2cServer, Handle, ServerTls};
use lameduck_tls::rustls;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use lameduck_test_support::h2::{frame, ping_ack, ACK, GOAWAY, PING, SETTINGS};
use lameduck_test_support::plaintext::plaintext_post;

mod support;
use support::{exit_code, WAIT};

/// A CA and a certificate it issued for 127.0.0.1, written to PEM files.
struct Certs {
    dir: PathBuf,
    ca: rustls::pki_types::CertificateDer<'static>,
}

impl Certs {
    fn new(name: &str) -> Certs {
        let dir =
            std::env::temp_dir().join(format!("lameduck-actix-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
        Certs {
            dir,
            ca: ca.der().clone(),
        }
    }

    fn server_tls(&self, handshake_timeout: Duration) -> ServerTls {
        ServerTls::builder(self.dir.join("tls.crt"), self.dir.join("tls.key"))
            .handshake_timeout(handshake_timeout)
            .build()
            .unwrap()
    }

    /// A client trusting the CA, offering `alpn`.
    fn connector(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running lifecycle with one TLS and one plain-text listener; the `run` task's exit code.
struct Running {
    tls_addr: SocketAddr,
    plain_addr: SocketAddr,
    handle: Handle,
    run: tokio::task::JoinHandle<u8>,
}

fn start(tls: &ServerTls) -> Running {
    // Several servers in one process: none of them owns the process's signals.
    let mut server = support::prepare(Config::default());
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    let http = AutoH2cServer::new(move || {
        App::new().wrap(admission.clone()).route(
            "/",
            web::get().to(|req: HttpRequest| async move {
                format!("{} {:?}", req.connection_info().scheme(), req.version())
            }),
        )
    });
    let tls_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let plain_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (tls_addr, plain_addr) = (
        tls_listener.local_addr().unwrap(),
        plain_listener.local_addr().unwrap(),
    );
    lameduck_actix::serve(&mut server, "api", http, |http| {
        http.workers(1)
            .listen_tls(tls_listener, tls)?
            .listen(plain_listener)
    })
    .unwrap();
    let handle = server.handle();
    let run = actix_rt::spawn(async move { server.run().await.unwrap() });
    Running {
        tls_addr,
        plain_addr,
        handle,
        run,
    }
}

async fn tls_connect(
    certs: &Certs,
    addr: SocketAddr,
    alpn: &[&[u8]],
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    certs.connector(alpn).connect(name, tcp).await
}

/// GET / over HTTP/1.1: the status and body.
async fn get_http1<T>(io: T) -> (u16, String)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get("/")
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    assert_eq!(res.version(), Version::HTTP_11);
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// GET / over HTTP/2: the status and body.
async fn get_http2(io: TlsStream<TcpStream>) -> (u16, String) {
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = Request::get("https://127.0.0.1/")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    assert_eq!(res.version(), Version::HTTP_2);
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Waits for the server's worker to count `n` failed handshakes (it may count the failure just
/// after the client saw the connection close).
async fn failures_reach(tls: &ServerTls, n: u64) {
    for _ in 0..200 {
        if tls.handshake_failures() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(tls.handshake_failures(), n);
}

async fn stop(running: Running) {
    support::stop(&running.handle, running.run).await;
}

#[actix_web::test]
async fn http1_and_http2_by_alpn_and_plaintext_is_answered_400() {
    let certs = Certs::new("alpn");
    let tls = certs.server_tls(Duration::from_secs(10));
    let running = start(&tls);

    let io = tls_connect(&certs, running.tls_addr, &[b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(io.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(get_http1(io).await, (200, "https HTTP/1.1".into()));

    let io = tls_connect(&certs, running.tls_addr, &[b"h2", b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(io.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(get_http2(io).await, (200, "https HTTP/2.0".into()));

    // No ALPN: HTTP/1.1.
    let io = tls_connect(&certs, running.tls_addr, &[]).await.unwrap();
    assert_eq!(get_http1(io).await, (200, "https HTTP/1.1".into()));

    // Plaintext HTTP on the TLS port: 400, what the client sent (its body comes after the
    // answer) read and dropped, then a clean close (a FIN, no reset); the failure counted.
    let addr = running.tls_addr;
    let exchange = tokio::task::spawn_blocking(move || plaintext_post(addr, 32 * 1024))
        .await
        .unwrap();
    assert!(exchange.body_sent.is_ok(), "{:?}", exchange.body_sent);
    assert_eq!(exchange.answer, lameduck_tls::PLAINTEXT_HTTP_RESPONSE);
    assert!(
        exchange.end.is_ok(),
        "a FIN, not a reset: {:?}",
        exchange.end
    );
    drop(exchange.stream);
    failures_reach(&tls, 1).await;

    // The server carries on, on both listeners.
    let io = tls_connect(&certs, running.tls_addr, &[b"h2"])
        .await
        .unwrap();
    assert_eq!(get_http2(io).await, (200, "https HTTP/2.0".into()));
    let tcp = TcpStream::connect(running.plain_addr).await.unwrap();
    assert_eq!(get_http1(tcp).await, (200, "http HTTP/1.1".into()));

    stop(running).await;
}

#[actix_web::test]
async fn a_silent_client_is_cut_at_the_handshake_timeout() {
    let certs = Certs::new("timeout");
    let tls = certs.server_tls(Duration::from_millis(300));
    let running = start(&tls);

    let mut silent = TcpStream::connect(running.tls_addr).await.unwrap();
    // Another client is served meanwhile: the handshake does not hold the accept loop.
    let io = tls_connect(&certs, running.tls_addr, &[b"h2"])
        .await
        .unwrap();
    assert_eq!(get_http2(io).await, (200, "https HTTP/2.0".into()));

    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("closed at the handshake timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    failures_reach(&tls, 1).await;

    stop(running).await;
}

async fn read_frame(io: &mut TlsStream<TcpStream>) -> (u8, u8, Vec<u8>) {
    let mut head = [0u8; 9];
    io.read_exact(&mut head).await.unwrap();
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0; len];
    io.read_exact(&mut payload).await.unwrap();
    (head[3], head[4], payload)
}

/// Reads frames until one of type `kind`, acknowledging the server's SETTINGS.
async fn read_until(io: &mut TlsStream<TcpStream>, kind: u8) -> (u8, Vec<u8>) {
    loop {
        let (t, flags, payload) = read_frame(io).await;
        if t == SETTINGS && flags & 1 == 0 {
            io.write_all(&frame(SETTINGS, ACK, 0, &[])).await.unwrap();
        }
        if t == kind {
            return (flags, payload);
        }
    }
}

#[actix_web::test]
async fn http2_over_tls_gets_goaway_when_the_server_stops_accepting() {
    let certs = Certs::new("goaway");
    let tls = certs.server_tls(Duration::from_secs(10));
    let running = start(&tls);

    let mut io = tls_connect(&certs, running.tls_addr, &[b"h2"])
        .await
        .unwrap();
    io.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    io.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    // The server's SETTINGS, then its acknowledgement of ours: the connection is served.
    let deadline = Duration::from_secs(5);
    tokio::time::timeout(deadline, read_until(&mut io, SETTINGS))
        .await
        .unwrap();

    assert!(running.handle.request_shutdown());
    // GOAWAY with the highest stream id, and a PING; once the PING is acknowledged, the
    // final GOAWAY naming the last stream the client opened (none: 0).
    let (_, first) = tokio::time::timeout(deadline, read_until(&mut io, GOAWAY))
        .await
        .expect("a GOAWAY");
    assert_eq!(first[..4], [0x7f, 0xff, 0xff, 0xff]);
    let (flags, ping) = tokio::time::timeout(deadline, read_until(&mut io, PING))
        .await
        .expect("a PING");
    assert_eq!(flags & 1, 0);
    io.write_all(&ping_ack(&ping)).await.unwrap();
    let (_, last) = tokio::time::timeout(deadline, read_until(&mut io, GOAWAY))
        .await
        .expect("the final GOAWAY");
    assert_eq!(last[..8], [0, 0, 0, 0, 0, 0, 0, 0]);
    drop(io);

    let code = exit_code(running.run, WAIT).await;
    assert_eq!(code, 0);
}

#[actix_web::test]
async fn a_termination_waits_for_a_handshake_in_progress() {
    let certs = Certs::new("in-progress");
    let tls = certs.server_tls(Duration::from_secs(5));
    let running = start(&tls);

    // Accepted, its handshake not begun when the server stops accepting.
    let tcp = TcpStream::connect(running.tls_addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(running.handle.request_shutdown());
    // Longer than actix's wait after the drain: the handshake, which has a second from the
    // stop, is still waited for.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !running.run.is_finished(),
        "the lifecycle waits for the handshake"
    );
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut io = certs.connector(&[b"h2"]).connect(name, tcp).await.unwrap();
    io.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    io.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    // The server stopped accepting: the connection says GOAWAY at once.
    let deadline = Duration::from_secs(5);
    let (_, first) = tokio::time::timeout(deadline, read_until(&mut io, GOAWAY))
        .await
        .expect("a GOAWAY");
    assert_eq!(first[..4], [0x7f, 0xff, 0xff, 0xff]);
    drop(io);

    let code = exit_code(running.run, WAIT).await;
    assert_eq!(code, 0);
    assert_eq!(tls.handshake_failures(), 0);
}

#[actix_web::test]
async fn a_handshake_unfinished_at_the_stop_is_cut_a_second_later_and_counted() {
    let certs = Certs::new("unfinished");
    // The handshake timeout is far: the stop, not the timeout, ends the handshake.
    let tls = certs.server_tls(Duration::from_secs(10));
    let running = start(&tls);
    let shared = running.handle.shared().clone();

    // The start of a ClientHello record, and nothing more.
    let mut tcp = TcpStream::connect(running.tls_addr).await.unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01, 0x00, 0x80])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = Instant::now();
    assert!(running.handle.request_shutdown());
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .expect("closed a second after the stop");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let cut = stop.elapsed();
    assert!(
        cut >= Duration::from_millis(800) && cut <= Duration::from_millis(2000),
        "cut {cut:?} after the stop"
    );
    let code = exit_code(running.run, Duration::from_secs(5)).await;
    assert_eq!(code, 0);
    let took = stop.elapsed();
    assert!(
        took <= Duration::from_millis(2500),
        "exited {took:?} after the stop"
    );
    let peers = shared.counters().peer_counts();
    assert_eq!(
        peers.cut_in_termination(CutKind::TlsHandshake),
        1,
        "{peers:?}"
    );
    assert_eq!(peers.connections_cut(), 1, "{peers:?}");
    // Cut at the stop's bound, not failed: no handshake failure is reported.
    assert_eq!(tls.handshake_failures(), 0);
}
