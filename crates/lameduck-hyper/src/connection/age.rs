//! A connection's maximum age ([`Config::max_connection_age`](lameduck::Config::max_connection_age),
//! gRPC's `MAX_CONNECTION_AGE`): drawn for each connection when it opens (within +-10 % of
//! the configured age, so that the connections of one burst do not all age together), then
//! one timer. At its age the connection says goodbye as at a stop (HTTP/1 `Connection:
//! close` on its next response, or closed when idle; HTTP/2 the two-step GOAWAY) and gets a
//! [`Bound`](super::bound::Bound). Off by default: a connection then has no [`Age`] and pays
//! nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use lameduck::Instant;

use crate::request::goaway;
use crate::request::layer::AdmissionLayer;
use crate::runtime::Runtime;

/// One connection's age timer.
pub(crate) struct Age<R: Runtime> {
    /// When the connection reaches its age, on the lifecycle's clock.
    at: Instant,
    timer: Pin<Box<R::Sleep>>,
}

impl<R: Runtime> Age<R> {
    /// The age of a connection opening now, when the lifecycle's configuration sets one.
    pub(crate) fn drawn(admission: &AdmissionLayer<R>) -> Option<Box<Self>> {
        let config = admission.shared.config();
        if config.max_connection_age().is_zero() {
            return None;
        }
        let limit = config.connection_age_limit(goaway::next_u32())?;
        let now = admission.runtime.now();
        let until = now.checked_add(limit)?;
        Some(Box::new(Age {
            at: admission.clock.instant(now).saturating_add(limit),
            timer: Box::pin(admission.runtime.sleep_until(until)),
        }))
    }

    /// `Some(at)` once the connection has reached its age (at `at`); registers the timer
    /// otherwise.
    pub(crate) fn poll_reached(&mut self, cx: &mut Context<'_>) -> Option<Instant> {
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Some(self.at),
            Poll::Pending => None,
        }
    }
}
