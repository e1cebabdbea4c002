//! TLS serving (`--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file`,
//! `--tls-handshake-timeout`): ALPN picks HTTP/2 or HTTP/1.1, keys load in every PEM form, a
//! plaintext request is answered 400, client certificates are required with a client CA, bad
//! files stop the server before it listens, silent clients do not hold up others or the
//! termination, the files rotate without a failed request (in place, and as a Secret volume's
//! `..data` swap), a bad pair keeps the old one, and an h2 connection gets GOAWAY.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::{StatusCode, Version};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::ClientConfig;

use crate::support::h2::runtime;
use crate::support::tls::*;
use crate::support::*;

/// How soon a rotated pair must reach new handshakes (the files are read every second).
const ROTATION_WITHIN: Duration = Duration::from_secs(15);

#[track_caller]
fn assert_ok(resp: &Result<H2Resp, String>, version: Version, what: &str) {
    let resp = resp
        .as_ref()
        .unwrap_or_else(|e| panic!("{what}: no reply: {e}"));
    assert_eq!(
        (resp.status, resp.version, &resp.body[..]),
        (StatusCode::OK, version, &b"ok"[..]),
        "{what}: {resp:?}"
    );
}

type H2Resp = crate::support::h2::H2Response;

pub fn tls_serves_http1_and_http2_by_alpn(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("alpn");
    let rt = runtime();
    for form in [
        KeyForm::EcPkcs8,
        KeyForm::EcSec1,
        KeyForm::RsaPkcs8,
        KeyForm::RsaPkcs1,
    ] {
        let pair = ca.server("server", form);
        let (cert, key) = (
            dir.file(&format!("{form:?}.crt")),
            dir.file(&format!("{form:?}.key")),
        );
        pair.write(&cert, &key);
        let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
        let mut server = start_tls(bin, &flags);
        let addr = server.addr;
        let what = format!("{bin} with a {form:?} key");
        rt.block_on(async {
            let mut h2 = h2_connect(addr, &client_config(&ca, &["h2"], None))
                .await
                .unwrap_or_else(|e| panic!("{what}: h2 over TLS: {e}\n{}", server.describe()));
            assert_ok(
                &h2.get("/").await,
                Version::HTTP_2,
                &format!("{what}: h2 GET /"),
            );
            assert_ok(
                &h2.get("/readyz").await,
                Version::HTTP_2,
                &format!("{what}: h2 GET /readyz"),
            );

            let config = client_config(&ca, &["http/1.1"], None);
            let mut h1 = H1Tls::connect(addr, &config).await.unwrap_or_else(|e| {
                panic!("{what}: HTTP/1.1 over TLS: {e}\n{}", server.describe())
            });
            assert_eq!(h1.alpn.as_deref(), Some("http/1.1"), "{what}: ALPN");
            assert!(
                h1.peer.as_ref() == Some(&pair.cert_der),
                "{what}: the server presented another certificate"
            );
            assert_ok(
                &h1.get("/").await,
                Version::HTTP_11,
                &format!("{what}: GET /"),
            );
            assert_ok(
                &h1.get("/readyz").await,
                Version::HTTP_11,
                &format!("{what}: GET /readyz (same connection)"),
            );
            let verbose = h1
                .get("/readyz?verbose")
                .await
                .expect("GET /readyz?verbose");
            assert_eq!(
                (verbose.status, &verbose.body[..]),
                (StatusCode::OK, READYZ_VERBOSE_OK.as_bytes()),
                "{what}: /readyz?verbose"
            );
        });
        server.signal("TERM");
        server.assert_exit(0, Duration::from_secs(15));
        server.signals().assert_common_dag_order();
        server.assert_trace_legal(&flags);
    }
}

/// How many failing handshakes `tls_plaintext_request_is_refused` sends in a burst.
const FLOOD: usize = 300;

