//! The `_meta` envelope of a modern request (digest §1.1, §1.3).
//!
//! Takes the raw `params._meta`; gives the protocol version, declared client capabilities and
//! requested log level. Refuses (`-32602`, HTTP 400) a missing `_meta`, a missing or non-string
//! `protocolVersion`, missing or non-object `clientCapabilities`, and an unknown log level.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::mcp::jsonrpc::Envelope;
use crate::upstream::forward::level_rank;

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

fn invalid(msg: &str) -> GatewayError {
    GatewayError::InvalidParams(msg.to_owned(), None)
}

/// Reads and checks the envelope.
pub fn read(env: &Envelope) -> Result<Meta, GatewayError> {
    let raw = env.param("_meta").ok_or_else(|| {
        invalid("params._meta is required in 2026-07-28: add io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities")
    })?;
    // Only the three members Sluice reads are parsed (borrowed); clientInfo and the rest stay text.
    #[derive(serde::Deserialize)]
    struct Wire<'a> {
        #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
        version: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "io.modelcontextprotocol/clientCapabilities")]
        capabilities: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "io.modelcontextprotocol/logLevel")]
        log_level: Option<&'a RawValue>,
    }
    let meta: Wire<'_> =
        serde_json::from_str(raw).map_err(|_| invalid("params._meta must be an object, each of its members given once"))?;
    let version = match meta.version.map(|r| serde_json::from_str::<Value>(r.get())) {
        Some(Ok(Value::String(v))) => v,
        Some(Ok(Value::Null)) | None => {
            return Err(invalid("_meta io.modelcontextprotocol/protocolVersion is required (e.g. \"2026-07-28\")"))
        }
        Some(_) => return Err(invalid("_meta io.modelcontextprotocol/protocolVersion must be a string such as \"2026-07-28\"")),
    };
    let capabilities = match meta.capabilities.map(|r| serde_json::from_str::<Value>(r.get())) {
        Some(Ok(Value::Object(c))) => c,
        Some(Ok(Value::Null)) | None => {
            return Err(invalid("_meta io.modelcontextprotocol/clientCapabilities is required ({} declares none)"))
        }
        Some(_) => return Err(invalid("_meta io.modelcontextprotocol/clientCapabilities must be an object ({} declares none)")),
    };
    let log_level = match meta.log_level.map(|r| serde_json::from_str::<Value>(r.get())) {
        None | Some(Ok(Value::Null)) => None,
        Some(Ok(Value::String(l))) => Some(level_rank(&l).ok_or_else(|| {
            invalid("_meta io.modelcontextprotocol/logLevel must be one of debug, info, notice, warning, error, critical, alert, emergency")
        })?),
        Some(_) => return Err(invalid("_meta io.modelcontextprotocol/logLevel must be a string")),
    };
    Ok(Meta { version, capabilities, log_level })
}
