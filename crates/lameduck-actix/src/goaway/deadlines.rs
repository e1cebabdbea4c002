//! The timed part of an HTTP/2 connection's goodbye on actix: one timer per connection, at
//! the earliest of
//!
//! - its maximum age ([`lameduck::Config::max_connection_age`]), while it serves: then it
//!   says GOAWAY as after a 429;
//! - its point in the idle-close window, when the spread put its GOAWAY there;
//! - [`SILENT_PEER_TIMEOUT`] after the first GOAWAY, while the client has not acknowledged
//!   its PING: then the final GOAWAY goes out anyway, naming the streams opened so far (as
//!   Go's server does at its GOAWAY timeout);
//! - the connection's bound, once it stopped (the lifecycle's stop broadcast, or its own
//!   GOAWAY request) or aged: [`Shared::connection_bound`] from the stop,
//!   [`Shared::aged_connection_bound`] from the age, the earlier of the two. At the bound the
//!   connection is cut, whatever its peer does, and counted ([`CutKind`]).
//!
//! The work in flight is the streams the server has not ended (followed from both
//! directions' frame headers by the writer): none is [`ConnectionWork::Idle`] since the stop
//! or the last stream's end, some is [`ConnectionWork::Busy`]. actix's streams are not
//! classified (normal or long-running) where the frames pass, so a busy connection is taken
//! to carry both: its bound is the later of the request timeout and the long-running grace
//! period, and no stream lameduck still allows is cut (the termination's own end, after the
//! drain, bounds the exit anyway).
//!
//! Nothing here is read, not even the clock, while the connection serves without an age.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Instant as StdInstant;

use lameduck::connection::{ConnectionWork, CutKind, SILENT_PEER_TIMEOUT};
use lameduck::Instant;
use lameduck_hyper::Runtime as _;
use lameduck_tokio::TokioRuntime;
use tokio::time::Sleep;

use crate::connection::LifecycleRef;

/// Where the writer's GOAWAY stands, as far as the timers care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Serving (no GOAWAY due yet).
    Serving,
    /// Waiting for its point in the idle-close window.
    Spreading,
    /// The first GOAWAY is due or out, the PING not acknowledged.
    AwaitingAck,
    /// The final GOAWAY is due or out.
    Final,
}

/// What became due at a look at the timers (at most one thing at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// The connection reached its maximum age: GOAWAY.
    Aged,
    /// The connection's point in the idle-close window came: GOAWAY.
    SpreadOver,
    /// The PING went unacknowledged for [`SILENT_PEER_TIMEOUT`]: the final GOAWAY.
    ForceFinal,
    /// The bound passed: close the connection, counted as this kind.
    Cut(CutKind),
}

/// What the timers last looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    stage: Stage,
    open_streams: usize,
}

/// A connection's deadlines (see the module's documentation), for a server with a lifecycle.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    /// The connection's maximum age, until it is reached.
    age_limit: Option<StdInstant>,
    /// When it reached its age (on the lifecycle's clock).
    aged_at: Option<Instant>,
    /// Its point in the idle-close window, while it waits for it.
    spread_until: Option<StdInstant>,
    /// When it stopped (on the lifecycle's clock): the broadcast's stop, or its own point in
    /// the idle-close window, or its own GOAWAY request.
    stopped_at: Option<Instant>,
    /// When its first GOAWAY went out.
    goaway_at: Option<StdInstant>,
    /// Whether the final GOAWAY was made due by the timer already.
    forced: bool,
    /// Since when no stream has been open, while none is (once stopped or aged: from the
    /// stop or the age at the latest).
    idle_since: Option<Instant>,
    seen: Option<Seen>,
    /// The armed timer and the instant it fires at.
    timer: Option<(StdInstant, Pin<Box<Sleep>>)>,
    /// The bound and its kind as last worked out (for the exit's register).
    last_bound: Option<(Instant, CutKind)>,
}

impl Deadlines {
    /// The deadlines of a connection that reaches its maximum age at `age_limit`, if any.
    pub(super) fn new(age_limit: Option<StdInstant>) -> Self {
        Deadlines {
            age_limit,
            ..Deadlines::default()
        }
    }

    /// The connection stopped at `at` (the lifecycle's clock); it waits for its point in the
    /// idle-close window until `spread_until`, if set.
    pub(super) fn stopped(&mut self, at: Instant, spread_until: Option<StdInstant>) {
        if self.stopped_at.is_none() {
            self.stopped_at = Some(at);
            self.spread_until = spread_until;
            // Idle now, it has been since the stop at the latest (its last stream may have
            // ended before the writer saw the stop); busy, the first look clears it.
            self.idle_since.get_or_insert(at);
            self.seen = None;
        }
    }

