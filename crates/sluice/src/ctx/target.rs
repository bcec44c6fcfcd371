//! Where a routed request goes: the upstream, its own name for what was asked, and the tool's
//! header annotations.
//!
//! Takes nothing; gives the [`Target`] routing resolves and the later stages (policy, the
//! bridges, forwarding) read. Refuses nothing.

use std::sync::Arc;

use crate::route::xheader::ParamHeader;
use crate::upstream::Upstream;

/// Where a routed request goes.
#[derive(Clone)]
pub struct Target {
    /// The upstream.
    pub up: Arc<Upstream>,
    /// The upstream's own name (tools, prompts) or the URI (resources).
    pub own: String,
    /// Whether the body must be rewritten (the public name differs from `own`).
    pub renamed: bool,
    /// `x-mcp-header` annotations of the tool.
    pub headers: Vec<ParamHeader>,
    /// Whether `own` is a resource's URI (routed by it), for what a record keeps of it.
    pub uri: bool,
}
