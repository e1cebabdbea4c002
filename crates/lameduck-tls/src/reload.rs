//! Certificate rotation without a restart: the pair (and the client CA) being served, the
//! rustls hooks that read it at each handshake, and the watcher that reads the files again.
//!
//! The watcher compares the files' *contents*, not their modification times: a Kubernetes
//! Secret volume swaps a `..data` symlink, cert-manager may rewrite a file within the same
//! second, and reading a few kilobytes every second costs nothing. A new pair replaces the
//! current one only once it parses and its key matches its certificate; until then handshakes
//! keep getting the current pair. Established connections never see a change: rustls picks
//! the certificate once, during the handshake.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::error::TlsError;
use crate::failures::HandshakeFailures;
use crate::pem;

/// The files served from, as configured (symlinks are followed at every read).
#[derive(Clone, Debug)]
pub(crate) struct Files {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) client_ca: Option<PathBuf>,
}

/// What handshakes are served with now, and what happened to it; shared by the rustls hooks,
/// the watcher and [`ServerTls`](crate::ServerTls).
pub(crate) struct Served {
    key: RwLock<Arc<CertifiedKey>>,
    verifier: Option<RwLock<Arc<dyn ClientCertVerifier>>>,
    pub(crate) reloads: AtomicU64,
    pub(crate) reload_failures: AtomicU64,
    pub(crate) handshake_failures: HandshakeFailures,
}

impl Served {
    pub(crate) fn new(
        key: Arc<CertifiedKey>,
        verifier: Option<Arc<dyn ClientCertVerifier>>,
    ) -> Self {
        Served {
            key: RwLock::new(key),
            verifier: verifier.map(RwLock::new),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            handshake_failures: HandshakeFailures::default(),
        }
    }

    fn current_key(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.key.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn certificate_chain(&self) -> Vec<CertificateDer<'static>> {
        self.current_key().cert.clone()
    }

    fn set_key(&self, key: Arc<CertifiedKey>) {
        *self.key.write().unwrap_or_else(|e| e.into_inner()) = key;
    }

    /// The current verifier; `None` without a client CA.
    fn current_verifier(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        let slot = self.verifier.as_ref()?;
        Some(Arc::clone(&slot.read().unwrap_or_else(|e| e.into_inner())))
    }

    fn set_verifier(&self, verifier: Arc<dyn ClientCertVerifier>) {
        if let Some(slot) = &self.verifier {
            *slot.write().unwrap_or_else(|e| e.into_inner()) = verifier;
        }
    }
}

/// rustls' certificate hook: every handshake gets the pair current at its ClientHello.
pub(crate) struct CertResolver(pub(crate) Arc<Served>);

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CertResolver")
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current_key())
    }
}

/// rustls' client-certificate hook: every handshake is verified against the client CA current
/// at that moment. A client without a valid certificate is refused.
///
/// It sends no CA names in its certificate request (rustls would need them borrowed from a
/// verifier that may be replaced); clients with one certificate send it regardless.
pub(crate) struct ClientVerifier {
    served: Arc<Served>,
    /// The verifier at start: what the questions every verifier answers alike are asked of.
    first: Arc<dyn ClientCertVerifier>,
}

impl ClientVerifier {
    pub(crate) fn new(served: Arc<Served>) -> Option<Self> {
        let first = served.current_verifier()?;
        Some(ClientVerifier { served, first })
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.served
            .current_verifier()
            .unwrap_or_else(|| Arc::clone(&self.first))
    }
}

impl fmt::Debug for ClientVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientVerifier")
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.first.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.first.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.first.supported_verify_schemes()
    }
}

/// What the watcher last read: the contents served, and those that failed (reported once).
pub(crate) struct Watcher {
    files: Files,
    provider: Arc<CryptoProvider>,
    /// The certificate and key file contents being served.
    pair: (Vec<u8>, Vec<u8>),
    /// The client CA file contents being served.
    client_ca: Vec<u8>,
    /// The last failure reported for the pair, and for the client CA: the same failure is
    /// not reported again.
    pair_failure: Option<String>,
    ca_failure: Option<String>,
}

