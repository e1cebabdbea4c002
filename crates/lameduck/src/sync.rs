//! The atomics the gate uses, swapped for loom's under `cfg(loom)` so `tests/loom.rs` can
//! model-check every interleaving.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
