//! JSON-RPC 2.0 framing: the one parse of a request body, and the bodies Sluice writes.
//!
//! Takes the request body bytes; gives an [`Envelope`] that keeps the bytes and remembers where
//! each top-level `params` member lies in them, so later stages read what they need without a
//! second full parse and forward unchanged members byte for byte. Refuses text that is not JSON
//! (`-32700`) and JSON that is not a single request or notification (`-32600`).

use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Standard JSON-RPC code: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Standard JSON-RPC code: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// Standard JSON-RPC code: method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Standard JSON-RPC code: invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// Standard JSON-RPC code: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: an HTTP header is missing, malformed or disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request needs a client capability it did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the requested protocol version is not supported.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// Why a body is not a request Sluice can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all (`-32700`).
    #[error("body is not valid JSON: {0}")]
    NotJson(String),
    /// JSON, but not one JSON-RPC 2.0 request or notification (`-32600`).
    #[error("{0}")]
    NotRequest(&'static str),
    /// Arrays and objects nested deeper than the limit (`-32600`), refused before any reading.
    #[error("the body nests arrays and objects deeper than {0} levels (limits.max_json_depth); flatten it")]
    TooDeep(usize),
}

/// The nesting bound [`Envelope::parse`] applies (the pipeline passes `limits.max_json_depth`).
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// Whether `text` nests arrays and objects deeper than `max` (strings are skipped, so brackets
/// inside them do not count). One pass; invalid JSON is left for the parser to refuse.
pub fn nests_deeper_than(text: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                // Skip to the closing quote, honouring backslash escapes.
                let mut j = i + 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &text[j.min(text.len())..]) {
                        None => return false,
                        Some(k) if text[j + k] == b'\\' => j += k + 2,
                        Some(k) => {
                            i = j + k + 1;
                            break;
                        }
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

// === impl Envelope ===

/// One parsed JSON-RPC request or notification, holding its body.
#[derive(Debug, Clone)]
pub struct Envelope {
    body: Bytes,
    /// The request id as written (a string or a number); `None` for a notification.
    pub id: Option<Box<RawValue>>,
    /// The JSON-RPC method, decoded.
    pub method: super::method::Method,
    /// Whether the body had a `params` object.
    params: bool,
    /// Top-level `params` members and the byte ranges of their values, in body order.
    members: Vec<(String, Range<usize>)>,
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// A JSON object's members as written, in order: each key (borrowed unless it has escapes)
/// and its raw value. Read in one pass with no hashing; repeated keys are all kept.
#[derive(Debug, Default)]
pub struct RawObject<'a>(pub Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    /// The raw value of the last member named `key` (the one JSON parsers that keep the last
    /// of repeated keys would read).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.get())
    }

    /// Whether a key appears more than once (linear: pairwise for a few members, hashed above).
    pub fn has_repeats(&self) -> bool {
        if self.0.len() <= 16 {
            return self.0.iter().enumerate().any(|(i, (k, _))| self.0[..i].iter().any(|(seen, _)| seen == k));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.0.len());
        !self.0.iter().all(|(k, _)| seen.insert(k.as_ref()))
    }

    /// Each key once, at its first position with its last value (what a map-based reader sees).
    pub fn dedup_last(mut self) -> Self {
        if !self.has_repeats() {
            return self;
        }
        let mut at: std::collections::HashMap<std::borrow::Cow<'a, str>, usize> = std::collections::HashMap::new();
        let mut out: Vec<(std::borrow::Cow<'a, str>, &'a RawValue)> = Vec::with_capacity(self.0.len());
        for (k, v) in self.0.drain(..) {
            match at.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    at.insert(k.clone(), out.len());
                    out.push((k, v));
                }
            }
        }
        RawObject(out)
    }
}

struct Key<'a>(std::borrow::Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct ObjectVisitor;

impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
    type Value = RawObject<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<RawObject<'de>, A::Error> {
        let mut out = Vec::with_capacity(m.size_hint().unwrap_or(4).min(16));
        while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
            let v: &'de RawValue = m.next_value()?;
            out.push((k, v));
        }
        Ok(RawObject(out))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

/// A request's `params`: an object read member by member in the one pass over the body, or
/// any other JSON value, which the caller refuses.
enum Params<'a> {
    Object(RawObject<'a>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Params<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Params<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Params<'de>, A::Error> {
                ObjectVisitor.visit_map(m).map(Params::Object)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Params<'de>, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Params::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
            fn visit_unit<E>(self) -> Result<Params<'de>, E> {
                Ok(Params::Other)
            }
        }
        d.deserialize_any(V)
    }
}

fn range_of(body: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - body.as_ptr() as usize;
    start..start + part.len()
}