impl Watcher {
    /// Loads the files for the first time.
    pub(crate) fn load(
        files: Files,
        provider: Arc<CryptoProvider>,
    ) -> Result<(Self, Arc<Served>), TlsError> {
        let pair = (pem::read(&files.cert)?, pem::read(&files.key)?);
        let key = pem::certified_key(&provider, (&files.cert, &pair.0), (&files.key, &pair.1))?;
        let (client_ca, verifier) = match &files.client_ca {
            Some(path) => {
                let bytes = pem::read(path)?;
                let verifier = pem::client_verifier(&provider, path, &bytes)?;
                (bytes, Some(verifier))
            }
            None => (Vec::new(), None),
        };
        let served = Arc::new(Served::new(key, verifier));
        let watcher = Watcher {
            files,
            provider,
            pair,
            client_ca,
            pair_failure: None,
            ca_failure: None,
        };
        Ok((watcher, served))
    }

    /// Reads the files again; serves what changed and is valid, reports what is not.
    pub(crate) fn check(&mut self, served: &Served) {
        match self.check_pair(served) {
            Ok(()) => self.pair_failure = None,
            Err(e) => report(served, &mut self.pair_failure, &e),
        }
        if let Some(path) = self.files.client_ca.clone() {
            match self.check_client_ca(served, &path) {
                Ok(()) => self.ca_failure = None,
                Err(e) => report(served, &mut self.ca_failure, &e),
            }
        }
    }

    fn check_pair(&mut self, served: &Served) -> Result<(), TlsError> {
        let files = &self.files;
        let pair = (pem::read(&files.cert)?, pem::read(&files.key)?);
        if pair == self.pair {
            return Ok(());
        }
        let key = pem::certified_key(
            &self.provider,
            (&files.cert, &pair.0),
            (&files.key, &pair.1),
        )?;
        served.set_key(key);
        self.pair = pair;
        served.reloads.fetch_add(1, Ordering::Relaxed);
        crate::metrics::reloaded("certificate");
        tracing::info!(
            cert = %files.cert.display(),
            key = %files.key.display(),
            "TLS serving certificate reloaded: new handshakes get the new pair"
        );
        Ok(())
    }

    fn check_client_ca(&mut self, served: &Served, path: &Path) -> Result<(), TlsError> {
        let bytes = pem::read(path)?;
        if bytes == self.client_ca {
            return Ok(());
        }
        let verifier = pem::client_verifier(&self.provider, path, &bytes)?;
        served.set_verifier(verifier);
        self.client_ca = bytes;
        served.reloads.fetch_add(1, Ordering::Relaxed);
        crate::metrics::reloaded("client_ca");
        tracing::info!(client_ca = %path.display(), "TLS client CA reloaded");
        Ok(())
    }
}

/// Logs and counts a failed reload, unless it is the one reported last.
fn report(served: &Served, last: &mut Option<String>, error: &TlsError) {
    let message = error.to_string();
    if last.as_deref() == Some(message.as_str()) {
        return;
    }
    served.reload_failures.fetch_add(1, Ordering::Relaxed);
    crate::metrics::reload_failed(error.path());
    tracing::error!(
        file = %error.path().map(|p| p.display().to_string()).unwrap_or_default(),
        "TLS files not reloaded, the current certificate is kept: {message}"
    );
    *last = Some(message);
}

/// Checks the files every `interval` on a thread of its own, until `served` is gone (every
/// [`ServerTls`](crate::ServerTls) and rustls configuration using it dropped).
pub(crate) fn watch(mut watcher: Watcher, served: Weak<Served>, interval: Duration) {
    let spawned = std::thread::Builder::new()
        .name("lameduck-tls-reload".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            let Some(served) = served.upgrade() else {
                return;
            };
            watcher.check(&served);
        });
    if let Err(e) = spawned {
        tracing::error!("TLS files will not be reloaded: cannot start the watcher thread: {e}");
    }
}
