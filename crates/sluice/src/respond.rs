//! Stage 7, respond: what the client gets back, and the stamping every answer needs.
//!
//! Takes an upstream's final JSON-RPC message (or Sluice's own result or error); gives the
//! client's body with `resultType`, Sluice's `serverInfo` in `_meta`, cache hints where the spec
//! requires them, and error codes mapped to ones 2026-07-28 allows, plus the HTTP status the
//! code fixes. Refuses nothing: a message it cannot read (an array included) becomes `-32603`
//! naming the upstream.

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};

use crate::mcp::jsonrpc::{self, RawObject};
use crate::mcp::method::Method;

pub mod reply;
pub use reply::{Body, Reply, SseBody};

/// Methods whose complete results must carry `ttlMs` and `cacheScope`.
pub fn is_cacheable(method: &Method) -> bool {
    matches!(
        method,
        Method::ServerDiscover
            | Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead
    )
}

/// What a result's `resultType` says, decoded (an escaped spelling reads as what it spells).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `complete`, or absent (earlier servers).
    Complete,
    /// `input_required`: a round, which Sluice seals and judges.
    InputRequired,
    /// Anything else (an extension Sluice does not serve, a typo, not a string).
    Other,
}

/// Decodes `resultType` (the last of repeated keys, as the members are read).
pub fn result_kind(m: &RawObject<'_>) -> ResultKind {
    match m
        .get("resultType")
        .map(serde_json::from_str::<std::borrow::Cow<'_, str>>)
    {
        None => ResultKind::Complete,
        Some(Ok(t)) if t == "complete" => ResultKind::Complete,
        Some(Ok(t)) if t == "input_required" => ResultKind::InputRequired,
        Some(_) => ResultKind::Other,
    }
}

/// An upstream's final JSON-RPC message, read once.
pub enum Final<'a> {
    /// A result: its members (each key once, with its last value) and its decoded kind.
    Result(RawObject<'a>, ResultKind),
    /// A JSON-RPC error.
    Error(jsonrpc::RpcError),
    /// Not a JSON-RPC response.
    Bad,
}

/// Reads an upstream's final message.
pub fn read_final(msg: &str) -> Final<'_> {
    #[derive(serde::Deserialize)]
    struct Wire<'a> {
        #[serde(borrow, default)]
        result: Option<RawObject<'a>>,
        #[serde(default)]
        error: Option<jsonrpc::RpcError>,
    }
    // One JSON object: an array of a result's fields is no final message.
    match jsonrpc::decode_object_str::<Wire<'_>>(msg) {
        Ok(Wire {
            result: Some(r), ..
        }) => {
            // A repeated key is written once, with its last value, as the round sealing reads it.
            let r = r.dedup_last();
            let kind = result_kind(&r);
            Final::Result(r, kind)
        }
        Ok(Wire { error: Some(e), .. }) => Final::Error(e),
        _ => Final::Bad,
    }
}

/// Stamps a result object: `resultType` (absent means complete), Sluice's `serverInfo` (given
/// as JSON text) in `_meta`, and cache hints on complete results of cacheable methods.
#[cfg(test)]
fn stamp_result(raw: &str, method: &str, server_info: &str) -> Option<String> {
    let method = &Method::parse(method);
    let mut out = String::with_capacity(raw.len() + server_info.len() + 96);
    stamp_into(&mut out, &members(raw)?, method, server_info);
    Some(out)
}

fn members(raw: &str) -> Option<RawObject<'_>> {
    serde_json::from_str::<RawObject<'_>>(raw)
        .ok()
        .map(RawObject::dedup_last)
}

fn push_key(out: &mut String, key: &str, first: &mut bool) {
    if !std::mem::take(first) {
        out.push(',');
    }
    jsonrpc::push_json_str(out, key);
    out.push(':');
}