    /// The first GOAWAY went out now.
    pub(super) fn goaway_sent(&mut self) {
        if self.goaway_at.is_none() {
            self.goaway_at = Some(TokioRuntime.now());
            self.seen = None;
        }
    }

    /// Whether a bound applies: the connection stopped or aged.
    fn bounded(&self) -> bool {
        self.stopped_at.is_some() || self.aged_at.is_some()
    }

    /// Looks at the timers: what is due now, if anything; otherwise the timer is armed at
    /// the next deadline (and wakes `cx`). Reads the clock only when the timer fired or what
    /// it depends on changed.
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        (shared, clock): &LifecycleRef,
        stage: Stage,
        open_streams: usize,
    ) -> Option<Due> {
        // A few rounds at most: a timer armed in the past makes the next one look again.
        for _ in 0..4 {
            let seen = Seen {
                stage,
                open_streams: if self.bounded() { open_streams } else { 0 },
            };
            let fired = self
                .timer
                .as_mut()
                .is_some_and(|(_, timer)| timer.as_mut().poll(cx).is_ready());
            if !fired && self.seen == Some(seen) {
                return None;
            }
            self.seen = Some(seen);
            let now = TokioRuntime.now();
            if let Some(due) = self.due(now, (shared, *clock), stage, open_streams) {
                // Looked at again once the writer acted on it.
                self.seen = None;
                return Some(due);
            }
            let next = self.next(shared, *clock, stage, open_streams, clock.instant(now));
            if !self.arm(cx, next) {
                return None;
            }
        }
        // Still due at once: look again at the next poll.
        self.seen = None;
        cx.waker().wake_by_ref();
        None
    }

    /// What is due at `now`.
    fn due(
        &mut self,
        now: StdInstant,
        (shared, clock): (&lameduck::Shared, lameduck::StdClock),
        stage: Stage,
        open_streams: usize,
    ) -> Option<Due> {
        if let Some(limit) = self.age_limit.filter(|limit| *limit <= now) {
            self.age_limit = None;
            let aged_at = clock.instant(limit);
            self.aged_at = Some(aged_at);
            self.idle_since.get_or_insert(aged_at);
            return (stage == Stage::Serving || stage == Stage::Spreading).then_some(Due::Aged);
        }
        if stage == Stage::Spreading && self.spread_until.is_some_and(|until| until <= now) {
            self.spread_until = None;
            return Some(Due::SpreadOver);
        }
        if stage == Stage::AwaitingAck
            && !self.forced
            && self
                .goaway_at
                .is_some_and(|sent| sent + SILENT_PEER_TIMEOUT <= now)
        {
            self.forced = true;
            return Some(Due::ForceFinal);
        }
        let at = clock.instant(now);
        let (bound, kind) = self.bound(shared, open_streams, at)?;
        (bound <= at).then_some(Due::Cut(kind))
    }

    /// The connection's bound and what a cut there is counted as; `None` when it has not
    /// stopped nor aged, or no bound applies.
    fn bound(
        &mut self,
        shared: &lameduck::Shared,
        open_streams: usize,
        now: Instant,
    ) -> Option<(Instant, CutKind)> {
        if !self.bounded() {
            return None;
        }
        let idle = open_streams == 0;
        let work = if idle {
            ConnectionWork::Idle {
                since: *self.idle_since.get_or_insert(now),
            }
        } else {
            self.idle_since = None;
            ConnectionWork::Busy {
                normal: true,
                long_running: true,
                late_until: None,
            }
        };
        let by_stop = self
            .stopped_at
            .and_then(|at| shared.connection_bound(at, work))
            .map(|at| {
                (
                    at,
                    if idle {
                        CutKind::Http2Goaway
                    } else {
                        CutKind::UnreadResponse
                    },
                )
            });
        let by_age = self
            .aged_at
            .and_then(|at| shared.aged_connection_bound(at, work))
            .map(|at| {
                (
                    at,
                    if idle {
                        CutKind::Http2Goaway
                    } else {
                        CutKind::MaxConnectionAge
                    },
                )
            });
        let bound = match (by_stop, by_age) {
            (Some(stop), Some(age)) => Some(if age.0 < stop.0 { age } else { stop }),
            (stop, age) => stop.or(age),
        };
        self.last_bound = bound;
        bound
    }

    /// The bound and its kind as last worked out.
    pub(super) fn last_bound(&self) -> Option<(Instant, CutKind)> {
        self.last_bound
    }

    /// The next deadline after `now`, on the timers' clock.
    fn next(
        &mut self,
        shared: &lameduck::Shared,
        clock: lameduck::StdClock,
        stage: Stage,
        open_streams: usize,
        now: Instant,
    ) -> Option<StdInstant> {
        let spread = self.spread_until.filter(|_| stage == Stage::Spreading);
        let final_goaway = match (stage, self.goaway_at) {
            (Stage::AwaitingAck, Some(sent)) if !self.forced => Some(sent + SILENT_PEER_TIMEOUT),
            _ => None,
        };
        let bound = self
            .bound(shared, open_streams, now)
            .map(|(at, _)| clock.to_std(at));
        [self.age_limit, spread, final_goaway, bound]
            .into_iter()
            .flatten()
            .min()
    }

    /// Arms the timer at `at` (unless armed there already), or disarms it. Whether it is due
    /// at once.
    fn arm(&mut self, cx: &mut Context<'_>, at: Option<StdInstant>) -> bool {
        let Some(at) = at else {
            self.timer = None;
            return false;
        };
        match &mut self.timer {
            Some((armed, _)) if *armed == at => return false,
            Some((armed, timer)) => {
                timer.as_mut().reset(at.into());
                *armed = at;
            }
            None => {
                // Outside a tokio runtime (the writer driven by hand) there is no timer.
                if tokio::runtime::Handle::try_current().is_err() {
                    return false;
                }
                self.timer = Some((at, Box::pin(tokio::time::sleep_until(at.into()))));
            }
        }
        self.timer
            .as_mut()
            .is_some_and(|(_, timer)| timer.as_mut().poll(cx).is_ready())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn lifecycle(config: lameduck::Config) -> LifecycleRef {
        let mut builder = lameduck_tokio::builder(config);
        builder.without_os_signals();
        let server = builder.prepare();
        (Arc::clone(server.shared()), server.clock())
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stopped_connection_is_cut_a_second_after_the_stop() {
        let life = lifecycle(lameduck::Config::default());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut d = Deadlines::new(None);
        assert_eq!(d.poll(&mut cx, &life, Stage::Serving, 0), None);
        assert!(d.timer.is_none(), "no timer while serving without an age");
        let stop = life.1.instant(TokioRuntime.now());
        d.stopped(stop, None);
        d.goaway_sent();
        assert_eq!(d.poll(&mut cx, &life, Stage::AwaitingAck, 0), None);
        tokio::time::advance(SILENT_PEER_TIMEOUT).await;
        // The bound (from the stop) and the final GOAWAY (from the first) coincide here: the
        // final GOAWAY first, then the cut.
        assert_eq!(
            d.poll(&mut cx, &life, Stage::AwaitingAck, 0),
            Some(Due::ForceFinal)
        );
        assert_eq!(
            d.poll(&mut cx, &life, Stage::Final, 0),
            Some(Due::Cut(CutKind::Http2Goaway))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_keeps_its_streams_bound_then_a_second_after_their_end() {
        let config = lameduck::Config::builder()
            .request_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let life = lifecycle(config);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut d = Deadlines::new(None);
        d.stopped(life.1.instant(TokioRuntime.now()), None);
        d.goaway_sent();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            d.poll(&mut cx, &life, Stage::AwaitingAck, 2),
            Some(Due::ForceFinal)
        );
        assert_eq!(d.poll(&mut cx, &life, Stage::Final, 2), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        // The streams end 3 s after the stop: a second more.
        assert_eq!(d.poll(&mut cx, &life, Stage::Final, 0), None);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(d.poll(&mut cx, &life, Stage::Final, 0), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            d.poll(&mut cx, &life, Stage::Final, 0),
            Some(Due::Cut(CutKind::Http2Goaway))
        );
        // A stream that never ends: cut at the request timeout plus a second.
        let mut d = Deadlines::new(None);
        let stop = TokioRuntime.now();
        d.stopped(life.1.instant(stop), None);
        assert_eq!(d.poll(&mut cx, &life, Stage::Final, 1), None);
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(
            d.poll(&mut cx, &life, Stage::Final, 1),
            Some(Due::Cut(CutKind::UnreadResponse))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_aged_connection_says_goaway_and_its_streams_get_the_grace() {
        let config = lameduck::Config::builder()
            .max_connection_age(Duration::from_secs(10))
            .max_connection_age_grace(Duration::from_secs(2))
            .build()
            .unwrap();
        let life = lifecycle(config);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut d = Deadlines::new(Some(TokioRuntime.now() + Duration::from_secs(10)));
        assert_eq!(d.poll(&mut cx, &life, Stage::Serving, 3), None);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(d.poll(&mut cx, &life, Stage::Serving, 3), Some(Due::Aged));
        d.goaway_sent();
        // The client acknowledges; its stream outlasts the grace.
        assert_eq!(d.poll(&mut cx, &life, Stage::Final, 1), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            d.poll(&mut cx, &life, Stage::Final, 1),
            Some(Due::Cut(CutKind::MaxConnectionAge))
        );
    }
}