pub fn tls_plaintext_request_is_refused(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("plaintext");
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    ca.server("server", KeyForm::EcPkcs8).write(&cert, &key);
    let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
    let mut server = start_tls(bin, &flags);
    let addr = server.addr;

    for attempt in 0..2 {
        let mut plain = TcpStream::connect(addr).expect("connect");
        plain
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        // One write: the server answers after the first byte and closes, so a second write
        // could meet a closed socket.
        let request =
            format!("GET / HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: lameduck-blackbox\r\n\r\n");
        plain
            .write_all(request.as_bytes())
            .expect("send a plaintext request");
        let mut answer = Vec::new();
        let read = plain.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with("HTTP/1.0 400")
                && text.ends_with("Client sent an HTTP request to an HTTPS server.\n"),
            "plaintext request #{attempt} on the TLS port: got {text:?} ({read:?})\n{}",
            server.describe()
        );
        // The request's unread bytes may turn the server's close into a reset after the
        // answer: that still ends the connection.
        assert!(
            read.is_ok()
                || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "plaintext request #{attempt}: the server should close the connection after \
             the 400: {read:?}"
        );
    }

    // A flood of failing handshakes (a TLS record that is no ClientHello) within the 10 s
    // log window: counted, logged at info level once per window, never once per failure.
    let started = Instant::now();
    for _ in 0..FLOOD {
        let mut bad = TcpStream::connect(addr).expect("connect");
        bad.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let _ = bad.write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef]);
        let _ = bad.read_to_end(&mut Vec::new());
    }
    let flood_took = started.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let lines = server
        .stderr_text()
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .count();
    // One line for the plaintext requests' window, one more for each 10 s the flood took.
    let allowed = 2 + flood_took.as_secs() as usize / 10;
    assert!(
        lines <= allowed,
        "{FLOOD} failed handshakes in {flood_took:?} (after 2 plaintext requests) wrote {lines} \
         info lines (want at most {allowed}: one per 10 s)\n{}",
        server.describe()
    );

    runtime().block_on(async {
        let config = client_config(&ca, &["http/1.1"], None);
        let (resp, _) = get_once(addr, &config, "/")
            .await
            .unwrap_or_else(|e| panic!("TLS after plaintext: {e}\n{}", server.describe()));
        assert_ok(
            &Ok(resp),
            Version::HTTP_11,
            "TLS GET / after plaintext requests",
        );
    });
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}

pub fn tls_client_ca_requires_client_certificates(bin: &'static str) {
    let ca = Ca::new("serving CA");
    let client_ca = Ca::new("client CA");
    let stranger_ca = Ca::new("some other CA");
    let dir = TempDir::new("client-ca");
    let (cert, key, cas) = (
        dir.file("tls.crt"),
        dir.file("tls.key"),
        dir.file("client-ca.crt"),
    );
    ca.server("server", KeyForm::EcPkcs8).write(&cert, &key);
    write(&cas, client_ca.pem());
    let flags = [
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--client-ca-file",
        &cas,
    ];
    let mut server = start_tls(bin, &flags);
    let addr = server.addr;
    let good = client_ca.client("good client");
    let stranger = stranger_ca.client("stranger");

    runtime().block_on(async {
        for (alpn, version) in [("http/1.1", Version::HTTP_11), ("h2", Version::HTTP_2)] {
            let refused = [
                ("no client certificate", client_config(&ca, &[alpn], None)),
                (
                    "a client certificate of another CA",
                    client_config(&ca, &[alpn], Some(&stranger)),
                ),
            ];
            for (who, config) in refused {
                // TLS 1.3: the client's side of the handshake may end before the server
                // checked the certificate; the refusal then fails the first read.
                let attempt = if alpn == "h2" {
                    match h2_connect(addr, &config).await {
                        Ok(mut h2) => try_h2_get(&mut h2, "/").await.map(|r| r.status),
                        Err(e) => Err(e),
                    }
                } else {
                    get_once(addr, &config, "/").await.map(|(r, _)| r.status)
                };
                assert!(
                    attempt.is_err(),
                    "{alpn} with {who}: expected a failed handshake, got {attempt:?}\n{}",
                    server.describe()
                );
            }
            let config = client_config(&ca, &[alpn], Some(&good));
            let resp = if alpn == "h2" {
                match h2_connect(addr, &config).await {
                    Ok(mut h2) => h2.get("/").await,
                    Err(e) => Err(e),
                }
            } else {
                get_once(addr, &config, "/").await.map(|(r, _)| r)
            };
            assert_ok(
                &resp,
                version,
                &format!("{alpn} with a certificate of the client CA"),
            );
        }
    });
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&flags);
}

