//! What the core knows of the connections adapters serve: the kind a request came on, which
//! decides what a request that finds the gate closed gets
//! ([`Shared::admit_on`](crate::Shared::admit_on)); how long a connection that may be about
//! to carry a request is kept at the stop ([`Shared::idle_close_at`](crate::Shared::idle_close_at));
//! and how long a stopped connection may stay whatever its peer does
//! ([`Shared::connection_bound`](crate::Shared::connection_bound)): a connection holds the
//! exit only while it carries work in flight within that work's own bound, and is closed at
//! most [`SILENT_PEER_TIMEOUT`] after that, the closes counted by [`CutKind`].

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

/// How long a connection without work in flight is kept, once its adapter stopped it, for its
/// peer to take the goodbye (HTTP/2: acknowledge the PING of the first GOAWAY, then close;
/// TLS: finish the handshake; HTTP/1: send the rest of a request head) before it is closed
/// whatever the peer does. Go's HTTP/2 server closes a connection the same time after its
/// GOAWAY. See [`Shared::connection_bound`](crate::Shared::connection_bound).
pub const SILENT_PEER_TIMEOUT: core::time::Duration = core::time::Duration::from_secs(1);

/// What a connection an adapter stopped is doing, when it asks how long it may stay
/// ([`Shared::connection_bound`](crate::Shared::connection_bound),
/// [`Shared::aged_connection_bound`](crate::Shared::aged_connection_bound)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectionWork {
    /// No request in flight on it since `since`: when it stopped, or when its last response
    /// ended (or its last request reached its own bound), whichever is later.
    Idle {
        /// Since when nothing has been in flight.
        since: crate::Instant,
    },
    /// Requests in flight on it.
    Busy {
        /// A normal (or exempt) request admitted before the gate closed.
        normal: bool,
        /// A long-running request (watch, SSE, gRPC stream).
        long_running: bool,
        /// The latest deadline of the requests admitted after the gate closed (served late,
        /// or exempt and untracked): each admission instant plus the request timeout.
        late_until: Option<crate::Instant>,
    },
}

/// Why a connection was closed at a bound while its peer stayed silent. Each is counted
/// ([`Counters::count_connection_cut`]); the termination summary reports the total as
/// `connections_cut`, and a warning names the kinds.
///
/// [`Counters::count_connection_cut`]: crate::shared::counters::Counters::count_connection_cut
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutKind {
    /// A TLS handshake not complete when the server stopped, cut [`SILENT_PEER_TIMEOUT`]
    /// later (not at the handshake timeout).
    TlsHandshake,
    /// A connection that had not sent a complete request head (HTTP/1, or a protocol not
    /// known yet) when its bound passed.
    RequestHead,
    /// An HTTP/2 connection without streams whose peer neither acknowledged the GOAWAY's PING
    /// nor closed within the bound.
    Http2Goaway,
    /// A connection whose client stopped reading a response: cut when the request's own
    /// bound (the request timeout, or the grace period of a long-running one) had passed.
    UnreadResponse,
    /// A WebSocket whose client never answered the server's Close (1001) within the grace
    /// period.
    WebsocketClose,
    /// A connection past its [maximum age](crate::Config::max_connection_age) whose streams
    /// outlasted the grace.
    MaxConnectionAge,
}

impl CutKind {
    /// How many kinds there are.
    pub const COUNT: usize = 6;

    /// Every kind, in the order of [`CutKind::index`].
    pub const ALL: [CutKind; CutKind::COUNT] = [
        CutKind::TlsHandshake,
        CutKind::RequestHead,
        CutKind::Http2Goaway,
        CutKind::UnreadResponse,
        CutKind::WebsocketClose,
        CutKind::MaxConnectionAge,
    ];

    /// The kind as logged and labelled: `tls_handshake`, `request_head`, `http2_goaway`,
    /// `unread_response`, `websocket_close`, `max_connection_age`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CutKind::TlsHandshake => "tls_handshake",
            CutKind::RequestHead => "request_head",
            CutKind::Http2Goaway => "http2_goaway",
            CutKind::UnreadResponse => "unread_response",
            CutKind::WebsocketClose => "websocket_close",
            CutKind::MaxConnectionAge => "max_connection_age",
        }
    }

    /// The kind's position in [`CutKind::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}
