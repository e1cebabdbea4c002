//! Turning the bytes of PEM files into what rustls serves with: a certified key (the chain
//! and its signing key, checked to belong together) and a client-certificate verifier.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::TlsError;

/// Reads `path` whole (a file, or a symlink to one).
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The `CERTIFICATE` sections of `pem`, in order.
fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, &e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

fn pem_error(path: &Path, error: &pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}

/// The certificate chain in `cert_pem` with the private key in `key_pem` (PKCS#8, SEC1 or
/// PKCS#1), checked to belong together.
pub(crate) fn certified_key(
    provider: &CryptoProvider,
    (cert_path, cert_pem): (&Path, &[u8]),
    (key_path, key_pem): (&Path, &[u8]),
) -> Result<Arc<CertifiedKey>, TlsError> {
    let certs = certificates(cert_path, cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoPrivateKey {
            path: key_path.to_path_buf(),
        },
        e => pem_error(key_path, &e),
    })?;
    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::UnusableKey {
                path: key_path.to_path_buf(),
                reason: e.to_string(),
            })?;
    let certified = CertifiedKey::new(certs, signing_key);
    match certified.keys_match() {
        Ok(()) => Ok(Arc::new(certified)),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(Arc::new(certified))
        }
        Err(rustls::Error::InconsistentKeys(_)) => Err(TlsError::KeyMismatch {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
        }),
        // The end-entity certificate could not be parsed to find its public key.
        Err(e) => Err(TlsError::Pem {
            path: cert_path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// A verifier that accepts client certificates issued by a CA in `pem`, and refuses clients
/// without one.
pub(crate) fn client_verifier(
    provider: &Arc<CryptoProvider>,
    path: &Path,
    pem: &[u8],
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let ca_error = |reason: String| TlsError::ClientCa {
        path: path.to_path_buf(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, pem)? {
        roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map_err(|e| ca_error(e.to_string()))
}
