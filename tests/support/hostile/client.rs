//! Raw clients for the hostile tests: a 2026-07-28 client whose bodies are raw text (so a test
//! can send `42.0`, `1e2`, or a body 65 levels deep) with the mirrored headers, and a
//! 2025-11-25 client (bridge B: `initialize`, a session id, plain JSON-RPC).

#![allow(dead_code)] // each test uses part of it

use std::time::Duration;

use serde_json::{json, Value};

/// An HTTP client whose requests fail after 30 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("reqwest client")
}

/// An HTTP client whose requests fail after `limit`.
pub(crate) fn http_with(limit: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(limit).build().expect("reqwest client")
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
    let extra = if extra.is_empty() { String::new() } else { format!(",{extra}") };
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

/// An answer from Sluice.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status.
    pub(crate) status: u16,
    /// Response headers.
    pub(crate) headers: reqwest::header::HeaderMap,
    /// The JSON-RPC message (the last `data:` line of an SSE answer); Null when not JSON.
    pub(crate) msg: Value,
    /// The raw body.
    pub(crate) text: String,
}

impl Answer {
    /// The JSON-RPC error code, if any.
    pub(crate) fn code(&self) -> Option<i64> {
        self.msg["error"]["code"].as_i64()
    }

    /// Asserts an HTTP status and JSON-RPC error code; gives `error.data`.
    pub(crate) fn refused(&self, status: u16, code: i64, what: &str) -> Value {
        assert_eq!((self.status, self.code()), (status, Some(code)), "{what}: expected HTTP {status} with {code}, got {}", cut(&self.text));
        self.msg["error"]["data"].clone()
    }

    /// The error message.
    pub(crate) fn message(&self) -> &str {
        self.msg["error"]["message"].as_str().unwrap_or("")
    }

    /// The result's `requestState` (Sluice's), failing the test without one.
    pub(crate) fn state(&self) -> String {
        self.msg["result"]["requestState"].as_str().unwrap_or_else(|| panic!("no requestState in {}", cut(&self.text))).to_owned()
    }

    /// The result's `inputRequests`.
    pub(crate) fn input_requests(&self) -> serde_json::Map<String, Value> {
        self.msg["result"]["inputRequests"].as_object().cloned().unwrap_or_default()
    }

    /// Whether the answer is an `input_required` result.
    pub(crate) fn is_input_required(&self) -> bool {
        self.msg["result"]["resultType"] == "input_required"
    }
}

/// The first 2000 characters of `s`, for messages.
pub(crate) fn cut(s: &str) -> String {
    if s.len() <= 2000 {
        return s.to_owned();
    }
    let mut end = 2000;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
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
        r = r.header("mcp-name", sluice::mcp::headers::encode(n));
    }
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    for (k, v) in extra {
        r = r.header(*k, *v);
    }
    read(r.body(body).send().await.expect("POST to sluice")).await
}

/// Reads an answer that may be a stream that stays open (a listen): a JSON body whole, an SSE
/// body up to its first JSON-RPC message (10 s at most).
pub(crate) async fn first(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let sse = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
    if !sse {
        return read(resp).await;
    }
    let msg = Events::of(resp).next(Duration::from_secs(10)).await.unwrap_or(Value::Null);
    Answer { status, headers, text: format!("(an SSE stream, first message) {msg}"), msg }
}

/// Reads an answer.
pub(crate) async fn read(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("read sluice's answer");
    let json_text = text.lines().rev().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(&text);
    let msg = serde_json::from_str(json_text).unwrap_or(Value::Null);
    Answer { status, headers, msg, text }
}

/// A `tools/call` of `name` with raw `args` and `extra` params, declaring `caps`.
pub(crate) async fn call(http: &reqwest::Client, url: &str, id: u64, name: &str, args: &str, extra: &str, key: Option<&str>) -> Answer {
    post(http, url, "tools/call", Some(name), tool_body(id, name, args, extra, &all_caps()), key, &[]).await
}

/// The params members of a retry: `inputResponses` and the echoed `requestState`.
pub(crate) fn retry(responses: &Value, state: &str) -> String {
    format!(r#""inputResponses":{responses},"requestState":{}"#, json!(state))
}

/// A sampling answer (`CreateMessageResult`).
pub(crate) fn sample(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "hostile-model", "stopReason": "endTurn"})
}

/// The answer that grants Sluice's approval round.
pub(crate) fn approve() -> Value {
    json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}})
}

/// A raw 2025-11-25 client (bridge B).
#[derive(Clone)]
pub(crate) struct Legacy {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    /// Its session id once `initialize` succeeded.
    pub(crate) session: Option<String>,
}

impl Legacy {
    /// A client of `url` authenticating with `key`.
    pub(crate) fn new(http: &reqwest::Client, url: &str, key: Option<&str>) -> Legacy {
        Legacy { http: http.clone(), url: url.to_owned(), key: key.map(str::to_owned), session: None }
    }

    fn request(&self, verb: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.http.request(verb, &self.url);
        if let Some(k) = &self.key {
            r = r.bearer_auth(k);
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25");
        }
        r
    }

    /// POSTs one message; gives the answer.
    pub(crate) async fn post(&self, msg: &Value) -> Answer {
        let r = self
            .request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(msg.to_string());
        read(r.send().await.expect("POST to sluice")).await
    }

    /// `initialize` declaring `caps` then `notifications/initialized`; keeps the session id.
    pub(crate) async fn initialize(&mut self, caps: Value) {
        self.session = None;
        let a = self
            .post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "hostile-legacy-client", "version": "1"}}}))
            .await;
        assert_eq!(a.status, 200, "initialize: {}", cut(&a.text));
        let sid = a.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("initialize without Mcp-Session-Id");
        self.session = Some(sid.to_owned());
        let n = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        assert_eq!(n.status, 202, "notifications/initialized: {}", n.text);
    }

    /// A request; gives the answer.
    pub(crate) async fn call(&self, id: u64, method: &str, params: Value) -> Answer {
        self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await
    }

    /// POSTs a request whose answer is an SSE stream; gives the open response.
    pub(crate) async fn stream(&self, id: u64, method: &str, params: Value) -> reqwest::Response {
        self.request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
            .send()
            .await
            .expect("POST to sluice")
    }
}

/// Reads an SSE response message by message.
pub(crate) struct Events {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl Events {
    /// Reads `resp`'s body as SSE.
    pub(crate) fn of(resp: reqwest::Response) -> Events {
        Events { body: Box::pin(resp.bytes_stream()), buf: String::new() }
    }

    /// The next JSON-RPC message (comments and non-JSON data skipped); None when the stream
    /// ended. Fails the test after `wait` without one.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Value> {
        use futures_util::StreamExt;
        tokio::time::timeout(wait, async {
            loop {
                while let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.trim_start()).collect();
                    if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
                        return Some(v);
                    }
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => return None,
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no SSE message within {wait:?}"))
    }
}
