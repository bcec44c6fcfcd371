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

pub use super::message::{
    decode_object, decode_object_str, error_body, notification_body, push_json_str, result_body,
    Incoming, RpcError,
};
use super::raw::Params;
pub use super::raw::RawObject;

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
        let text =
            std::str::from_utf8(&body).map_err(|_| FrameError::NotJson("not UTF-8".into()))?;
        let first = text.trim_start().as_bytes().first().copied();
        if first == Some(b'[') {
            // Still make sure it is JSON, so that a broken array is a parse error.
            serde_json::from_str::<&RawValue>(text)
                .map_err(|e| FrameError::NotJson(e.to_string()))?;
            return Err(FrameError::NotRequest(
                "batches are not supported: send one request per POST",
            ));
        }
        let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => {
                FrameError::NotRequest("not a JSON-RPC 2.0 request object")
            }
            _ => FrameError::NotJson(e.to_string()),
        })?;
        let version = wire
            .jsonrpc
            .map(|v| serde_json::from_str::<std::borrow::Cow<'_, str>>(v.get()));
        if !matches!(version, Some(Ok(v)) if v == "2.0") {
            return Err(FrameError::NotRequest("\"jsonrpc\" must be \"2.0\""));
        }
        let Some(method) = wire.method else {
            return Err(if wire.result.is_some() || wire.error.is_some() {
                FrameError::NotRequest(
                    "JSON-RPC responses cannot be POSTed to a 2026-07-28 endpoint",
                )
            } else {
                FrameError::NotRequest("a request needs a string \"method\"")
            });
        };
        let id = match wire.id {
            None => None,
            Some(raw) if matches!(raw.get().as_bytes()[0], b'"' | b'-' | b'0'..=b'9') => {
                Some(raw.to_owned())
            }
            Some(_) => {
                return Err(FrameError::NotRequest(
                    "\"id\" must be a string or a number",
                ))
            }
        };
        let (params, members) = match wire.params {
            None => (false, Vec::new()),
            Some(Params::Other) => {
                return Err(FrameError::NotRequest("\"params\" must be an object"))
            }
            Some(Params::Object(obj)) => {
                if obj.has_repeats() {
                    return Err(FrameError::NotRequest(
                        "a \"params\" member is repeated: send each member once",
                    ));
                }
                let members = obj
                    .0
                    .into_iter()
                    .map(|(k, v)| (k.into_owned(), range_of(text, v.get())))
                    .collect();
                (true, members)
            }
        };
        let method = super::method::Method::parse(&method);
        Ok(Envelope {
            body,
            id,
            method,
            params,
            members,
        })
    }

    /// The body exactly as received.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The same envelope over a copy of its body in an allocation of its own, for one kept
    /// past its request (a parked exchange's): the received body is a slice of the connection's
    /// read buffer, and holding it would hold that whole buffer.
    pub fn detached(&self) -> Envelope {
        Envelope {
            body: Bytes::copy_from_slice(&self.body),
            ..self.clone()
        }
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
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, r)| self.slice(r))
    }

    /// `params[key]` when it is a JSON string.
    pub fn param_str(&self, key: &str) -> Option<Result<String, ()>> {
        self.param(key)
            .map(|raw| serde_json::from_str::<String>(raw).map_err(|_| ()))
    }

    /// [`Envelope::param_str`] without a copy when the string has no escapes.
    pub fn param_text(&self, key: &str) -> Option<Result<std::borrow::Cow<'_, str>, ()>> {
        let raw = self.param(key)?;
        match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            // Validated JSON: a string without a backslash holds no escapes and no raw quote.
            Some(inner) if !inner.contains('\\') => Some(Ok(std::borrow::Cow::Borrowed(inner))),
            _ => Some(
                serde_json::from_str::<String>(raw)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|_| ()),
            ),
        }
    }

    /// The top-level `params` members in body order, as raw JSON text.
    pub fn members(&self) -> impl Iterator<Item = (&str, &str)> {
        self.members
            .iter()
            .map(|(k, r)| (k.as_str(), self.slice(r)))
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
    pub fn rewrite(
        &self,
        id: Option<&str>,
        mut edit: impl FnMut(&str, &str) -> Option<Option<String>>,
    ) -> Bytes {
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

#[cfg(test)]
mod tests;
