//! JSON-RPC messages Sluice writes (results, errors, notifications) and the ones it reads from
//! upstreams and peers.
//!
//! Takes ids, codes and JSON text; gives message bodies, and [`Incoming`] messages decoded (the
//! method as a [`super::method::Method`]). Refuses nothing: a message that does not parse is
//! the caller's to judge.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Appends `s` as a JSON string (quoted; escaped only when it needs escapes).
pub fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        match serde_json::to_string(s) {
            Ok(q) => out.push_str(&q),
            Err(_) => out.push_str("\"\""),
        }
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

// === responses ===

/// A JSON-RPC error body: `{"jsonrpc":"2.0","id":…,"error":{code,message,data?}}`.
pub fn error_body(id: &str, code: i64, message: &str, data: Option<&Value>) -> Bytes {
    let mut err = Map::new();
    err.insert("code".into(), code.into());
    err.insert("message".into(), message.into());
    if let Some(d) = data {
        err.insert("data".into(), d.clone());
    }
    let err = Value::Object(err).to_string();
    Bytes::from(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{err}}}"))
}

/// A JSON-RPC result body around already-serialized result JSON.
pub fn result_body(id: &str, result: &str) -> Bytes {
    Bytes::from(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"))
}

/// A JSON-RPC notification body.
pub fn notification_body(method: &super::method::Method, params: &Value) -> Bytes {
    let m = Value::String(method.as_str().to_owned());
    Bytes::from(format!("{{\"jsonrpc\":\"2.0\",\"method\":{m},\"params\":{params}}}"))
}

/// One message an upstream (or a peer) sent: a response, a request or a notification.
#[derive(Debug, Deserialize)]
pub struct Incoming {
    /// The id, for responses and requests.
    #[serde(default)]
    pub id: Option<Box<RawValue>>,
    /// The method, for requests and notifications (decoded).
    #[serde(default)]
    pub method: Option<super::method::Method>,
    /// The params, for requests and notifications.
    #[serde(default)]
    pub params: Option<Box<RawValue>>,
    /// The result, for successful responses.
    #[serde(default)]
    pub result: Option<Box<RawValue>>,
    /// The error, for failed responses.
    #[serde(default)]
    pub error: Option<RpcError>,
}

/// A JSON-RPC error object as received.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The message.
    #[serde(default)]
    pub message: String,
    /// Optional structured data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Incoming {
    /// Whether this is the response (result or error) to a request.
    pub fn is_response(&self) -> bool {
        self.method.is_none() && (self.result.is_some() || self.error.is_some())
    }
}
