//! Owned tickets, for request futures that must be `'static`.
//!
//! They hold an `Arc` of the lifecycle's shared state; cloning it is one more atomic
//! increment, still with no allocation. The types are defined next to that state, in
//! [`crate::shared`], and re-exported here under their original path.

use alloc::sync::Arc;

use crate::gate::{LongRunningTicketOf, NormalTicketOf, Rejection};
use crate::shared::Shared;
pub use crate::shared::{OwnedLongRunningTicket, OwnedNormalTicket};

/// Admits a normal request into `shared`'s gate.
pub fn admit_normal(shared: &Arc<Shared>) -> Result<OwnedNormalTicket, Rejection> {
    NormalTicketOf::admit(shared)
}

/// Admits a long-running request into `shared`'s gate.
pub fn admit_long_running(shared: &Arc<Shared>) -> Result<OwnedLongRunningTicket, Rejection> {
    LongRunningTicketOf::admit(shared)
}
