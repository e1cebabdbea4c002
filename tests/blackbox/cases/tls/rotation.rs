//! The files rotate without a failed request, under load: overwritten in place, renamed over,
//! or swapped as a Secret volume's `..data`; a bad pair keeps the old one, with an error
//! naming the file, until a valid pair comes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::{StatusCode, Version};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::ClientConfig;

use super::{assert_ok, terminate, PairFiles};
use crate::support::h2::runtime;
use crate::support::tls::*;
use crate::support::*;

/// How soon a rotated pair must reach new handshakes (the files are read every second).
const ROTATION_WITHIN: Duration = Duration::from_secs(15);

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

pub fn tls_rotation_in_place(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let first = ca.server("server", KeyForm::EcPkcs8);
    let second = ca.server("server", KeyForm::EcPkcs8);
    let third = ca.server("server", KeyForm::RsaPkcs1);
    let files = PairFiles::new("rotation", &first);
    let (cert, key) = (&files.cert, &files.key);
    let flags = files.flags(&[]);
    let server = start_tls(bin, &flags);
    let config = client_config(&ca, &["http/1.1"], None);

    let summary = runtime().block_on(async {
        let mut rotation = Rotation::begin(server.addr, &config, &first.cert_der).await;
        // The files' contents overwritten (truncate and write; the pair is briefly mismatched).
        second.write(cert, key);
        let overwritten = rotation
            .wait_for(&server, &second.cert_der, "overwritten in place")
            .await;
        // New files renamed over the old names.
        third.replace(cert, key);
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
    let first = ca.server("server", KeyForm::EcPkcs8);
    let second = ca.server("server", KeyForm::EcPkcs8);
    let files = PairFiles::new("bad-rotation", &first);
    let (cert, key) = (files.cert.clone(), files.key.clone());
    let flags = files.flags(&[]);
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
