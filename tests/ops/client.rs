//! A raw 2026-07-28 client for the audit, hardening and canary tests: request bodies with the
//! `_meta` envelope, the mirrored headers, and the JSON-RPC message of an answer (JSON or the
//! last `data:` line of an SSE stream).

#![allow(dead_code)] // each test binary uses part of it

use std::time::Duration;

use serde_json::{json, Value};

/// An HTTP client whose requests fail the test after 20 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().expect("reqwest client")
}

/// A request body for `method` with `params` (the `_meta` envelope added, declaring `caps`).
pub(crate) fn body(id: u64, method: &str, params: Value, caps: Value) -> Value {
    let mut params = if params.is_null() { json!({}) } else { params };
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A POST of `body` with the headers mirroring it (`Mcp-Name` for named methods); `extra`
/// headers replace those of the same name; `key` is sent as a bearer token.
pub(crate) fn request(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    key: Option<&str>,
    extra: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let method = body["method"].as_str().unwrap_or("");
    let mut h = HeaderMap::new();
    let mut set = |k: &str, v: &str| {
        h.insert(HeaderName::from_bytes(k.as_bytes()).expect("header name"), HeaderValue::from_str(v).expect("header value"));
    };
    set("content-type", "application/json");
    set("accept", "application/json, text/event-stream");
    set("mcp-protocol-version", "2026-07-28");
    set("mcp-method", method);
    let name = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "resources/read" => body["params"]["uri"].as_str(),
        _ => None,
    };
    if let Some(n) = name {
        set("mcp-name", &sluice::mcp::headers::encode(n));
    }
    if let Some(k) = key {
        set("authorization", &format!("Bearer {k}"));
    }
    for (k, v) in extra {
        set(k, v);
    }
    http.post(url).headers(h).body(body.to_string())
}

/// An answer: HTTP status, headers, and the JSON-RPC message (Null when the body is not JSON).
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) msg: Value,
    pub(crate) text: String,
}

/// Sends a request and reads its answer.
pub(crate) async fn send(req: reqwest::RequestBuilder) -> Answer {
    let resp = req.send().await.expect("send a request to sluice");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("read sluice's answer");
    let json_text = text.lines().rev().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(&text);
    let msg = serde_json::from_str(json_text).unwrap_or(Value::Null);
    Answer { status, headers, msg, text }
}

/// POSTs `body` (mirrored headers, bearer `key`) and reads the answer.
pub(crate) async fn call(http: &reqwest::Client, url: &str, body: &Value, key: Option<&str>) -> Answer {
    send(request(http, url, body, key, &[])).await
}
