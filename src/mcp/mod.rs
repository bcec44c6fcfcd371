//! The MCP wire model: pure protocol, no I/O.
//!
//! Takes bytes and header values; gives parsed envelopes, encoded and decoded header values,
//! JSON-RPC error and result bodies, and SSE frames. Refuses nothing by itself: callers decide
//! what a parse failure means for the client.

pub mod headers;
pub mod jsonrpc;
pub mod sse;
pub mod version;

/// `_meta` key carrying the protocol version of a modern request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client capabilities of a modern request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the (optional, self-reported) client info.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key carrying the requested log level (deprecated Logging feature).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key carrying the server's identity.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification `_meta` key naming the listen request a notification belongs to.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
