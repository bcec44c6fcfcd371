//! The e2e harness: Sluice started in-process on 127.0.0.1:0, a configurable mock 2026-07-28
//! upstream over real HTTP, a client that builds well-formed modern requests (and lets a test
//! break any part of them), an SSE reader, a raw HTTP/1.1 writer for headers reqwest would
//! normalise, and a capture of Sluice's warnings.
//!
//! No fixed ports, no sleeps longer than 2 s: every wait polls with a deadline (at most 10 s).

#![allow(dead_code)]

mod client;
mod gateway;
mod logs;
mod mock;

use std::time::Duration;

pub(crate) use client::*;
pub(crate) use gateway::*;
pub(crate) use logs::*;
pub(crate) use mock::*;

/// The modern protocol version.
pub(crate) const V: &str = "2026-07-28";
/// Longest any test waits for one thing (only an upper bound: waits end as soon as it happens).
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// Polls `cond` every 5 ms for up to [`WAIT`].
pub(crate) async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
