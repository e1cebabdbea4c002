//! Owned admission tickets, for request futures that must be `'static`.

use alloc::sync::Arc;

use super::Shared;
use crate::gate::{sealed, Gate, GateRef, LongRunningTicketOf, NormalTicketOf};

/// An owned normal ticket, from [`Shared::admit`], for request futures that must be
/// `'static`: it holds an `Arc` of the lifecycle's shared state (cloning it is one more
/// atomic increment, still with no allocation).
pub type OwnedNormalTicket = NormalTicketOf<Arc<Shared>>;

/// An owned long-running ticket, from [`Shared::admit`]; see [`OwnedNormalTicket`].
pub type OwnedLongRunningTicket = LongRunningTicketOf<Arc<Shared>>;

impl sealed::Sealed for Arc<Shared> {
    const DEBUG_PREFIX: &'static str = "Owned";
}

impl GateRef for Arc<Shared> {
    #[inline]
    fn gate(&self) -> &Gate {
        &self.gate
    }
}

impl OwnedNormalTicket {
    /// The shared state this ticket belongs to.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.holder()
    }
}

impl OwnedLongRunningTicket {
    /// The shared state this ticket belongs to.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.holder()
    }
}
