//! The tests that run the built `sluice` binary (tests/support/process.rs), and those of the
//! hardening bounds that run Sluice in-process next to them.

mod check;
mod config_errors;
mod demo;
mod hardening;
mod hostile;
mod idle;
mod logs;
mod reload;
mod shares;
mod stdio_start;
