//! The MCP wire model: pure protocol, no I/O.
//!
//! Takes bytes and header values; gives parsed envelopes, encoded and decoded header values,
//! JSON-RPC error and result bodies, and SSE frames. Refuses nothing by itself: callers decide
//! what a parse failure means for the client.

pub mod headers;
pub mod jsonrpc;
pub mod lists;
pub mod message;
pub mod method;
pub mod number;
pub mod raw;
pub mod recorded;
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

/// Numeric severity of a log level name.
pub fn level_rank(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .map(|p| p as u8)
}

/// The severity of a `notifications/message`, read from its params' `level` (`None`: no params,
/// not JSON, or no known level).
pub fn message_rank(params: Option<&serde_json::value::RawValue>) -> Option<u8> {
    let params = serde_json::from_str::<serde_json::Value>(params?.get()).ok()?;
    params.get("level")?.as_str().and_then(level_rank)
}

/// `text` without whitespace outside strings; every token keeps its bytes. Upstream JSON is
/// relayed through it so each body Sluice writes is one compact object and each SSE frame one
/// `data:` line, however the upstream formatted its own. Strings are skipped with `memchr`, so
/// already compact text (the usual case) costs one pass at memory speed and is not copied.
pub fn compact_json(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let Some(first) = next_space(b, 0) else {
        return std::borrow::Cow::Borrowed(text);
    };
    let mut out = Vec::with_capacity(b.len());
    out.extend_from_slice(&b[..first]);
    let mut i = first;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => {
                let end = string_end(b, i + 1);
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
            _ => {
                let end = next_space(b, i).unwrap_or(b.len());
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
        }
    }
    // Only ASCII whitespace was removed, so the bytes are still UTF-8.
    match String::from_utf8(out) {
        Ok(s) => std::borrow::Cow::Owned(s),
        Err(_) => std::borrow::Cow::Borrowed(text),
    }
}

/// The index just past the string whose contents start at `from` (or the end of the text).
fn string_end(b: &[u8], mut from: usize) -> usize {
    while let Some(j) = memchr::memchr2(b'"', b'\\', &b[from..]) {
        let at = from + j;
        if b[at] == b'"' {
            return at + 1;
        }
        from = at + 2; // an escape: skip the escaped byte
        if from >= b.len() {
            return b.len();
        }
    }
    b.len()
}

/// The first whitespace byte outside strings at or after `from`.
fn next_space(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => return Some(i),
            b'"' => i = string_end(b, i + 1),
            _ => i += 1,
        }
    }
    None
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
        assert!(matches!(
            compact_json("{\"k\":\"v w\"}"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(compact_json("[\"a\\\\\", \"b c\" ]"), "[\"a\\\\\",\"b c\"]");
        assert_eq!(compact_json("\"unterminated \\"), "\"unterminated \\");
    }

    proptest::proptest! {
        #[test]
        fn compacting_keeps_the_value(v in json_value()) {
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            let compact = compact_json(&pretty);
            proptest::prop_assert_eq!(compact.as_ref(), serde_json::to_string(&v).unwrap());
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[ a\\\\\"\\n\\t\\PC]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[ a\"\\\\]{0,6}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
