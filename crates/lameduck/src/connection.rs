//! What the core knows of the connection a request came on: its kind, which decides what a
//! request that finds the gate closed gets ([`Shared::admit_on`](crate::Shared::admit_on)),
//! and how long a connection that may be about to carry a request is kept at the stop
//! ([`Shared::idle_close_at`](crate::Shared::idle_close_at)).

/// How long a connection that waits for a request is kept open at the stop for that request;
/// see [`Shared::idle_close_at`](crate::Shared::idle_close_at).
pub const IDLE_CONNECTION_LINGER: core::time::Duration = core::time::Duration::from_secs(1);

/// The connection a request came on, as far as a closed gate cares
/// ([`Shared::admit_on`](crate::Shared::admit_on)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionKind {
    /// Not known (a middleware inside a server the adapter does not drive): a closed gate
    /// rejects, as kube-apiserver's filters do.
    Unknown,
    /// An HTTP/1 connection the adapter serves and ends itself.
    Http1,
    /// An HTTP/2 connection the adapter ends with the two-step GOAWAY (GOAWAY, PING, then
    /// the final GOAWAY once the PING is acknowledged). Every stream it hands over arrived
    /// before the final GOAWAY, whose last-stream-id promises the client it is processed.
    Http2,
}
