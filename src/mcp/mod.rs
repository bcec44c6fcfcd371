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

/// `text` without whitespace outside strings; every token keeps its bytes. Upstream JSON is
/// relayed through it so each body Sluice writes is one compact object and each SSE frame one
/// `data:` line, however the upstream formatted its own.
pub fn compact_json(text: &str) -> std::borrow::Cow<'_, str> {
    let (mut in_str, mut esc) = (false, false);
    let mut out: Option<Vec<u8>> = None;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        let keep = if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            true
        } else {
            in_str = b == b'"';
            !matches!(b, b' ' | b'\t' | b'\n' | b'\r')
        };
        match (&mut out, keep) {
            (Some(o), true) => o.push(b),
            (None, false) => out = Some(text.as_bytes()[..i].to_vec()),
            _ => {}
        }
    }
    // Only ASCII whitespace was removed, so the bytes are still UTF-8.
    match out.map(String::from_utf8) {
        Some(Ok(s)) => std::borrow::Cow::Owned(s),
        _ => std::borrow::Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::compact_json;

    #[test]
    fn compact_json_drops_whitespace_outside_strings_only() {
        assert_eq!(
            compact_json("{\n  \"a b\": [1.50, \"x\\\" \\n y\"],\r\n\t\"c\": null }"),
            "{\"a b\":[1.50,\"x\\\" \\n y\"],\"c\":null}"
        );
        assert!(matches!(compact_json("{\"k\":\"v w\"}"), std::borrow::Cow::Borrowed(_)));
    }
}
