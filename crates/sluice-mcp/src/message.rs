//! JSON-RPC messages Sluice writes (results, errors, notifications) and the ones it reads from
//! upstreams and peers.
//!
//! Takes ids, codes and JSON text; gives message bodies, and [`Incoming`] messages decoded (the
//! method as a [`super::method::Method`]). Refuses a message that is not one JSON object (an
//! array, even one serde would read as a struct's fields: [`decode_object`]); anything else
//! that does not parse is the caller's to judge.

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
    Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{err}}}"
    ))
}

/// A JSON-RPC result body around already-serialized result JSON.
pub fn result_body(id: &str, result: &str) -> Bytes {
    Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
    ))
}

/// A JSON-RPC notification body.
pub fn notification_body(method: &super::method::Method, params: &Value) -> Bytes {
    let m = Value::String(method.as_str().to_owned());
    Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":{m},\"params\":{params}}}"
    ))
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

/// Decodes one JSON-RPC message as `T`, from a JSON object only. serde's derived structs also
/// take their fields as a positional array (`["2.0", "sluice-r1-4", null, {}, null]` is a
/// response to them), and an array on the wire is a batch, not one message: refused whole, so
/// no decision taken on it as one message can differ from what a batch reader would make of it.
pub fn decode_object<'a, T: Deserialize<'a>>(text: &'a [u8]) -> Result<T, serde_json::Error> {
    if is_object(text) {
        serde_json::from_slice(text)
    } else {
        Err(not_object())
    }
}

/// [`decode_object`] of text already known to be UTF-8: its strings and raw values are not
/// checked again.
pub fn decode_object_str<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, serde_json::Error> {
    if is_object(text.as_bytes()) {
        serde_json::from_str(text)
    } else {
        Err(not_object())
    }
}

fn is_object(text: &[u8]) -> bool {
    matches!(
        text.iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')),
        Some(b'{')
    )
}

fn not_object() -> serde_json::Error {
    serde::de::Error::custom("a JSON-RPC message must be one JSON object")
}

impl Incoming {
    /// Decodes one message (a JSON object: see [`decode_object`]).
    pub fn parse(text: &[u8]) -> Result<Incoming, serde_json::Error> {
        decode_object(text)
    }

    /// [`Incoming::parse`] of text already known to be UTF-8.
    pub fn parse_str(text: &str) -> Result<Incoming, serde_json::Error> {
        decode_object_str(text)
    }

    /// Whether this is the response (result or error) to a request.
    pub fn is_response(&self) -> bool {
        self.method.is_none() && (self.result.is_some() || self.error.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_json_object_never_an_array_of_its_fields() {
        let m = Incoming::parse(br#" {"jsonrpc":"2.0","id":"sluice-r1-4","result":{}}"#)
            .expect("an object");
        assert!(m.is_response());
        // serde_json alone reads these as an Incoming (its fields, in order): refused.
        for body in [
            r#"["sluice-r1-4",null,null,{},null]"#,
            r#" [null,"ping",{},null,null]"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        ] {
            assert!(Incoming::parse_str(body).is_err(), "{body}");
            assert!(Incoming::parse_str(body).is_err(), "{body}");
        }
        assert!(
            serde_json::from_str::<Incoming>(r#"["sluice-r1-4",null,null,{},null]"#).is_ok(),
            "what the check is for"
        );
    }
}
