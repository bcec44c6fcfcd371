//! End-to-end tests, everything in-process on 127.0.0.1 port 0: Sluice (`sluice::start`) in
//! front of the built-in demo upstream or of the mock upstreams in tests/support. Each test is
//! named as the behaviour it checks.
//!
//! - `front_door`, `headers`, `discover`, `federation`, `listen`, `forward`: the 2026-07-28
//!   front door, discovery, federation, listen streams and the modern upstream client (issue 2,
//!   items 3–7);
//! - `bridge_b_sessions`: bridge B's sessions (issue 6): forged and foreign session ids, expiry,
//!   DELETE, GET/DELETE without a session, local answers, the bounded store;
//! - `auth`: API keys and JWT bearer tokens, the RFC 9728 resource metadata, per-upstream scopes;
//! - `audit`: the audit log and `/metrics` (issue 5 items 2 and 4); `audit_lines`: a record
//!   stays one line whatever line separators a client's name holds;
//! - `approvals`: calls held for an operator's approval (issue 33 item 3);
//! - `policies`: every shipped policy file loads, validates and decides as documented;
//! - `reload`: the whole config reloaded under load (issue 15 item 2);
//! - `breakers`: what an upstream's breaker counts as a failure (issue 29 item 8);
//! - `pins`: tool pinning, a changed definition quarantined until accepted (issue 33 item 4);
//! - `sse_transport`: the 2024-11-05 HTTP+SSE client transport on the raw wire (issue 29 item 6).

mod admin;
mod approvals;
mod audit;
mod audit_lines;
mod auth;
mod breakers;
mod bridge_b_sessions;
mod discover;
mod federation;
mod forward;
mod front_door;
mod headers;
mod http2;
mod listen;
mod pins;
mod policies;
mod reload;
mod resume;
mod sse_transport;
mod visibility;

/// What the front-door tests use of the harness.
mod prelude {
    pub(crate) use crate::support::client::*;
    pub(crate) use crate::support::gateway::{one_demo, strings, Gateway};
    pub(crate) use crate::support::logs::wait_warning;
    pub(crate) use crate::support::modern::{err, ev, ok, sse, tool, Reply, Spec};
    pub(crate) use crate::support::net::{dead_url, stalled};
    pub(crate) use crate::support::{V, WAIT};
}
