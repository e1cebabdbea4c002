//! Silent clients (connections that send nothing, or half a ClientHello) hold up neither
//! other clients nor the termination.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use hyper::Version;

use super::{assert_ok, PairFiles};
use crate::support::h2::runtime;
use crate::support::tls::*;
use crate::support::*;

pub fn tls_silent_clients_do_not_block(bin: &'static str) {
    const SILENT: usize = 350;
    const HALF_HELLOS: usize = 50;
    ensure_open_files(2048);
    let ca = Ca::new("blackbox CA");
    let files = PairFiles::new("silent", &ca.server("server", KeyForm::EcPkcs8));
    let flags = files.flags(&["--tls-handshake-timeout", "3s"]);
    let mut server = start_tls(bin, &flags);
    let addr = server.addr;
    let h1 = client_config(&ca, &["http/1.1"], None);
    let h2 = client_config(&ca, &["h2"], None);

    let opened_at = Instant::now();
    let connect = |addr: SocketAddr| {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("silent connection: {e}\n{}", server.describe()));
        stream.set_nodelay(true).expect("nodelay");
        stream
    };
    let mut idle: Vec<TcpStream> = (0..SILENT).map(|_| connect(addr)).collect();
    let hello = client_hello_prefix(&h1, 50);
    for _ in 0..HALF_HELLOS {
        let mut stream = connect(addr);
        stream.write_all(&hello).expect("half a ClientHello");
        idle.push(stream);
    }
    let opened = opened_at.elapsed();

    let times = runtime().block_on(async {
        let mut times = Vec::new();
        for i in 0..6 {
            let config = if i % 2 == 0 { &h1 } else { &h2 };
            let started = Instant::now();
            let resp = if i % 2 == 0 {
                get_once(addr, config, "/").await.map(|(r, _)| r)
            } else {
                match h2_connect(addr, config).await {
                    Ok(mut conn) => conn.get("/").await,
                    Err(e) => Err(e),
                }
            };
            let took = started.elapsed();
            let version = if i % 2 == 0 {
                Version::HTTP_11
            } else {
                Version::HTTP_2
            };
            assert_ok(
                &resp,
                version,
                &format!("request #{i} past {SILENT} silent connections"),
            );
            assert!(
                took < Duration::from_secs(2),
                "request #{i} (handshake and GET) took {took:?} with {SILENT} silent \
                 connections and {HALF_HELLOS} half ClientHellos open"
            );
            times.push(took);
        }
        times
    });
    assert!(
        opened_at.elapsed() < Duration::from_secs(3),
        "the silent connections were meant to be still handshaking at the signal \
         (opened in {opened:?}, now {:?})",
        opened_at.elapsed()
    );

    let sent = server.signal("TERM");
    let code = server.expect_exit(Duration::from_secs(15));
    let exit_after = sent.before.elapsed();
    assert_eq!(code, 0, "exit code\n{}", server.describe());
    eprintln!(
        "{bin}: {SILENT} silent + {HALF_HELLOS} half-hello connections opened in {opened:?}; \
         TLS requests past them took {times:?}; exit {exit_after:?} after SIGTERM"
    );
    assert!(
        exit_after < Duration::from_secs(3) + Duration::from_secs(12),
        "exit took {exit_after:?} after the signal (handshake timeout 3 s)"
    );
    // Every silent connection was closed by the server (not left to the kernel at exit only
    // would be fine too: all that matters is that none is still readable-and-open).
    let mut closed = 0;
    for stream in &mut idle {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        let mut byte = [0u8; 64];
        if matches!(stream.read(&mut byte), Ok(0) | Err(_)) {
            closed += 1;
        }
    }
    assert_eq!(closed, idle.len(), "connections still open after the exit");
    server.assert_trace_legal(&flags);
}