impl Envelope {
    /// Parses a body: one JSON object with `"jsonrpc": "2.0"`, a string `method`, an optional
    /// string or number `id`, and an optional object `params`, nested at most
    /// [`DEFAULT_MAX_DEPTH`] deep.
    pub fn parse(body: Bytes) -> Result<Self, FrameError> {
        Envelope::parse_limited(body, DEFAULT_MAX_DEPTH)
    }

    /// [`Envelope::parse`] with another nesting bound.
    pub fn parse_limited(body: Bytes, max_depth: usize) -> Result<Self, FrameError> {
        if nests_deeper_than(&body, max_depth) {
            return Err(FrameError::TooDeep(max_depth));
        }
        Envelope::parse_prechecked(body)
    }

    /// [`Envelope::parse`] of a body whose nesting the caller has already bounded with
    /// [`nests_deeper_than`] (the pipeline checks it once, for both eras).
    pub fn parse_prechecked(body: Bytes) -> Result<Self, FrameError> {
        let text = std::str::from_utf8(&body).map_err(|_| FrameError::NotJson("not UTF-8".into()))?;
        let first = text.trim_start().as_bytes().first().copied();
        if first == Some(b'[') {
            // Still make sure it is JSON, so that a broken array is a parse error.
            serde_json::from_str::<&RawValue>(text).map_err(|e| FrameError::NotJson(e.to_string()))?;
            return Err(FrameError::NotRequest("batches are not supported: send one request per POST"));
        }
        let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => FrameError::NotRequest("not a JSON-RPC 2.0 request object"),
            _ => FrameError::NotJson(e.to_string()),
        })?;
        let version = wire.jsonrpc.map(|v| serde_json::from_str::<std::borrow::Cow<'_, str>>(v.get()));
        if !matches!(version, Some(Ok(v)) if v == "2.0") {
            return Err(FrameError::NotRequest("\"jsonrpc\" must be \"2.0\""));
        }
        let Some(method) = wire.method else {
            return Err(if wire.result.is_some() || wire.error.is_some() {
                FrameError::NotRequest("JSON-RPC responses cannot be POSTed to a 2026-07-28 endpoint")
            } else {
                FrameError::NotRequest("a request needs a string \"method\"")
            });
        };
        let id = match wire.id {
            None => None,
            Some(raw) if matches!(raw.get().as_bytes()[0], b'"' | b'-' | b'0'..=b'9') => Some(raw.to_owned()),
            Some(_) => return Err(FrameError::NotRequest("\"id\" must be a string or a number")),
        };
        let (params, members) = match wire.params {
            None => (false, Vec::new()),
            Some(Params::Other) => return Err(FrameError::NotRequest("\"params\" must be an object")),
            Some(Params::Object(obj)) => {
                if obj.has_repeats() {
                    return Err(FrameError::NotRequest("a \"params\" member is repeated: send each member once"));
                }
                let members = obj.0.into_iter().map(|(k, v)| (k.into_owned(), range_of(text, v.get()))).collect();
                (true, members)
            }
        };
        let method = super::method::Method::parse(&method);
        Ok(Envelope { body, id, method, params, members })
    }

    /// The body exactly as received.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Whether this is a notification (no `id`).
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// Whether the body carried a `params` object.
    pub fn has_params(&self) -> bool {
        self.params
    }

    /// The raw JSON text of the top-level `params` member `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, r)| self.slice(r))
    }

    /// `params[key]` when it is a JSON string.
    pub fn param_str(&self, key: &str) -> Option<Result<String, ()>> {
        self.param(key).map(|raw| serde_json::from_str::<String>(raw).map_err(|_| ()))
    }

    /// [`Envelope::param_str`] without a copy when the string has no escapes.
    pub fn param_text(&self, key: &str) -> Option<Result<std::borrow::Cow<'_, str>, ()>> {
        let raw = self.param(key)?;
        match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            // Validated JSON: a string without a backslash holds no escapes and no raw quote.
            Some(inner) if !inner.contains('\\') => Some(Ok(std::borrow::Cow::Borrowed(inner))),
            _ => Some(serde_json::from_str::<String>(raw).map(std::borrow::Cow::Owned).map_err(|_| ())),
        }
    }

    /// The top-level `params` members in body order, as raw JSON text.
    pub fn members(&self) -> impl Iterator<Item = (&str, &str)> {
        self.members.iter().map(|(k, r)| (k.as_str(), self.slice(r)))
    }

    /// The request id as JSON text (`null` when it is a notification).
    pub fn id_json(&self) -> &str {
        self.id.as_deref().map(RawValue::get).unwrap_or("null")
    }

    fn slice(&self, r: &Range<usize>) -> &str {
        // The ranges were taken from this same UTF-8 text at parse time.
        std::str::from_utf8(&self.body[r.clone()]).unwrap_or("null")
    }

    /// Serializes the request again with `params` members replaced or removed by `edit`
    /// (return `Some(new_raw)` to replace, `None` to drop). Members `edit` leaves alone keep
    /// their bytes.
    pub fn rewrite_params(&self, edit: impl FnMut(&str, &str) -> Option<Option<String>>) -> Bytes {
        self.rewrite(self.id.as_deref().map(RawValue::get), edit)
    }

    /// [`Envelope::rewrite_params`] with another request id (`None`: a notification).
    pub fn rewrite(&self, id: Option<&str>, mut edit: impl FnMut(&str, &str) -> Option<Option<String>>) -> Bytes {
        let mut out = String::with_capacity(self.body.len() + 64);
        out.push_str("{\"jsonrpc\":\"2.0\"");
        if let Some(id) = id {
            out.push_str(",\"id\":");
            out.push_str(id);
        }
        out.push_str(",\"method\":");
        push_json_str(&mut out, self.method.as_str());
        if self.params {
            out.push_str(",\"params\":{");
            let mut first = true;
            for (key, raw) in self.members() {
                let edited = edit(key, raw);
                if matches!(edited, Some(None)) {
                    continue;
                }
                if !std::mem::take(&mut first) {
                    out.push(',');
                }
                push_json_str(&mut out, key);
                out.push(':');
                match &edited {
                    Some(Some(new)) => out.push_str(new),
                    _ => out.push_str(raw),
                }
            }
            out.push('}');
        }
        out.push('}');
        Bytes::from(out)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Envelope, FrameError> {
        Envelope::parse(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn a_request_keeps_member_bytes() {
        let e = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a\"b","arguments":{"x": 1.50}}}"#).unwrap();
        assert_eq!(e.id_json(), "7");
        assert_eq!(e.param("arguments"), Some(r#"{"x": 1.50}"#));
        assert_eq!(e.param_str("name"), Some(Ok("a\"b".to_owned())));
        let out = e.rewrite_params(|k, _| (k == "name").then(|| Some("\"z\"".to_owned())));
        assert_eq!(&out[..], br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"z","arguments":{"x": 1.50}}}"#);
    }

    #[test]
    fn framing_errors_are_classified() {
        assert!(matches!(parse("{nope"), Err(FrameError::NotJson(_))));
        assert!(parse(r#"{"jsonrpc":"2\u002e0","id":1,"method":"x"}"#).is_ok(), "the version is read decoded");
        assert!(matches!(parse("[{}]"), Err(FrameError::NotRequest(_))));
        assert!(matches!(parse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Err(FrameError::NotRequest(_))));
        assert!(matches!(parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#), Err(FrameError::NotRequest(_))));
        assert!(matches!(parse(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#), Err(FrameError::NotRequest(_))));
        assert!(parse(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#).unwrap().is_notification());
        assert!(
            matches!(parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#), Err(FrameError::NotRequest(m)) if m.contains("object"))
        );
        let twice = parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#);
        assert!(matches!(twice, Err(FrameError::NotRequest(m)) if m.contains("repeated")));
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let late = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{{},"k3":0}}}}"#, many.join(","));
        assert!(matches!(parse(&late), Err(FrameError::NotRequest(m)) if m.contains("repeated")));
        assert!(parse(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{{}}}}}"#, many.join(","))).is_ok());
        let escaped = parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"n\u0061me":"a","b":{"c" : [1, 2]}}}"#).unwrap();
        assert_eq!(escaped.param("name"), Some("\"a\""));
        assert_eq!(escaped.param("b"), Some(r#"{"c" : [1, 2]}"#));
    }

    #[test]
    fn bodies_nested_past_the_limit_are_refused_before_reading() {
        let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let body = |n: usize| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{{"pad":{}}}}}}}"#, nest(n));
        // The envelope, params and arguments objects are three levels; `pad` adds n.
        assert!(parse(&body(DEFAULT_MAX_DEPTH - 3)).is_ok());
        assert!(matches!(parse(&body(DEFAULT_MAX_DEPTH - 2)), Err(FrameError::TooDeep(64))));
        assert!(matches!(parse(&format!("{{\"x\":{}}}", nest(200))), Err(FrameError::TooDeep(_))), "even before the request is read");
        let quoted = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"s":"{}\\\"{}"}}}}"#, "[".repeat(100), "{".repeat(100));
        assert!(parse(&quoted).is_ok(), "brackets inside strings do not count");
        assert!(!nests_deeper_than(b"\"unterminated [[[", 1));
    }
}
