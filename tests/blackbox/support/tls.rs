//! TLS for the black-box cases: certificates made on the fly (a CA, serving and client
//! certificates, keys in the PEM forms servers meet: PKCS#8, SEC1, PKCS#1), files in a
//! temporary directory (plain, or laid out as a Kubernetes Secret volume), a rustls client
//! speaking HTTP/1.1 or HTTP/2 as ALPN decides, and starting a server that announces
//! `listening on https://IP:PORT`.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::http1;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName,
};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::h2::{H2Conn, H2Response};
use super::h2tap::FrameTap;
use super::process::ServerProcess;

/// Bound on a TCP connect plus TLS handshake of the client.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);
/// Bound on one request and its whole reply.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// A directory under the system's temporary directory, removed (with its contents) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "lameduck-blackbox-{label}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `dir/name`, as a string for a command line.
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes `contents` to `path` (truncating it: an in-place overwrite).
#[track_caller]
pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
    let path = path.as_ref();
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Writes `contents` next to `path` and renames it over `path` (an atomic replacement).
#[track_caller]
pub fn replace(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
    let path = path.as_ref();
    let tmp = path.with_extension("tmp-new");
    write(&tmp, contents);
    std::fs::rename(&tmp, path)
        .unwrap_or_else(|e| panic!("rename {} over {}: {e}", tmp.display(), path.display()));
}

/// The PEM form of a private key file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// ECDSA P-256, `PRIVATE KEY` (PKCS#8).
    EcPkcs8,
    /// ECDSA P-256, `EC PRIVATE KEY` (SEC1).
    EcSec1,
    /// RSA 2048, `PRIVATE KEY` (PKCS#8).
    RsaPkcs8,
    /// RSA 2048, `RSA PRIVATE KEY` (PKCS#1, cert-manager's default).
    RsaPkcs1,
}

impl KeyForm {
    /// The PEM label the key file must carry.
    pub fn label(self) -> &'static str {
        match self {
            KeyForm::EcPkcs8 | KeyForm::RsaPkcs8 => "-----BEGIN PRIVATE KEY-----",
            KeyForm::EcSec1 => "-----BEGIN EC PRIVATE KEY-----",
            KeyForm::RsaPkcs1 => "-----BEGIN RSA PRIVATE KEY-----",
        }
    }
}

/// Runs `openssl args` with `input` on stdin; its stdout.
fn openssl(args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run openssl {args:?}: {e}"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .expect("openssl stdin");
    let out = child.wait_with_output().expect("openssl output");
    assert!(
        out.status.success(),
        "openssl {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("openssl wrote PEM")
}

/// A new key in `form`: the key pair (to sign or be certified with) and its PEM file text.
fn new_key(form: KeyForm) -> (KeyPair, String) {
    let (pair, pem) = match form {
        KeyForm::EcPkcs8 | KeyForm::EcSec1 => {
            let pair = KeyPair::generate().expect("ECDSA key");
            let pkcs8 = pair.serialize_pem();
            let pem = if form == KeyForm::EcSec1 {
                openssl(&["ec"], pkcs8.as_bytes())
            } else {
                pkcs8
            };
            (pair, pem)
        }
        KeyForm::RsaPkcs8 | KeyForm::RsaPkcs1 => {
            let pkcs8 = openssl(
                &[
                    "genpkey",
                    "-algorithm",
                    "RSA",
                    "-pkeyopt",
                    "rsa_keygen_bits:2048",
                ],
                b"",
            );
            let pair = KeyPair::from_pem(&pkcs8).expect("RSA PKCS#8 key");
            let pem = if form == KeyForm::RsaPkcs1 {
                openssl(&["rsa", "-traditional"], pkcs8.as_bytes())
            } else {
                pkcs8
            };
            (pair, pem)
        }
    };
    assert!(
        pem.starts_with(form.label()),
        "{form:?} key should start with {}: {pem:.40}",
        form.label()
    );
    (pair, pem)
}

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key.
#[derive(Clone)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    /// The key as PKCS#8 DER (whatever `key_pem`'s form), for a client identity.
    pub key_der: Vec<u8>,
}

impl Pair {
    /// Writes the certificate to `cert` and the key to `key` (overwriting in place).
    pub fn write(&self, cert: impl AsRef<Path>, key: impl AsRef<Path>) {
        write(cert, &self.cert_pem);
        write(key, &self.key_pem);
    }

