//! The request context: what the stages have learned about one request, passed down the
//! pipeline instead of the whole gateway's view of it.
//!
//! Takes the authenticated principal, the parsed envelope, its decoded `_meta`, the routed
//! target, the headers to forward, and what the policy stage decided (the call's way, a modern
//! round's opened state); gives them to routing, policy and dispatch. Refuses nothing.

pub mod target;

use std::borrow::Cow;

use http::HeaderMap;

use crate::auth::Principal;
use crate::mcp::jsonrpc::Envelope;
use crate::validate::Meta;
pub use target::Target;

/// One request as the stages after validation see it.
pub struct RequestCtx<'a> {
    /// Who is asking (from authentication, never `clientInfo`).
    pub principal: &'a Principal,
    /// The request, parsed once (after an approval, the request without the approval round's
    /// members).
    pub env: Envelope,
    /// Its `_meta` envelope, decoded.
    pub meta: Meta,
    /// Where it routes (`None`: answered by Sluice itself).
    pub target: Option<Target>,
    /// The headers forwarded with it (the client's, or those Sluice mirrors for a request it
    /// built itself).
    pub headers: Cow<'a, HeaderMap>,
    /// Whether a 2025-11-25 client sent it (bridge B relays it through the stages): an upstream
    /// that speaks both eras serves it on its 2025-11-25 wire, as it would serve that client
    /// direct.
    pub legacy_client: bool,
    /// The way its target's era takes it, decided once by the policy stage (`None`: not routed).
    pub way: Option<crate::link::Way>,
    /// For a call forwarded to a 2026-07-28 upstream, its round state as the policy stage opened
    /// it (round cap and answer sizes checked there).
    pub retry: Option<crate::forward::rounds::Retry>,
}
