//! The 2025-11-25 handshake, for every transport of a legacy session.
//!
//! Takes the bridged capability set to declare, and the upstream's `initialize` answer; gives
//! the `initialize` request Sluice sends and the negotiated version with the result. Refuses an
//! answer that is not JSON-RPC, is an error, has no result or names a version that is not a
//! header value, as an [`UpstreamError::Protocol`] naming the upstream.

use http::HeaderValue;
use serde_json::{json, Value};

use crate::mcp::jsonrpc::Incoming;
use crate::mcp::method::Method as McpMethod;
use crate::upstream::client::UpstreamError;

/// The `initialize` request Sluice sends, declaring `caps` (id 0: a session's first request).
pub(super) fn initialize_body(caps: super::Bridged) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": McpMethod::Initialize.as_str(), "params": {
        "protocolVersion": "2025-11-25", "capabilities": caps.to_legacy(), "clientInfo": crate::upstream::discover::server_info()}})
}

/// An `initialize` answer read: the negotiated version (as a header value) and the result.
pub(super) fn initialized(
    upstream: &str,
    answer: &[u8],
) -> Result<(HeaderValue, Value), UpstreamError> {
    let bad = |why: String| UpstreamError::Protocol(upstream.to_owned(), why);
    let msg =
        Incoming::parse(answer).map_err(|_| bad("initialize answer is not JSON-RPC".into()))?;
    let result: Value = match (msg.result, msg.error) {
        (Some(r), _) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
        (_, Some(e)) => return Err(bad(format!("initialize failed with error {}", e.code))),
        _ => return Err(bad("initialize answer has no result".into())),
    };
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("2025-11-25");
    let version = HeaderValue::from_str(version).map_err(|_| bad("bad protocolVersion".into()))?;
    Ok((version, result))
}
