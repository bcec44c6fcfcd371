//! Handshake-era (2025-11-25) upstreams: sessions Sluice owns, pooled per principal, upstream
//! and client capability set, each leased to one call at a time.
//!
//! Takes an upstream and the capabilities a client declared; gives a leased [`Session`] that
//! has done `initialize` and `notifications/initialized`, keeps its standalone GET stream open,
//! and never reuses a request id. Refuses (errors naming the upstream) a failed handshake and
//! more sessions than `bridge.max_sessions` when none is idle to evict.

pub mod pool;
pub mod session;

pub use pool::{Lease, Pool};
pub use session::Session;

use serde_json::{json, Map, Value};

/// The legacy `ClientCapabilities` for a modern request's declared capabilities (the subset a
/// legacy server can use: sampling, elicitation, roots).
pub fn legacy_capabilities(modern: &Map<String, Value>) -> Value {
    let mut caps = Map::new();
    for key in ["sampling", "elicitation", "roots"] {
        if let Some(v) = modern.get(key) {
            caps.insert(key.into(), if v.is_object() { v.clone() } else { json!({}) });
        }
    }
    Value::Object(caps)
}

/// Every capability Sluice can bridge: what its own sessions declare (for lists, so servers
/// that register tools only for sampling clients list them all).
pub fn all_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}})
}