    /// Writes both files next to their paths and renames them over (cert first, then key).
    pub fn replace(&self, cert: impl AsRef<Path>, key: impl AsRef<Path>) {
        replace(cert, &self.cert_pem);
        replace(key, &self.key_pem);
    }
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("self-signed CA"),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A serving certificate for `127.0.0.1` and `localhost`, named `cn`, with a key in `form`.
    pub fn server(&self, cn: &str, form: KeyForm) -> Pair {
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            SanType::DnsName("localhost".try_into().expect("DNS name")),
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params, cn, form)
    }

    /// A client certificate named `cn` (ECDSA, PKCS#8).
    pub fn client(&self, cn: &str) -> Pair {
        let mut params = CertificateParams::default();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params, cn, KeyForm::EcPkcs8)
    }

    fn issue(&self, mut params: CertificateParams, cn: &str, form: KeyForm) -> Pair {
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let (key, key_pem) = new_key(form);
        let cert = params.signed_by(&key, &self.issuer).expect("issue");
        Pair {
            cert_pem: cert.pem(),
            key_pem,
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }
}

/// A client configuration trusting `ca`, offering `alpn`, with `identity` as the client
/// certificate if given; without session resumption.
pub fn client_config(ca: &Ca, alpn: &[&str], identity: Option<&Pair>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.der()).expect("trust the CA");
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(pair) => builder
            .with_client_auth_cert(
                vec![pair.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pair.key_der.clone())),
            )
            .expect("client identity"),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    // Every connection a full handshake: a resumed session shows the certificate of the
    // session it resumes, not the one the server serves now.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// TCP connect and TLS handshake to `addr` as `127.0.0.1`, bounded by [`HANDSHAKE_LIMIT`].
pub async fn tls_connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, String> {
    let work = async {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
        TlsConnector::from(Arc::clone(config))
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))
    };
    tokio::time::timeout(HANDSHAKE_LIMIT, work)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "TLS handshake with {addr}: none within {HANDSHAKE_LIMIT:?}"
            ))
        })
}

/// The certificate the server presented (the leaf).
pub fn peer_leaf(stream: &TlsStream<TcpStream>) -> Option<CertificateDer<'static>> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .cloned()
}

/// The protocol ALPN settled on.
pub fn alpn(stream: &TlsStream<TcpStream>) -> Option<String> {
    stream
        .get_ref()
        .1
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
}

/// An HTTP/1.1 connection over TLS (hyper's client).
pub struct H1Tls {
    pub addr: SocketAddr,
    pub alpn: Option<String>,
    pub peer: Option<CertificateDer<'static>>,
    sender: http1::SendRequest<Empty<Bytes>>,
}

impl H1Tls {
    pub async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Result<H1Tls, String> {
        let stream = tls_connect(addr, config).await?;
        let alpn = alpn(&stream);
        let peer = peer_leaf(&stream);
        let (sender, conn) = http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        // Drives the connection until the sender is dropped or the server closes it.
        tokio::spawn(conn);
        Ok(H1Tls {
            addr,
            alpn,
            peer,
            sender,
        })
    }

    /// `GET path` on this connection and its whole reply, bounded by [`REQUEST_LIMIT`].
    pub async fn get(&mut self, path: &str) -> Result<H2Response, String> {
        let request = Request::builder()
            .uri(path)
            .header("host", self.addr.to_string())
            .body(Empty::<Bytes>::new())
            .expect("request");
        let sender = &mut self.sender;
        let work = async {
            sender
                .ready()
                .await
                .map_err(|e| format!("GET {path}: connection not ready: {e}"))?;
            let resp = sender
                .send_request(request)
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            H2Response::read(resp, path).await
        };
        tokio::time::timeout(REQUEST_LIMIT, work)
            .await
            .unwrap_or_else(|_| Err(format!("GET {path}: no reply within {REQUEST_LIMIT:?}")))
    }
}

/// `GET path` over HTTP/1.1 on a new TLS connection: the reply and the certificate served.
pub async fn get_once(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    path: &str,
) -> Result<(H2Response, Option<CertificateDer<'static>>), String> {
    let mut conn = H1Tls::connect(addr, config).await?;
    let resp = conn.get(path).await?;
    Ok((resp, conn.peer.clone()))
}

