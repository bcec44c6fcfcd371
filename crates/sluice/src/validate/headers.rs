//! Mirrored headers against the body (digest §5.2): `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` and, for tools/call, `Mcp-Param-*` (via [`crate::route::xheader::check`]).
//!
//! Takes the request headers, the envelope and its meta; gives `Ok` when every mirrored header
//! is present and equal to the body (names case-insensitive, values case-sensitive, whitespace
//! trimmed, Base64 sentinel decoded). Refuses with `-32020` (HTTP 400) naming the header.

use http::HeaderMap;

use super::{Meta, ValidateError};
use crate::mcp::headers::{self, decode};
use crate::mcp::jsonrpc::Envelope;

fn mismatch(msg: String) -> ValidateError {
    ValidateError::Headers(msg)
}

fn header<'h>(
    h: &'h HeaderMap,
    name: http::HeaderName,
    display: &str,
) -> Result<std::borrow::Cow<'h, str>, ValidateError> {
    let mut values = h.get_all(name).iter();
    let v = values.next().ok_or_else(|| {
        mismatch(format!(
            "Header mismatch: the {display} header is required; mirror the body into it"
        ))
    })?;
    if values.next().is_some() {
        return Err(mismatch(format!(
            "Header mismatch: the {display} header is sent twice; send it once"
        )));
    }
    decode(v).map_err(|e| mismatch(format!("Header mismatch: {display}: {e}")))
}

/// Checks the standard mirrored headers.
pub fn check(h: &HeaderMap, env: &Envelope, meta: &Meta) -> Result<(), ValidateError> {
    let version = header(h, headers::PROTOCOL_VERSION, "MCP-Protocol-Version")?;
    if version != meta.version {
        return Err(mismatch("Header mismatch: MCP-Protocol-Version does not equal _meta io.modelcontextprotocol/protocolVersion".into()));
    }
    let method = header(h, headers::METHOD, "Mcp-Method")?;
    if method != env.method.as_str() {
        return Err(mismatch(format!(
            "Header mismatch: Mcp-Method {method:?} does not equal the body's method {:?}",
            env.method
        )));
    }
    if let Some(member) = env.method.name_member() {
        let name = header(h, headers::NAME, "Mcp-Name")?;
        match env.param_text(member) {
            Some(Ok(body)) if body == name => {}
            // The value itself is not echoed: a name or URI may carry user content.
            _ => {
                return Err(mismatch(format!(
                    "Header mismatch: Mcp-Name does not equal params.{member}"
                )))
            }
        }
    }
    Ok(())
}
