//! Unit tests of [`crate::config`], one module per part of the configuration.

use super::*;
use alloc::string::{String, ToString};

mod connection_age;
mod defaults;
mod errors;
mod idle_close;
mod options;

/// The message of the error setting `option` to `value` gives.
fn set_error(option: ConfigOption, value: &str) -> String {
    Config::builder()
        .set(option, value)
        .unwrap_err()
        .to_string()
}
