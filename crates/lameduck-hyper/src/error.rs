//! The errors of the driver: what a hook may return, and what building or running a server
//! can fail with.

use std::error::Error as StdError;
use std::io;

use lameduck::machine::RegisterError;

/// Errors a hook may return.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Errors from building or running a server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A hook, check or listener could not be registered.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// OS signal handling was already installed in this process.
    #[error("the signal handler is already installed in this process")]
    OsSignalsAlreadyInstalled,
    /// Installing the OS signal handler failed.
    #[error("cannot install the signal handler: {0}")]
    OsSignals(#[source] io::Error),
    /// The copy of a listening socket kept for a hand-over could not be made.
    #[error("cannot keep a copy of the listening socket for a hand-over: {0}")]
    HandOverSocket(#[source] io::Error),
}
