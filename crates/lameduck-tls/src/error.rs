//! What loading a certificate, a key or a client CA can fail with. Every error names the file
//! it is about, so that a message printed as it is tells an operator what to fix.

use std::io;
use std::path::PathBuf;

/// Why a serving certificate, its key or a client CA could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read (missing, unreadable, a directory).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file is not PEM, or one of its PEM sections is damaged (a half-written file).
    #[error("{} is not valid PEM: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        reason: String,
    },
    /// A certificate file holds no `CERTIFICATE` section.
    #[error("{} holds no certificate (expected a PEM `CERTIFICATE` section)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A key file holds no private key in a known form (PKCS#8, SEC1 or PKCS#1).
    #[error(
        "{} holds no private key (expected PEM `PRIVATE KEY`, `EC PRIVATE KEY` or `RSA PRIVATE KEY`)",
        path.display()
    )]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// The private key is of a kind the crypto provider cannot sign with.
    #[error("{} holds a private key that cannot be used: {reason}", path.display())]
    UnusableKey {
        /// The file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// The private key does not belong to the certificate.
    #[error("the private key in {} does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The client CA file holds no usable CA certificate.
    #[error("{} holds no usable CA certificate: {reason}", path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the configuration (for example, no protocol version left).
    #[error("cannot build the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

impl TlsError {
    /// The file the error is about (the key file, for a key that does not match).
    #[must_use]
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            TlsError::Read { path, .. }
            | TlsError::Pem { path, .. }
            | TlsError::NoCertificate { path }
            | TlsError::NoPrivateKey { path }
            | TlsError::UnusableKey { path, .. }
            | TlsError::ClientCa { path, .. } => Some(path),
            TlsError::KeyMismatch { key, .. } => Some(key),
            TlsError::Config(_) => None,
        }
    }
}
