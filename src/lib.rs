//! Helpers shared by the top-level examples and black-box tests of the lameduck workspace.
//!
//! This package is never published; it exists so that `examples/` and `tests/` at the
//! repository root have a package to belong to.
#![deny(missing_docs)]
