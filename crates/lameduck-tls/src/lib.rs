//! Secure serving for [lameduck](https://docs.rs/lameduck) servers, as kube-apiserver serves:
//! a rustls server configuration made from PEM files and kept up to date with them.
//!
//! * **Files as Kubernetes and cert-manager write them.** The certificate chain and its
//!   private key in PEM (PKCS#8, SEC1 or PKCS#1 keys; cert-manager's default is RSA PKCS#1),
//!   read through symlinks (a Secret volume's `tls.crt -> ..data/tls.crt`).
//! * **Rotation without a restart.** The files are read again every
//!   [`DEFAULT_RELOAD_INTERVAL`]; a changed, valid pair is served to every new handshake from
//!   then on, while established connections keep theirs. A bad pair (unparsable, a key that
//!   does not match, a half-written file) keeps the current one: the error is logged once,
//!   naming the file, and counted ([`ServerTls::reload_failures`], and the
//!   `lameduck_tls_reload_failures_total` series with the `metrics` feature).
//! * **Client certificates (mutual TLS)** with [`TlsBuilder::client_ca_file`]: a client
//!   without a certificate issued by that CA is refused at the handshake. The CA file is
//!   reloaded the same way.
//! * **ALPN** offers `h2` and `http/1.1`; the client's choice decides the protocol.
//! * **Bounded, quiet handshakes.** [`ServerTls::handshake_timeout`] (default
//!   [`DEFAULT_HANDSHAKE_TIMEOUT`]) is the bound the runtime adapters put on each handshake,
//!   which they run in the connection's own task, never in the accept loop. Failures are
//!   reported to [`ServerTls::handshake_failed`], which logs at most one info line per
//!   [`LOG_WINDOW`].
//!
//! * **One accept for every runtime** (the `acceptor` feature): [`acceptor::TlsAcceptor`]
//!   peeks at a connection's first byte, answers a plaintext HTTP request `400 Bad Request`
//!   (then reads what the client sent, bounded, so that the close is a FIN and not a reset
//!   that could destroy the answer), runs rustls' handshake otherwise and reports every
//!   failure here. The runtime adapters supply their I/O types ([`acceptor::RustlsRuntime`]).
//!
//! The crypto provider is *ring*: it builds with a C compiler alone, where rustls' default
//! (aws-lc-rs) also needs cmake on many machines.
//!
//! ```no_run
//! # fn f() -> Result<(), lameduck_tls::TlsError> {
//! let tls = lameduck_tls::ServerTls::builder("/etc/tls/tls.crt", "/etc/tls/tls.key")
//!     .client_ca_file("/etc/tls/ca.crt")
//!     .build()?;
//! // lameduck_tokio::TlsAcceptor::new(&tls), lameduck_smol::TlsAcceptor::new(&tls), or
//! // lameduck_actix's `AutoH2cServer::listen_tls` serve with it.
//! let _config = tls.rustls_config();
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "acceptor")]
pub mod acceptor;
mod error;
mod failures;
mod metrics;
mod pem;
mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::{NoClientAuth, ServerConfig};

pub use error::TlsError;
pub use failures::{HandshakeError, LOG_WINDOW};
pub use rustls;
pub use rustls_pki_types;

use reload::{CertResolver, ClientVerifier, Files, Served, Watcher};

/// How long a handshake may take unless [`TlsBuilder::handshake_timeout`] says otherwise.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the files are read again unless [`TlsBuilder::reload_interval`] says otherwise.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The ALPN protocols offered, in order of preference.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// What a plaintext HTTP request on the TLS port is answered (the words Go's servers use).
pub const PLAINTEXT_HTTP_RESPONSE: &[u8] = b"HTTP/1.0 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
Client sent an HTTP request to an HTTPS server.\n";

/// Whether a connection whose first byte is `first` starts a TLS handshake. Anything else
/// is not TLS; a letter is most likely a plaintext HTTP request, to answer with
/// [`PLAINTEXT_HTTP_RESPONSE`].
#[must_use]
pub const fn starts_tls_handshake(first: u8) -> bool {
    first == TLS_HANDSHAKE_RECORD
}

/// Settings of a [`ServerTls`]; see [`ServerTls::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct TlsBuilder {
    files: Files,
    handshake_timeout: Duration,
    reload_interval: Duration,
}

impl TlsBuilder {
    /// Requires client certificates issued by a CA in `path` (PEM), read again when it
    /// changes, as the pair is.
    pub fn client_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.client_ca = Some(path.into());
        self
    }

    /// Bounds each handshake (default [`DEFAULT_HANDSHAKE_TIMEOUT`]), from accept on.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How often the files are read again (default [`DEFAULT_RELOAD_INTERVAL`]; at least
    /// 10 ms).
    pub fn reload_interval(mut self, interval: Duration) -> Self {
        self.reload_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Reads the files and starts watching them.
    ///
    /// # Errors
    ///
    /// A file cannot be read or parsed, the key does not match the certificate, or the
    /// client CA holds no usable certificate. The error names the file.
    pub fn build(self) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (watcher, served) = Watcher::load(self.files, Arc::clone(&provider))?;
        let versions = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match ClientVerifier::new(Arc::clone(&served)) {
            Some(verifier) => versions.with_client_cert_verifier(Arc::new(verifier)),
            None => versions.with_client_cert_verifier(Arc::new(NoClientAuth)),
        };
        let mut config = builder.with_cert_resolver(Arc::new(CertResolver(Arc::clone(&served))));
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        reload::watch(watcher, Arc::downgrade(&served), self.reload_interval);
        Ok(ServerTls {
            config: Arc::new(config),
            served,
            handshake_timeout: self.handshake_timeout,
        })
    }
}

/// A TLS server configuration that follows its files; cheap to clone (every clone serves the
/// same, current pair): the files are read again when they change, and a bad new pair is kept
/// out (see [`TlsBuilder`]).
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    served: Arc<Served>,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Settings for serving the certificate chain in `cert` with the private key in `key`
    /// (both PEM files).
    pub fn builder(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> TlsBuilder {
        TlsBuilder {
            files: Files {
                cert: cert.into(),
                key: key.into(),
                client_ca: None,
            },
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }

    /// Serves `cert` and `key` with the default settings.
    ///
    /// # Errors
    ///
    /// As [`TlsBuilder::build`].
    pub fn from_files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, TlsError> {
        Self::builder(cert, key).build()
    }

    /// The rustls configuration, for a TLS acceptor (tokio-rustls, futures-rustls).
    #[must_use]
    pub fn rustls_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config)
    }

    /// The bound on each handshake.
    #[must_use]
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// Counts and logs a failed handshake (see [`LOG_WINDOW`]).
    pub fn handshake_failed(&self, peer: SocketAddr, error: &HandshakeError) {
        self.served.handshake_failures.record(peer, error);
    }

    /// Handshakes that failed so far.
    #[must_use]
    pub fn handshake_failures(&self) -> u64 {
        self.served.handshake_failures.total()
    }

    /// Files reloaded so far (a pair or a client CA).
    #[must_use]
    pub fn reloads(&self) -> u64 {
        self.served.reloads.load(Ordering::Relaxed)
    }

    /// The certificate chain new handshakes get now (the end-entity certificate first).
    #[must_use]
    pub fn certificate_chain(&self) -> Vec<rustls_pki_types::CertificateDer<'static>> {
        self.served.certificate_chain()
    }

    /// Reloads refused so far (the current files were kept).
    #[must_use]
    pub fn reload_failures(&self) -> u64 {
        self.served.reload_failures.load(Ordering::Relaxed)
    }
}