/// Writes the stamped result to `out`: members keep their order and bytes (compacted), only
/// `_meta` is rebuilt, and the members Sluice adds come last. Nothing is re-serialized.
fn stamp_into(out: &mut String, m: &RawObject<'_>, method: &Method, server_info: &str) {
    let find = |k: &str| m.get(k);
    let hints = result_kind(m) == ResultKind::Complete && is_cacheable(method);
    let ttl_ok = find("ttlMs").is_some_and(|r| r.parse::<u64>().is_ok());
    let scope_ok = find("cacheScope")
        .and_then(|r| serde_json::from_str::<std::borrow::Cow<'_, str>>(r).ok())
        .is_some_and(|s| s == "public" || s == "private");
    let mut first = true;
    out.push('{');
    let mut wrote_meta = false;
    for (k, v) in &m.0 {
        match k.as_ref() {
            "_meta" => {
                push_key(out, k, &mut first);
                write_meta(out, v.get(), server_info);
                wrote_meta = true;
            }
            "ttlMs" if hints && !ttl_ok => {}
            "cacheScope" if hints && !scope_ok => {}
            _ => {
                push_key(out, k, &mut first);
                out.push_str(&crate::mcp::compact_json(v.get()));
            }
        }
    }
    if find("resultType").is_none() {
        push_key(out, "resultType", &mut first);
        out.push_str("\"complete\"");
    }
    if !wrote_meta {
        push_key(out, "_meta", &mut first);
        write_meta(out, "{}", server_info);
    }
    if hints && !ttl_ok {
        push_key(out, "ttlMs", &mut first);
        out.push('0');
    }
    if hints && !scope_ok {
        push_key(out, "cacheScope", &mut first);
        out.push_str("\"private\"");
    }
    out.push('}');
}

/// `_meta` with Sluice's `serverInfo` (in place of the upstream's, or added last). A `_meta`
/// that is not an object is replaced.
fn write_meta(out: &mut String, raw: &str, server_info: &str) {
    let m = members(raw).unwrap_or_default();
    let mut first = true;
    out.push('{');
    let mut wrote = false;
    for (k, v) in &m.0 {
        push_key(out, k, &mut first);
        if k == crate::mcp::META_SERVER_INFO {
            out.push_str(server_info);
            wrote = true;
        } else {
            out.push_str(&crate::mcp::compact_json(v.get()));
        }
    }
    if !wrote {
        push_key(out, crate::mcp::META_SERVER_INFO, &mut first);
        out.push_str(server_info);
    }
    out.push('}');
}

/// Maps an upstream error to one 2026-07-28 allows, and the HTTP status its code fixes.
pub fn map_error(
    mut e: jsonrpc::RpcError,
    upstream_status: StatusCode,
    uri: Option<&str>,
) -> (StatusCode, jsonrpc::RpcError) {
    match e.code {
        -32002 => {
            // Resource not found was -32002 up to 2025-11-25; 2026-07-28 says -32602 with the uri.
            e.code = jsonrpc::INVALID_PARAMS;
            let mut data = e
                .data
                .take()
                .and_then(|d| d.as_object().cloned())
                .unwrap_or_default();
            if let (false, Some(u)) = (data.contains_key("uri"), uri) {
                data.insert("uri".into(), u.into());
            }
            e.data = Some(Value::Object(data));
        }
        jsonrpc::HEADER_MISMATCH | jsonrpc::MISSING_CAPABILITY | jsonrpc::UNSUPPORTED_VERSION => {}
        c if (-32099..=-32020).contains(&c) => {
            e.code = jsonrpc::INTERNAL_ERROR;
            e.data = None;
        }
        _ => {}
    }
    let status = match e.code {
        jsonrpc::HEADER_MISMATCH | jsonrpc::MISSING_CAPABILITY | jsonrpc::UNSUPPORTED_VERSION => {
            StatusCode::BAD_REQUEST
        }
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ if upstream_status.is_client_error() => upstream_status,
        _ => StatusCode::OK,
    };
    (status, e)
}

/// The client's body for an upstream's result (complete, or a round Sluice has sealed).
pub fn result_reply(
    id: &str,
    method: &Method,
    m: &RawObject<'_>,
    server_info: &str,
) -> (StatusCode, Bytes) {
    let mut out = String::with_capacity(
        256 + server_info.len()
            + id.len()
            + m.0
                .iter()
                .map(|(k, v)| k.len() + v.get().len() + 4)
                .sum::<usize>(),
    );
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(id);
    out.push_str(",\"result\":");
    stamp_into(&mut out, m, method, server_info);
    out.push('}');
    (StatusCode::OK, Bytes::from(out))
}

/// The client's body for an upstream's JSON-RPC error.
pub fn error_reply(
    id: &str,
    e: jsonrpc::RpcError,
    upstream_status: StatusCode,
    uri: Option<&str>,
) -> (StatusCode, Bytes) {
    let (status, e) = map_error(e, upstream_status, uri);
    let err = serde_json::to_value(&e)
        .unwrap_or_else(|_| json!({"code": jsonrpc::INTERNAL_ERROR, "message": "upstream error"}));
    (
        status,
        Bytes::from(format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{err}}}"
        )),
    )
}

/// Turns an upstream's final message into the client's body and status, where no round may
/// come (a legacy upstream's answer, a method that cannot return `input_required`): a result
/// that is not `complete` is the upstream's protocol error.
pub fn finish(
    id: &str,
    method: &Method,
    upstream: &str,
    upstream_status: StatusCode,
    msg: &str,
    uri: Option<&str>,
    server_info: &str,
) -> (StatusCode, Bytes) {
    match read_final(msg) {
        Final::Result(r, ResultKind::Complete) => result_reply(id, method, &r, server_info),
        Final::Result(_, _) => unexpected_result(id, upstream),
        Final::Error(e) => error_reply(id, e, upstream_status, uri),
        Final::Bad => bad_upstream(id, upstream),
    }
}

/// A result Sluice may not relay: `input_required` where no round may come, or a `resultType`
/// it does not serve. The value itself is the upstream's text and is not repeated.
pub fn unexpected_result(id: &str, upstream: &str) -> (StatusCode, Bytes) {
    let msg = format!(
        "upstream '{upstream}' answered with a resultType other than complete where only a complete result may come (or one Sluice does not serve); report it to that server's owners"
    );
    (
        StatusCode::BAD_GATEWAY,
        jsonrpc::error_body(id, jsonrpc::INTERNAL_ERROR, &msg, None),
    )
}

fn bad_upstream(id: &str, upstream: &str) -> (StatusCode, Bytes) {
    let msg = format!("upstream '{upstream}' sent an answer that is not a JSON-RPC response; report it to that server's owners");
    (
        StatusCode::BAD_GATEWAY,
        jsonrpc::error_body(id, jsonrpc::INTERNAL_ERROR, &msg, None),
    )
}

#[cfg(test)]
mod tests;