/// An HTTP/2 connection over TLS (the config must offer `h2`), with the server's frames
/// tapped as [`H2Conn::connect`] does for h2c.
pub async fn h2_connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Result<H2Conn, String> {
    let stream = tls_connect(addr, config).await?;
    let negotiated = alpn(&stream);
    if negotiated.as_deref() != Some("h2") {
        return Err(format!("ALPN settled on {negotiated:?}, not h2"));
    }
    let (tap, seen) = FrameTap::new(stream);
    let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake::<_, Empty<Bytes>>(TokioIo::new(tap))
        .await
        .map_err(|e| format!("h2 handshake over TLS: {e}"))?;
    let conn = tokio::spawn(async move {
        let result = conn.await.map_err(|e| e.to_string());
        (Instant::now(), result)
    });
    Ok(H2Conn {
        addr,
        sender,
        conn,
        seen,
    })
}

/// The first `len` bytes of a real TLS ClientHello (a record header `16 03 01 ...` and the
/// start of the handshake message).
pub fn client_hello_prefix(config: &Arc<ClientConfig>, len: usize) -> Vec<u8> {
    let mut conn = rustls::ClientConnection::new(
        Arc::clone(config),
        ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into()),
    )
    .expect("client connection");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    assert!(
        hello.len() > len && hello[0] == 0x16,
        "a ClientHello record: {hello:?}"
    );
    hello.truncate(len);
    hello
}

/// Starts `bin` (`ServerProcess::start`) with `flags`, TLS flags among them: its first stdout
/// line must be `listening on https://IP:PORT`.
pub fn start_tls(bin: &'static str, flags: &[&str]) -> ServerProcess {
    let server = ServerProcess::start(bin, flags);
    assert!(
        server.tls,
        "{bin} {flags:?} printed `listening on http://`, not https\n{}",
        server.describe()
    );
    server
}

/// A certificate and key laid out as kubelet lays out a Secret volume (`AtomicWriter`):
/// `dir/..<ts>/{tls.crt,tls.key}`, `dir/..data -> ..<ts>`, `dir/tls.crt -> ..data/tls.crt`,
/// `dir/tls.key -> ..data/tls.key`. An update writes a new `..<ts>` directory, points a
/// temporary symlink at it and renames that over `..data` (one atomic step), then removes
/// the old directory.
pub struct SecretVolume {
    dir: TempDir,
    generation: u32,
}

impl SecretVolume {
    pub fn new(pair: &Pair) -> SecretVolume {
        let dir = TempDir::new("secret-volume");
        let mut volume = SecretVolume { dir, generation: 0 };
        volume.update(pair);
        for name in ["tls.crt", "tls.key"] {
            symlink(format!("..data/{name}"), volume.dir.path().join(name));
        }
        volume
    }

    pub fn cert(&self) -> String {
        self.dir.file("tls.crt")
    }

    pub fn key(&self) -> String {
        self.dir.file("tls.key")
    }

    /// The timestamped directory of the current generation (`..2026_data_N`).
    fn data_dir(generation: u32) -> String {
        format!("..2026_data_{generation}")
    }

    /// Publishes `pair` as kubelet does: new directory, `..data` swapped atomically, old
    /// directory removed.
    pub fn update(&mut self, pair: &Pair) {
        let root = self.dir.path();
        let next = self.generation + 1;
        let data = root.join(Self::data_dir(next));
        std::fs::create_dir(&data).unwrap_or_else(|e| panic!("mkdir {}: {e}", data.display()));
        write(data.join("tls.crt"), &pair.cert_pem);
        write(data.join("tls.key"), &pair.key_pem);
        let tmp = root.join("..data_tmp");
        symlink(Self::data_dir(next), &tmp);
        std::fs::rename(&tmp, root.join("..data"))
            .unwrap_or_else(|e| panic!("rename ..data_tmp over ..data: {e}"));
        if self.generation > 0 {
            let old = root.join(Self::data_dir(self.generation));
            std::fs::remove_dir_all(&old)
                .unwrap_or_else(|e| panic!("remove {}: {e}", old.display()));
        }
        self.generation = next;
    }
}

#[track_caller]
fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    let (target, link) = (target.as_ref(), link.as_ref());
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", link.display(), target.display()));
}

/// `GET path` on an HTTP/2 connection that may already be dead (a refused client
/// certificate ends it right after the handshake): an error rather than a panic when the
/// connection cannot take the request.
pub async fn try_h2_get(conn: &mut H2Conn, path: &str) -> Result<H2Response, String> {
    tokio::time::timeout(HANDSHAKE_LIMIT, conn.sender.ready())
        .await
        .map_err(|_| format!("GET {path}: h2 connection not ready within {HANDSHAKE_LIMIT:?}"))?
        .map_err(|e| format!("GET {path}: h2 connection: {e}"))?;
    conn.get(path).await
}
