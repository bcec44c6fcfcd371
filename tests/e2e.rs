//! End-to-end tests of the 2026-07-28 front door, discovery, federation, listen streams and
//! the modern upstream client (issue 2, items 3–7).
//!
//! Everything runs in-process on 127.0.0.1 port 0: Sluice (`sluice::start`) in front of the
//! built-in demo upstream or of the configurable mock upstream in `e2e/support.rs`. Each test
//! is named as the behaviour it checks.

#[path = "e2e/support/mod.rs"]
mod support;

#[path = "e2e/front_door.rs"]
mod front_door;

#[path = "e2e/headers.rs"]
mod headers;

#[path = "e2e/discover.rs"]
mod discover;

#[path = "e2e/federation.rs"]
mod federation;

#[path = "e2e/listen.rs"]
mod listen;

#[path = "e2e/forward.rs"]
mod forward;
