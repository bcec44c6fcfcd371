//! Handshake-era (2025-11-25) upstreams: sessions Sluice owns, pooled per principal, upstream
//! and bridged capability set, each leased to one call at a time.
//!
//! Takes an upstream and the capabilities a client declared; gives a leased [`Session`] that
//! has done `initialize` (declaring only the normalized [`Bridged`] set, never the client's own
//! JSON) and `notifications/initialized`, keeps its standalone GET stream open, and never
//! reuses a request id. Bounded by `bridge.max_sessions` in all and
//! `bridge.max_sessions_per_principal` per principal (Sluice's own internal principal exempt).
//! Refuses (errors naming the upstream and the limit) a failed handshake and a session past
//! either cap when no idle one can be closed to make room.

pub mod caps;
pub mod changes;
pub mod channel;
mod handshake;
mod inline;
pub mod pool;
mod resume;
pub mod session;
pub mod sse;

pub use caps::Bridged;
pub use pool::{Lease, Pool};
pub use session::Session;

use serde_json::{Map, Value};

/// The legacy `ClientCapabilities` for a modern request's declared capabilities: the bridged
/// subset (sampling, sampling tools, elicitation modes, roots), normalized.
pub fn legacy_capabilities(modern: &Map<String, Value>) -> Value {
    Bridged::from_capabilities(modern).to_legacy()
}

/// Every capability Sluice can bridge: what its own sessions declare (for lists, so servers
/// that register tools only for sampling clients list them all).
pub fn all_capabilities() -> Value {
    Bridged::LISTING.to_legacy()
}
