//! The one test harness every test binary uses (`mod support;`).
//!
//! - `gateway`: Sluice's config from typed values (serialized with `toml`), started in-process
//!   on 127.0.0.1:0; `logs`: its log lines, captured;
//! - `modern`, `legacy`: the mock 2026-07-28 and 2025-11-25 upstreams, raw bytes under the
//!   test's control (the test kit's, `crates/sluice-testkit`);
//! - `client` (requests built member by member, SSE read event by event, raw HTTP/1.1), `rpc`
//!   (JSON bodies) and `text` (raw-text bodies): 2026-07-28 clients; `call`: `tools/call` rounds;
//!   `legacy_client`: the 2025-11-25 client; `load`: clients calling without pause, for changes
//!   made under load;
//! - `peers`: the Python and Node SDK peers (and hold_connections.py); `holders`: idle HTTP/2
//!   connections from several sources (hold_h2.py); `rmcp_client`: the Rust
//!   SDK as an in-process client; `process`: the `sluice` binary as a child process; `net`:
//!   addresses where nothing answers.
//!
//! No fixed ports. Waits end on the event they wait for (a channel, a notification, a line),
//! each bounded by a deadline. They poll only where nothing can notify: a separate process (a
//! peer, the binary), a file Sluice appends to (the audit sink), or Sluice's own state
//! ([`eventually`]). A test that waits for one of Sluice's timeouts in-process pauses tokio's
//! clock (`tokio::time::pause`) instead of sleeping.

#![allow(dead_code, unused_imports)] // each binary uses part of it

pub(crate) mod call;
pub(crate) use sluice_testkit::{legacy, modern};
pub(crate) mod client;
pub(crate) mod gateway;
pub(crate) mod holders;
pub(crate) mod legacy_client;
pub(crate) mod load;
pub(crate) mod logs;
pub(crate) mod net;
pub(crate) mod otlp;
pub(crate) mod peers;
pub(crate) mod process;
pub(crate) mod rmcp_client;
pub(crate) mod rpc;
pub(crate) mod text;

use std::time::Duration;

/// The modern protocol version.
pub(crate) const V: &str = "2026-07-28";
/// Longest any test waits for one thing (only an upper bound: waits end as soon as it happens).
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// Polls `cond` every 5 ms for up to [`WAIT`] (for state inside Sluice that has no event to
/// wait on).
pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`eventually`], with a condition that is itself awaited (it may make requests).
pub(crate) async fn eventually_async<F: std::future::Future<Output = bool>>(
    what: &str,
    mut cond: impl FnMut() -> F,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A unique string for canaries and names.
pub(crate) fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("canary-{what}-{:x}{nanos:x}", std::process::id())
}
