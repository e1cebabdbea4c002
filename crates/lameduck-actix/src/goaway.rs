//! GOAWAY for actix's HTTP/2 connections, which actix-http never sends itself: an I/O wrapper
//! around each h2c connection that watches the frames in both directions and writes the
//! GOAWAY between two of the server's own frames, as h2's graceful shutdown would.
//!
//! Like h2 (and Go), in two steps: first GOAWAY with the highest stream id and a PING, so
//! that the client stops opening streams and no stream it has opened meanwhile is refused;
//! once the client acknowledges the PING, every stream it opened has been read, and the final
//! GOAWAY names the highest of them. actix's h2 state machine is not involved: it serves the
//! streams it reads, and the client, not the server, stops opening new ones. Once its streams
//! are done the client closes the connection.
//!
//! A connection says GOAWAY when the listener stops (the lifecycle's stop broadcast, in
//! close-listener mode at `NotAcceptingNewRequest`) or when one of its responses asks to close
//! it (retry-after mode's 429s: `Connection: close`, which HTTP/2 does not have). With the
//! idle-close spread ([`lameduck::Config::idle_close_spread`]) the stop broadcast makes each
//! connection say it at its own random point of the window instead, measured from the
//! broadcast; a response that asks to close the connection still makes it say GOAWAY at once.
//! A connection past its [maximum age](lameduck::Config::max_connection_age) says it too.
//!
//! Peers cannot hold a termination: once a connection has stopped (the broadcast, or its own
//! request), the final GOAWAY goes out when the client acknowledges the PING or
//! [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) after the first GOAWAY,
//! whichever comes first, and the connection is closed at the core's bound
//! ([`Shared::connection_bound`]) whatever its peer does: a second after the stop (or after
//! its last stream ended) without streams, after the streams' own bound with some. The
//! watcher follows the streams the server has not ended from both directions' frame headers
//! (a response actix's h2 still holds for a client that stopped reading keeps its stream
//! open); see the `deadlines` module.

mod broadcast;
mod deadlines;
mod writer;

pub(crate) use broadcast::Announced;
pub use broadcast::{GoawayBroadcast, GoawayRequest};
pub use writer::{ConnectionCut, GoawayIo};

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn announced_waits_registers_once_per_waker_and_wakes_at_the_announcement() {
        let broadcast = Arc::new(GoawayBroadcast::default());
        let mut announced = Announced::new(Arc::clone(&broadcast));
        let (first, second) = (
            Arc::new(CountingWaker::default()),
            Arc::new(CountingWaker::default()),
        );
        let first_waker = Waker::from(Arc::clone(&first));
        let mut cx = Context::from_waker(&first_waker);
        for _ in 0..3 {
            assert!(Pin::new(&mut announced).poll(&mut cx).is_pending());
        }
        // A new waker registers anew; the announcement wakes the one registered last.
        let second_waker = Waker::from(Arc::clone(&second));
        let mut cx2 = Context::from_waker(&second_waker);
        assert!(Pin::new(&mut announced).poll(&mut cx2).is_pending());
        broadcast.announce();
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert!(Pin::new(&mut announced).poll(&mut cx2).is_ready());
        // Created after the announcement: ready at once.
        let mut late = Announced::new(broadcast);
        assert!(Pin::new(&mut late).poll(&mut cx).is_ready());
    }
}
