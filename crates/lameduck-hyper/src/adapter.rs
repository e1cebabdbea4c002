//! What a runtime adapter that does not run hyper's connections needs from the driver: the
//! contract such an adapter (actix-web's, `lameduck-actix`) is written against.
//!
//! The tokio and smol adapters need none of it: they hand their listeners to
//! [`Server::serve`](crate::Server::serve), and the driver serves the connections and admits
//! every request itself. An adapter whose HTTP server is not hyper still runs the lifecycle
//! with the driver ([`Builder`](crate::Builder), [`Server::serve_with`](crate::Server::serve_with),
//! [`ListenerContext`](crate::ListenerContext), [`ConnectionTracker`](crate::ConnectionTracker)),
//! but admits requests, bounds their responses and ends its connections in its own server.
//! It does so with the pieces below, so that every adapter applies the same decision with
//! the same timing:
//!
//! * **The admission decision.** [`decide`] classifies and admits one request (with the
//!   [`Classifier`] the adapter's middleware was configured with, and the
//!   [`RequestInfo`](lameduck::RequestInfo) that [`request_info`] reads from an `http`
//!   request, or the adapter from its own request type) into a [`Decision`]: reject with a
//!   canned response, or serve with a tracker, a timeout, the handler's notice and upgrade
//!   ticket, and whether to end the connection after the response.
//!   [`Decision::insert_extensions`] puts the notice and the ticket where the handler finds
//!   them, through the adapter's [`RequestExtensions`].
//! * **Tickets and deadlines.** The [`RequestTracker`] of a served request keeps it counted
//!   in the gate until its response body ends (a long-running one until its paced turn:
//!   [`RequestTracker::hold_until`]). [`Deadline`] is the request timeout of a response that
//!   has not started, armed the first time the handler waits; [`BodyEnd`] carries the tracker
//!   and the deadline through a response body of the adapter's own: it says when a normal
//!   body reaches the request timeout ([`BodyEnd::poll_deadline`]; the body then fails with
//!   [`ResponseTimedOut`](crate::ResponseTimedOut)) and holds a long-running body's end
//!   until its turn ([`BodyEnd::poll_end`]).
//! * **The lifecycle's own responses.** [`LifecycleResponse`] is a canned 429, 503 or 504 or
//!   a health answer, as a status, headers and a body; [`http_response`] turns one into an
//!   `http` response, and an adapter writes the one function that turns it into its own
//!   framework's.
//! * **Arrivals.** [`ConnectionArrival`] keeps when a connection arrived (while the lifecycle
//!   watches arrivals) until its first request other than health and metrics reports it;
//!   [`note_request`] notes one request. [`decide`] calls both for the requests it admits;
//!   the adapter makes the connection's arrival when it accepts it.
//! * **Connection bounds.** [`ConnectionBounds`] (from
//!   [`ListenerContext::connection_bounds`](crate::ListenerContext::connection_bounds)) is
//!   where a server that cuts its own stopped connections registers each connection's bound,
//!   so that a cut is counted once, by the connection's task or by the exit.
//! * **The idle-close spread.** [`spread_close_at`] says when a connection of a server
//!   stopping now ends (closed, or told GOAWAY): at once, at the idle close, or at its own
//!   point of the idle-close spread's window.
//! * **HTTP/2 frames and the GOAWAY writer.** [`h2_frames`] is the frame layout both
//!   directions of a connection are watched for (the client's preface, frame headers, the
//!   highest stream id the client opened, frame boundaries in what the server writes) and
//!   the GOAWAY and PING frames to write between two of the server's frames, for an HTTP/2
//!   server that says no GOAWAY of its own.
//! * **The header-read bound.** [`HEADER_READ_TIMEOUT`] is how long a connection may take to
//!   send a complete request head on the driver's connections; an adapter's own server keeps
//!   the same bound.
//!
//! None of it is at the crate's root: an application never calls it.

pub mod h2_frames;

pub use crate::arrivals::{note_request, ConnectionArrival};
pub use crate::connection::context::ConnectionBounds;
pub use crate::connection::head_watch::HEADER_READ_TIMEOUT;
pub use crate::connection::linger::spread_close_at;
pub use crate::request::admission::{decide, request_info, Decision, RequestExtensions};
pub use crate::request::body::BodyEnd;
pub use crate::request::deadline::Deadline;
pub use crate::request::layer::Classifier;
pub use crate::request::response::{http_response, LifecycleResponse};
pub use crate::request::ticket::RequestTracker;