pub fn tls_bad_files_exit_2(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("bad-files");
    let pair = ca.server("server", KeyForm::EcPkcs8);
    let other = ca.server("other", KeyForm::EcPkcs8);
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    pair.write(&cert, &key);
    let file = |name: &str, contents: &str| {
        let path = dir.file(name);
        write(&path, contents);
        path
    };
    let garbage_cert = file("garbage.crt", "this is not a certificate\n");
    let garbage_key = file("garbage.key", "this is not a key\n");
    let half_cert = file("half.crt", &pair.cert_pem[..pair.cert_pem.len() / 2]);
    let half_key = file("half.key", &pair.key_pem[..pair.key_pem.len() / 2]);
    let other_key = file("other.key", &other.key_pem);
    let empty = file("empty.pem", "");
    let garbage_ca = file(
        "garbage-ca.crt",
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    );
    let missing = dir.file("missing.pem");

    // (what, flags, words of which stderr must hold one)
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "missing cert file",
            vec!["--tls-cert-file", &missing, "--tls-private-key-file", &key],
            vec![&missing],
        ),
        (
            "missing key file",
            vec!["--tls-cert-file", &cert, "--tls-private-key-file", &missing],
            vec![&missing],
        ),
        (
            "cert file of garbage",
            vec![
                "--tls-cert-file",
                &garbage_cert,
                "--tls-private-key-file",
                &key,
            ],
            vec![&garbage_cert],
        ),
        (
            "key file of garbage",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &garbage_key,
            ],
            vec![&garbage_key],
        ),
        (
            "empty cert file",
            vec!["--tls-cert-file", &empty, "--tls-private-key-file", &key],
            vec![&empty],
        ),
        (
            "half-written cert PEM",
            vec![
                "--tls-cert-file",
                &half_cert,
                "--tls-private-key-file",
                &key,
            ],
            vec![&half_cert],
        ),
        (
            "half-written key PEM",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &half_key,
            ],
            vec![&half_key],
        ),
        (
            "key of another certificate",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &other_key,
            ],
            vec![&other_key],
        ),
        (
            "cert and key swapped",
            vec!["--tls-cert-file", &key, "--tls-private-key-file", &cert],
            vec![&key, &cert],
        ),
        (
            "missing client CA",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &missing,
            ],
            vec![&missing],
        ),
        (
            "client CA of garbage",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &garbage_ca,
            ],
            vec![&garbage_ca],
        ),
        (
            "client CA file holding a key",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &key,
            ],
            vec![&key],
        ),
        (
            "--tls-cert-file without --tls-private-key-file",
            vec!["--tls-cert-file", &cert],
            vec!["tls-private-key-file", "tls_private_key_file"],
        ),
        (
            "--tls-private-key-file without --tls-cert-file",
            vec!["--tls-private-key-file", &key],
            vec!["tls-cert-file", "tls_cert_file"],
        ),
        (
            "--client-ca-file without the pair",
            vec!["--client-ca-file", &cert],
            vec!["tls-cert-file", "tls_cert_file"],
        ),
    ];
    let mut slowest = Duration::ZERO;
    for (what, flags, names) in cases {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(&flags);
        let mut server = ServerProcess::spawn(bin, &args, &[]);
        let started = Instant::now();
        let code = server.expect_exit(Duration::from_secs(10));
        let took = started.elapsed();
        slowest = slowest.max(took);
        let context = format!("{bin}, {what} ({args:?})");
        assert_eq!(code, 2, "{context}: exit code\n{}", server.describe());
        let stderr = server.stderr_text();
        assert!(
            names.iter().any(|n| stderr.contains(n)),
            "{context}: stderr should name {names:?}\n{}",
            server.describe()
        );
        assert!(
            !server.stdout_text().contains("listening on"),
            "{context}: it listened\n{}",
            server.describe()
        );
        assert!(
            !stderr.contains("panicked"),
            "{context}: it panicked\n{}",
            server.describe()
        );
        assert!(
            took < Duration::from_secs(3),
            "{context}: took {took:?} to exit"
        );
    }
    eprintln!("{bin}: bad TLS files: slowest exit {slowest:?}");
}

