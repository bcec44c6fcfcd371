//! A raw 2026-07-28 client whose bodies are raw text (so a test can send `42.0`, `1e2`, or a
//! body 65 levels deep) with the mirrored headers; answers read as support/rpc.rs reads them.

use std::time::Duration;

use serde_json::{json, Value};

pub(crate) use super::rpc::{cut, first, read, Answer, Events};

/// An HTTP client whose requests fail after 30 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("reqwest client")
}

/// An HTTP client whose requests fail after `limit`.
pub(crate) fn http_with(limit: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(limit)
        .build()
        .expect("reqwest client")
}

/// The `_meta` envelope declaring `caps`, as JSON text.
pub(crate) fn meta(caps: &Value) -> String {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}).to_string()
}

/// Capabilities that let every ask through: sampling (with tools), form elicitation, roots.
pub(crate) fn all_caps() -> Value {
    json!({"sampling": {"tools": {}}, "elicitation": {"form": {}}, "roots": {}})
}

/// A raw `tools/call` body: `args` and `extra` (more params members, e.g.
/// `"inputResponses":{…},"requestState":"…"`, or "") are written as given.
pub(crate) fn tool_body(id: u64, name: &str, args: &str, extra: &str, caps: &Value) -> String {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(",{extra}")
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{args}{extra},"_meta":{}}}}}"#,
        json!(name),
        meta(caps)
    )
}

/// A request body for `method` with `params` (the envelope added).
pub(crate) fn body(id: u64, method: &str, params: Value, caps: &Value) -> String {
    let mut params = if params.is_null() { json!({}) } else { params };
    params["_meta"] = serde_json::from_str(&meta(caps)).unwrap();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// POSTs a raw 2026-07-28 `body` for `method` with the mirrored headers (`Mcp-Name` when `name`
/// is given, Base64-sentinel encoded when it must be), bearer `key`, and `extra` headers.
pub(crate) async fn post(
    http: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: String,
    key: Option<&str>,
    extra: &[(&str, &str)],
) -> Answer {
    let mut r = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(n) = name {
        r = r.header("mcp-name", sluice::mcp::headers::encode(n).into_owned());
    }
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    for (k, v) in extra {
        r = r.header(*k, *v);
    }
    read(r.body(body).send().await.expect("POST to sluice")).await
}

/// A `tools/call` of `name` with raw `args` and `extra` params, declaring `caps`.
pub(crate) async fn call(
    http: &reqwest::Client,
    url: &str,
    id: u64,
    name: &str,
    args: &str,
    extra: &str,
    key: Option<&str>,
) -> Answer {
    post(
        http,
        url,
        "tools/call",
        Some(name),
        tool_body(id, name, args, extra, &all_caps()),
        key,
        &[],
    )
    .await
}

/// The params members of a retry: `inputResponses` and the echoed `requestState`.
pub(crate) fn retry(responses: &Value, state: &str) -> String {
    format!(
        r#""inputResponses":{responses},"requestState":{}"#,
        json!(state)
    )
}

/// A sampling answer (`CreateMessageResult`).
pub(crate) fn sample(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "hostile-model", "stopReason": "endTurn"})
}

/// The answer that grants Sluice's approval round.
pub(crate) fn approve() -> Value {
    json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}})
}
