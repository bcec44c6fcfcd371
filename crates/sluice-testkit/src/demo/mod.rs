//! The demo's upstreams, also used by tests: [`upstream`] (a 2026-07-28 server over HTTP),
//! [`legacy`] (a 2025-11-25 server whose tools ask the client's model mid-call) and [`stdio`]
//! (a 2025-11-25 stdio server). Each answers from memory and keeps a tally of what it saw.

pub mod legacy;
pub mod stdio;
pub mod upstream;
