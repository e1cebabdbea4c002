//! What a server task (an accept loop, or another HTTP server such as actix-web's) shares
//! with the run loop: the stop broadcast it reacts to, and the channel it reports on.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use futures_channel::mpsc;
use lameduck::connection::CutKind;
use lameduck::machine::ListenerId;
use lameduck::{Input, Instant, Shared};

use crate::flag::Flag;
use crate::runtime::{BoxFuture, Runtime};

/// Broadcast from the run loop to every accept loop and connection. There is no "force
/// close": when the HTTP shutdown timeout passes, the lifecycle stops waiting for the
/// connections and closes none of them (each request is bounded by its own deadline).
#[derive(Default)]
pub(crate) struct ServeControl {
    /// `StopListening`: close the listener, shut connections down gracefully.
    pub(crate) stop: Flag,
    /// Another process accepts on the listening sockets now (they outlive this one): stop
    /// accepting, keep serving the open connections.
    pub(crate) accepting_elsewhere: Flag,
    /// The stopped connections and their bounds, for the exit.
    pub(crate) bounds: BoundRegistry,
}

/// Where a server that bounds its own stopped connections (actix-web's) registers each
/// connection's bound ([`Shared::connection_bound`](lameduck::Shared::connection_bound)), so
/// that the exit, should it come at that bound before the connection's task has cut it,
/// counts it as cut (the exit closes it). Whoever takes a connection out counts it, once:
/// the connection's task after [`ConnectionBounds::claim`], or the exit.
#[derive(Clone)]
pub struct ConnectionBounds(Arc<ServeControl>);

impl fmt::Debug for ConnectionBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionBounds").finish_non_exhaustive()
    }
}

impl ConnectionBounds {
    /// Connection `id` (any number unique among the server's live connections, such as
    /// the address of its state) is to be cut as `kind` at `bound`; `None`: no bound, or
    /// the connection is gone (call it when the connection ends).
    pub fn set(&self, id: usize, bound: Option<(Instant, CutKind)>) {
        self.0.bounds.set(id, bound);
    }

    /// Says how many of the server's connections the exit would close without their being
    /// registered one by one (a server that cannot bound some of its connections itself:
    /// actix-web's HTTP/1 ones): at the exit, each is counted as cut, as an unread response
    /// when the drain gave up on requests, as a wait for a request head otherwise.
    pub fn count_open_at_exit(&self, open: impl Fn() -> usize + Send + Sync + 'static) {
        self.0.bounds.lock().open_at_exit.push(Box::new(open));
    }

    /// Takes connection `id` out as its task cuts it at its bound: `true` when the cut is
    /// the task's to count ([`Counters::count_connection_cut`]), `false` when the exit
    /// counted it already (or it was never registered).
    ///
    /// [`Counters::count_connection_cut`]: lameduck::shared::counters::Counters::count_connection_cut
    #[must_use]
    pub fn claim(&self, id: usize) -> bool {
        self.0.bounds.claim(id)
    }
}

/// The stopped connections' bounds
/// ([`Shared::connection_bound`](lameduck::Shared::connection_bound)), each with the kind it
/// would be cut as. Each connection cuts itself at its bound; but the exit may come at that
/// same instant (the drain's deadline is also the bound of the work it gave up on), before
/// the connection's task has run: the exit then counts, as cut, every connection it finds
/// here past its bound, since the exit closes it. Only stopped connections are here, each
/// written when its bound changes: a termination's business, never a request's.
#[derive(Debug, Default)]
pub(crate) struct BoundRegistry {
    entries: Mutex<Entries>,
}

/// The registry's content.
#[derive(Default)]
pub(crate) struct Entries {
    bounds: Vec<(usize, Instant, CutKind)>,
    /// How many connections of a server the exit would close unregistered
    /// ([`ConnectionBounds::count_open_at_exit`]).
    open_at_exit: Vec<Box<dyn Fn() -> usize + Send + Sync>>,
    /// The exit counted what had passed: nothing is kept or counted from then on.
    exited: bool,
}

impl fmt::Debug for Entries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entries")
            .field("bounds", &self.bounds)
            .field("exited", &self.exited)
            .finish_non_exhaustive()
    }
}

impl BoundRegistry {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connection `id` is to be cut as `kind` at `bound` (`None`: no bound, or gone).
    pub(crate) fn set(&self, id: usize, bound: Option<(Instant, CutKind)>) {
        let mut guard = self.lock();
        if guard.exited {
            return;
        }
        let entries = &mut guard.bounds;
        let at = entries.iter().position(|(i, ..)| *i == id);
        match (at, bound) {
            (Some(at), Some((bound, kind))) => entries[at] = (id, bound, kind),
            (None, Some((bound, kind))) => entries.push((id, bound, kind)),
            (Some(at), None) => {
                entries.swap_remove(at);
            }
            (None, None) => {}
        }
    }

