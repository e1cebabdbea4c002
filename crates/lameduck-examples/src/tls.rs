//! The example servers' TLS (`--tls-cert-file`, `--tls-private-key-file`,
//! `--client-ca-file`): the files are loaded before any socket is opened, so that a bad file
//! stops the server before it listens.

use lameduck_tls::ServerTls;

use crate::flags::{Flags, EXIT_INVALID_FLAG};

/// The TLS configuration the flags ask for (`None`: plaintext). A file that cannot be read or
/// parsed, or a key that does not match, is printed (naming the file) and exits 2, before
/// anything listens.
#[must_use]
pub fn load_or_exit(flags: &Flags) -> Option<ServerTls> {
    let tls = flags.tls.as_ref()?;
    let mut builder =
        ServerTls::builder(&tls.cert, &tls.key).handshake_timeout(tls.handshake_timeout);
    if let Some(ca) = &tls.client_ca {
        builder = builder.client_ca_file(ca);
    }
    match builder.build() {
        Ok(tls) => Some(tls),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(EXIT_INVALID_FLAG);
        }
    }
}

/// The scheme of the `listening on` line: `https` with TLS.
#[must_use]
pub fn scheme(tls: Option<&ServerTls>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}