pub fn tls_silent_clients_do_not_block(bin: &'static str) {
    const SILENT: usize = 350;
    const HALF_HELLOS: usize = 50;
    ensure_open_files(2048);
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("silent");
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    ca.server("server", KeyForm::EcPkcs8).write(&cert, &key);
    let flags = [
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--tls-handshake-timeout",
        "3s",
    ];
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

/// New TLS connections, each a `GET /` over HTTP/1.1, in a few tasks, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<LoadStats>>,
}

#[derive(Default, Debug)]
struct LoadStats {
    ok: usize,
    failures: Vec<String>,
    /// The certificates served, in order of first appearance, with how often.
    certs: Vec<(CertificateDer<'static>, usize)>,
}

impl LoadStats {
    fn saw(&mut self, cert: CertificateDer<'static>) {
        match self.certs.iter_mut().find(|(c, _)| *c == cert) {
            Some((_, n)) => *n += 1,
            None => self.certs.push((cert, 1)),
        }
    }
}

impl Load {
    /// Bounded to 60 s even if never stopped.
    fn start(addr: SocketAddr, config: &Arc<ClientConfig>, tasks: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + Duration::from_secs(60);
        let tasks = (0..tasks)
            .map(|_| {
                let (stop, config) = (Arc::clone(&stop), Arc::clone(config));
                tokio::spawn(async move {
                    let mut stats = LoadStats::default();
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        match get_once(addr, &config, "/").await {
                            Ok((resp, cert))
                                if resp.status == StatusCode::OK && &resp.body[..] == b"ok" =>
                            {
                                stats.ok += 1;
                                if let Some(cert) = cert {
                                    stats.saw(cert);
                                }
                            }
                            Ok((resp, _)) => stats.failures.push(format!("{resp:?}")),
                            Err(e) => stats.failures.push(e),
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    stats
                })
            })
            .collect();
        Load { stop, tasks }
    }

    async fn stop(self) -> LoadStats {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = LoadStats::default();
        for task in self.tasks {
            let stats = task.await.expect("load task");
            all.ok += stats.ok;
            all.failures.extend(stats.failures);
            for (cert, n) in stats.certs {
                match all.certs.iter_mut().find(|(c, _)| *c == cert) {
                    Some((_, m)) => *m += n,
                    None => all.certs.push((cert, n)),
                }
            }
        }
        all
    }
}

/// Polls new handshakes until one presents `want`; how long that took. Then checks that the
/// next few present it too.
async fn wait_for_cert(
    server: &ServerProcess,
    config: &Arc<ClientConfig>,
    want: &CertificateDer<'static>,
    what: &str,
) -> Duration {
    let started = Instant::now();
    loop {
        if let Ok((_, Some(cert))) = get_once(server.addr, config, "/readyz").await {
            if cert == *want {
                break;
            }
        }
        assert!(
            started.elapsed() < ROTATION_WITHIN,
            "{what}: new handshakes still get the old certificate {ROTATION_WITHIN:?} later\n{}",
            server.describe()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..5 {
        let (_, cert) = get_once(server.addr, config, "/readyz")
            .await
            .unwrap_or_else(|e| panic!("{what}: handshake #{i} after the switch: {e}"));
        assert!(
            cert.as_ref() == Some(want),
            "{what}: handshake #{i} after the switch got another certificate"
        );
    }
    took
}

/// Asserts the load saw no failure and served more than one certificate; a summary line.
#[track_caller]
fn assert_load(stats: &LoadStats, server: &ServerProcess, what: &str) -> String {
    assert!(
        stats.failures.is_empty(),
        "{what}: {} of {} requests on new TLS connections failed, e.g. {:?}\n{}",
        stats.failures.len(),
        stats.ok + stats.failures.len(),
        &stats.failures[..stats.failures.len().min(5)],
        server.describe()
    );
    assert!(stats.ok > 0, "{what}: the load sent no request");
    format!(
        "{} requests on new connections, 0 failed, certificates served {:?} times",
        stats.ok,
        stats.certs.iter().map(|(_, n)| *n).collect::<Vec<_>>()
    )
}

/// A rotation under load: a keep-alive connection opened before it (used at every step, so
/// that no idle keep-alive timeout ends it: actix's is 5 s) and new connections opened all
/// along by three tasks.
struct Rotation {
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    old: H1Tls,
    load: Load,
    first: CertificateDer<'static>,
}

impl Rotation {
    /// Opens the old connection to a server serving `first`, and starts the load.
    async fn begin(
        addr: SocketAddr,
        config: &Arc<ClientConfig>,
        first: &CertificateDer<'static>,
    ) -> Rotation {
        let old = H1Tls::connect(addr, config)
            .await
            .expect("first connection");
        let mut rotation = Rotation {
            addr,
            config: Arc::clone(config),
            old,
            load: Load::start(addr, config, 3),
            first: first.clone(),
        };
        rotation.old_served("before the rotation").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        rotation
    }

    /// The old connection is still served, with the first certificate.
    async fn old_served(&mut self, what: &str) {
        assert_ok(
            &self.old.get("/").await,
            Version::HTTP_11,
            &format!("{what}: the connection opened before the rotation"),
        );
        assert!(
            self.old.peer.as_ref() == Some(&self.first),
            "{what}: the old connection's certificate"
        );
    }

    /// New handshakes still get the first certificate, and the old connection is served.
    async fn first_still_served(&mut self, what: &str) {
        for i in 0..3 {
            let (_, cert) = get_once(self.addr, &self.config, "/readyz")
                .await
                .unwrap_or_else(|e| panic!("{what}: handshake #{i}: {e}"));
            assert!(
                cert.as_ref() == Some(&self.first),
                "{what}: handshake #{i} did not get the old certificate"
            );
        }
        self.old_served(what).await;
    }

    /// Waits until new handshakes get `want` (within 15 s); how long it took.
    async fn wait_for(
        &mut self,
        server: &ServerProcess,
        want: &CertificateDer<'static>,
        what: &str,
    ) -> Duration {
        let took = wait_for_cert(server, &self.config, want, what).await;
        self.old_served(what).await;
        took
    }

    /// Stops the load: no request failed, and the old connection is still served; what to
    /// report.
    async fn end(mut self, server: &ServerProcess, what: &str) -> String {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.old_served(what).await;
        let stats = self.load.stop().await;
        assert_load(&stats, server, what)
    }
}

/// Ends a case: SIGTERM, exit 0, a legal trace.
fn terminate(mut server: ServerProcess, flags: &[&str]) {
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(flags);
}

pub fn tls_rotation_in_place(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("rotation");
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    let first = ca.server("server", KeyForm::EcPkcs8);
    let second = ca.server("server", KeyForm::EcPkcs8);
    let third = ca.server("server", KeyForm::RsaPkcs1);
    first.write(&cert, &key);
    let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
    let server = start_tls(bin, &flags);
    let config = client_config(&ca, &["http/1.1"], None);

    let summary = runtime().block_on(async {
        let mut rotation = Rotation::begin(server.addr, &config, &first.cert_der).await;
        // The files' contents overwritten (truncate and write; the pair is briefly mismatched).
        second.write(&cert, &key);
        let overwritten = rotation
            .wait_for(&server, &second.cert_der, "overwritten in place")
            .await;
        // New files renamed over the old names.
        third.replace(&cert, &key);
        let renamed = rotation
            .wait_for(&server, &third.cert_der, "renamed over")
            .await;
        let load = rotation.end(&server, "rotation in place").await;
        format!("overwrite picked up in {overwritten:?}, rename in {renamed:?}; {load}")
    });
    eprintln!("{bin}: {summary}");
    terminate(server, &flags);
}

pub fn tls_rotation_secret_volume_swap(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let first = ca.server("server", KeyForm::RsaPkcs1);
    let second = ca.server("server", KeyForm::RsaPkcs1);
    let third = ca.server("server", KeyForm::EcSec1);
    let mut volume = SecretVolume::new(&first);
    let (cert, key) = (volume.cert(), volume.key());
    let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
    let server = start_tls(bin, &flags);
    let config = client_config(&ca, &["http/1.1"], None);

    let summary = runtime().block_on(async {
        let mut rotation = Rotation::begin(server.addr, &config, &first.cert_der).await;
        volume.update(&second);
        let once = rotation
            .wait_for(&server, &second.cert_der, "..data swapped")
            .await;
        volume.update(&third);
        let twice = rotation
            .wait_for(&server, &third.cert_der, "..data swapped again")
            .await;
        let load = rotation.end(&server, "Secret volume swap").await;
        format!("swaps picked up in {once:?} and {twice:?}; {load}")
    });
    eprintln!("{bin}: {summary}");
    terminate(server, &flags);
}

/// Waits up to 5 s for an error line naming `path` past the first `skip` lines of `server`'s
/// stderr; the line.
fn error_naming(server: &ServerProcess, path: &str, skip: usize, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stderr = server.stderr_text();
        let found = stderr
            .lines()
            .skip(skip)
            .find(|l| l.contains("ERROR") && l.contains(path))
            .map(str::to_string);
        if let Some(line) = found {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no error line naming {path}\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn tls_rotation_to_a_bad_pair_keeps_the_old(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("bad-rotation");
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    let first = ca.server("server", KeyForm::EcPkcs8);
    let second = ca.server("server", KeyForm::EcPkcs8);
    first.write(&cert, &key);
    let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
    let server = start_tls(bin, &flags);
    let config = client_config(&ca, &["http/1.1"], None);

    let summary = runtime().block_on(async {
        let mut rotation = Rotation::begin(server.addr, &config, &first.cert_der).await;
        // Each bad step: what is written where, how long to wait, what the step is.
        let half_cert = &second.cert_pem[..second.cert_pem.len() / 2];
        let steps: [(&str, &str, u64, &str); 3] = [
            (&key, &second.key_pem, 3, "a mismatched key"),
            (&cert, half_cert, 2, "a half-written certificate"),
            (&cert, "garbage\n", 2, "a certificate of garbage"),
        ];
        let mut errors = Vec::new();
        for (path, contents, wait, step) in steps {
            let lines = server.stderr_text().lines().count();
            write(path, contents);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            rotation
                .first_still_served(&format!("{wait} s after {step}"))
                .await;
            errors.push(error_naming(&server, path, lines, step));
        }
        // The whole new certificate: a valid pair again.
        write(&cert, &second.cert_pem);
        let took = rotation
            .wait_for(&server, &second.cert_der, "valid pair after bad")
            .await;
        let load = rotation.end(&server, "rotation to bad pairs").await;
        format!("errors logged: {errors:?}; the valid pair picked up in {took:?}; {load}")
    });
    eprintln!("{bin}: {summary}");
    terminate(server, &flags);
}

pub fn tls_http2_goaway_at_not_accepting(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let dir = TempDir::new("goaway");
    let (cert, key) = (dir.file("tls.crt"), dir.file("tls.key"));
    ca.server("server", KeyForm::EcPkcs8).write(&cert, &key);
    let flags = [
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--shutdown-delay",
        "1s",
    ];
    let mut server = start_tls(bin, &flags);
    let addr = server.addr;
    let config = client_config(&ca, &["h2"], None);

    let (sent, h2, during, in_flight, conn_end, after_goaway) = runtime().block_on(async {
        let mut h2 = h2_connect(addr, &config)
            .await
            .unwrap_or_else(|e| panic!("h2 over TLS: {e}\n{}", server.describe()));
        assert_ok(
            &h2.get("/").await,
            Version::HTTP_2,
            "h2 GET / before the signal",
        );
        let sent = server.signal("TERM");
        let during = h2.get("/").await;
        // In flight across NotAcceptingNewRequest (≈ 1 s after the signal).
        let in_flight = h2.start_get("/sleep?duration=2s").await;
        h2.wait_goaway(Duration::from_secs(5)).await;
        let in_flight = in_flight
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")));
        let conn_end = tokio::time::timeout(Duration::from_secs(10), &mut h2.conn)
            .await
            .map(|joined| joined.expect("connection task"));
        let after_goaway = h2.new_request_fails().await;
        (sent, h2, during, in_flight, conn_end, after_goaway)
    });

    assert_ok(
        &during,
        Version::HTTP_2,
        "h2 GET / during the shutdown delay",
    );
    let in_flight = in_flight.unwrap_or_else(|e| panic!("the in-flight h2 /sleep: {e}"));
    assert_eq!(
        (in_flight.status, &in_flight.body[..]),
        (StatusCode::OK, SLEEP_BODY.as_bytes()),
        "the in-flight h2 /sleep"
    );
    let not_accepting = server
        .signals()
        .time_of(NOT_ACCEPTING)
        .unwrap_or_else(|| panic!("no NotAcceptingNewRequest line\n{}", server.describe()));
    let goaways = h2.goaways();
    let ms = |at: Instant| at.saturating_duration_since(sent.before).as_millis();
    let timeline = format!(
        "GOAWAY frames (last stream id, error code, ms after the signal) {:?}, \
         NotAcceptingNewRequest read {} ms after the signal, EOF {:?} ms, /sleep done {} ms, \
         connection future {:?}",
        goaways
            .iter()
            .map(|g| (g.last_stream_id, g.error_code, ms(g.at)))
            .collect::<Vec<_>>(),
        ms(not_accepting),
        h2.eof_at().map(ms),
        ms(in_flight.at),
        conn_end.as_ref().map(|(_, r)| r),
    );
    eprintln!("{bin} h2 over TLS: {timeline}");
    assert!(
        !goaways.is_empty() && goaways.iter().all(|g| g.error_code == 0),
        "the h2 connection over TLS should get a graceful GOAWAY: {timeline}\n{}",
        server.describe()
    );
    assert!(
        goaways[0].at.saturating_duration_since(sent.before) >= Duration::from_millis(900),
        "GOAWAY came before the shutdown delay ended: {timeline}"
    );
    assert!(
        goaways[0].at < in_flight.at,
        "GOAWAY should come at NotAcceptingNewRequest, while /sleep is in flight: {timeline}"
    );
    assert!(
        goaways.last().is_some_and(|g| g.last_stream_id >= 5),
        "the final GOAWAY must cover the in-flight stream (id 5): {timeline}"
    );
    assert!(
        conn_end.is_ok(),
        "the h2 connection did not end within 10 s: {timeline}"
    );
    assert!(
        after_goaway.is_ok(),
        "a new request on the connection after GOAWAY should fail: {after_goaway:?}"
    );
    server.assert_exit(0, Duration::from_secs(15));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(&flags);
}