    /// Takes connection `id` out, cut at its bound by its own task: whether it was still
    /// here (whoever takes it out counts the cut: the task, or the exit).
    pub(crate) fn claim(&self, id: usize) -> bool {
        let mut guard = self.lock();
        let entries = &mut guard.bounds;
        let Some(at) = entries.iter().position(|(i, ..)| *i == id) else {
            return false;
        };
        entries.swap_remove(at);
        true
    }

    /// The kinds of the connections whose bound is at or before `now`, which the exit cuts;
    /// they leave the registry. The connections servers count themselves
    /// ([`ConnectionBounds::count_open_at_exit`]) are added as `unregistered`.
    pub(crate) fn take_passed(&self, now: Instant, unregistered: CutKind) -> Vec<CutKind> {
        let mut guard = self.lock();
        guard.exited = true;
        let open: usize = guard.open_at_exit.iter().map(|open| open()).sum();
        let mut passed = vec![unregistered; open];
        guard.bounds.retain(|&(_, bound, kind)| {
            let keep = bound > now;
            if !keep {
                passed.push(kind);
            }
            keep
        });
        passed
    }
}

/// A server task, registered with [`crate::Server::serve`] or [`crate::Server::serve_with`]
/// and started when the lifecycle runs.
pub(crate) struct ServeTask<R> {
    pub(crate) id: ListenerId,
    pub(crate) name: String,
    pub(crate) serve: Box<dyn FnOnce(ListenerContext<R>) -> BoxFuture<()> + Send>,
}

/// What a server task (an accept loop, or another HTTP server such as actix-web's) gets
/// from the driver: when to stop, and how to report back. See [`Server::serve_with`].
///
/// [`Server::serve_with`]: crate::Server::serve_with
pub struct ListenerContext<R> {
    id: ListenerId,
    name: String,
    runtime: R,
    shared: Arc<Shared>,
    control: Arc<ServeControl>,
    tx: mpsc::UnboundedSender<Input>,
}

impl<R> fmt::Debug for ListenerContext<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerContext")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> ListenerContext<R> {
    pub(crate) fn new(
        id: ListenerId,
        name: String,
        runtime: R,
        shared: Arc<Shared>,
        control: Arc<ServeControl>,
        tx: mpsc::UnboundedSender<Input>,
    ) -> Self {
        ListenerContext {
            id,
            name,
            runtime,
            shared,
            control,
            tx,
        }
    }

    /// The listener's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime.
    #[must_use]
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// The lifecycle's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The run loop's broadcast, for the connections of this server.
    pub(crate) fn control(&self) -> &Arc<ServeControl> {
        &self.control
    }

    /// Reports that the listener is bound and serving.
    pub fn report_serving(&self) {
        let _ = self.tx.unbounded_send(Input::ListenerServing(self.id));
    }

    /// Reports that the listening socket is closed (new connections are refused).
    pub fn report_listener_stopped(&self) {
        let _ = self.tx.unbounded_send(Input::ListenerStopped(self.id));
    }

    /// Reports that every connection of this server has ended.
    pub fn report_server_stopped(&self) {
        let _ = self.tx.unbounded_send(Input::ServerStopped(self.id));
    }

    /// Reports that the server (another HTTP server implementation, with timeouts of its
    /// own) ended connections on its own while lameduck still allowed them to run: the
    /// termination is not complete, and the exit code will be 1.
    pub fn report_connections_cut(&self) {
        let _ = self.tx.unbounded_send(Input::ConnectionsCut(self.id));
    }

    /// Resolves when the lifecycle says to stop listening and shut connections down
    /// gracefully.
    pub async fn stop_listening(&self) {
        self.control.stop.wait().await;
    }

    /// Resolves when another process accepts on this listener's socket, from
    /// `ShutdownInitiated` on when the sockets outlive this process (systemd socket
    /// activation, or a hand-over; see [`Shared::set_sockets_outlive`]): stop accepting (close
    /// or pause the listener) but keep serving the open connections, and report the listener
    /// stopped only after [`ListenerContext::stop_listening`]. Never resolves otherwise.
    pub async fn accepting_elsewhere(&self) {
        self.control.accepting_elsewhere.wait().await;
    }

    /// The lifecycle's register of stopped connections' bounds, for a server that bounds its
    /// own connections (see [`ConnectionBounds`]).
    #[must_use]
    pub fn connection_bounds(&self) -> ConnectionBounds {
        ConnectionBounds(Arc::clone(&self.control))
    }

    /// Whether the lifecycle has said to stop listening.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.control.stop.is_set()
    }
}
