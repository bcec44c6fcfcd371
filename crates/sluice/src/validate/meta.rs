//! The `_meta` envelope of a modern request (digest §1.1, §1.3).
//!
//! Takes the raw `params._meta`; gives the protocol version, declared client capabilities and
//! requested log level. Refuses (`-32602`, HTTP 400) a missing `_meta`, a missing or non-string
//! `protocolVersion`, missing or non-object `clientCapabilities`, and an unknown log level.

use serde_json::{Map, Value};

use super::ValidateError;
use crate::mcp;
use crate::mcp::jsonrpc::{Envelope, RawObject};
use crate::mcp::level_rank;

/// What a modern request says about itself.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub version: String,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub capabilities: Map<String, Value>,
    /// Rank of `io.modelcontextprotocol/logLevel`, when present.
    pub log_level: Option<u8>,
}

fn invalid(msg: &str) -> ValidateError {
    ValidateError::Meta(msg.to_owned())
}

/// Reads and checks the envelope.
pub fn read(env: &Envelope) -> Result<Meta, ValidateError> {
    let raw = env.param("_meta").ok_or_else(|| {
        invalid("params._meta is required in 2026-07-28: add io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities")
    })?;
    // Read member by member, borrowed: only the three members Sluice needs are parsed (the last
    // of a repeated key wins, as in any map-based reader); clientInfo and the rest stay text.
    let meta: RawObject<'_> =
        serde_json::from_str(raw).map_err(|_| invalid("params._meta must be an object"))?;
    let member = |k: &str| meta.get(k).map(serde_json::from_str::<Value>);
    let version = match member(mcp::META_PROTOCOL_VERSION) {
        Some(Ok(Value::String(v))) => v,
        None => {
            return Err(invalid(
                "_meta io.modelcontextprotocol/protocolVersion is required (e.g. \"2026-07-28\")",
            ))
        }
        Some(_) => return Err(invalid(
            "_meta io.modelcontextprotocol/protocolVersion must be a string such as \"2026-07-28\"",
        )),
    };
    let capabilities = match member(mcp::META_CLIENT_CAPABILITIES) {
        Some(Ok(Value::Object(c))) => c,
        None => {
            return Err(invalid(
                "_meta io.modelcontextprotocol/clientCapabilities is required ({} declares none)",
            ))
        }
        Some(_) => return Err(invalid(
            "_meta io.modelcontextprotocol/clientCapabilities must be an object ({} declares none)",
        )),
    };
    let log_level = match member(mcp::META_LOG_LEVEL) {
        None => None,
        Some(Ok(Value::String(l))) => Some(level_rank(&l).ok_or_else(|| {
            invalid("_meta io.modelcontextprotocol/logLevel must be one of debug, info, notice, warning, error, critical, alert, emergency")
        })?),
        Some(_) => return Err(invalid("_meta io.modelcontextprotocol/logLevel must be a string")),
    };
    Ok(Meta {
        version,
        capabilities,
        log_level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(m: &str) -> Result<Meta, ValidateError> {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{m}}}}}"#);
        read(&Envelope::parse(bytes::Bytes::from(body)).unwrap())
    }

    #[test]
    fn only_an_object_with_the_required_members_passes() {
        let ok = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}"#;
        let m = meta(ok).unwrap();
        assert_eq!(
            (
                m.version.as_str(),
                m.capabilities.contains_key("sampling"),
                m.log_level
            ),
            ("2026-07-28", true, None)
        );
        assert!(
            meta(r#"["2026-07-28",{}]"#).is_err(),
            "an array is not an object"
        );
        let null_level = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":null}"#;
        assert!(meta(null_level).is_err(), "a null logLevel is not a string");
        let null_version = r#"{"io.modelcontextprotocol/protocolVersion":null,"io.modelcontextprotocol/clientCapabilities":{}}"#;
        assert!(
            matches!(meta(null_version), Err(ValidateError::Meta(m)) if m.contains("must be a string"))
        );
        let twice = r#"{"io.modelcontextprotocol/protocolVersion":1,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        assert_eq!(
            meta(twice).unwrap().version,
            "2026-07-28",
            "the last of a repeated member wins"
        );
    }
}
