//! The request context: what the stages have learned about one request, passed down the
//! pipeline instead of the whole gateway's view of it.
//!
//! Takes the authenticated principal, the parsed envelope, its decoded `_meta`, the routed
//! target and the headers to forward; gives them to routing, policy and dispatch. Refuses
//! nothing.

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
}
