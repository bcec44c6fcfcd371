//! A raw 2026-07-28 client with JSON bodies: request bodies with the `_meta` envelope, the
//! mirrored headers, and the [`Answer`]: the JSON-RPC message of a JSON body or of the last
//! `data:` line of an SSE stream. (support/text.rs writes the bodies as raw text instead.)

use std::time::Duration;

use serde_json::{json, Value};

/// An HTTP client whose requests fail the test after 20 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("reqwest client")
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
        h.insert(
            HeaderName::from_bytes(k.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
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

/// Sends a request and reads its answer.
pub(crate) async fn send(req: reqwest::RequestBuilder) -> Answer {
    read(req.send().await.expect("send a request to sluice")).await
}

/// POSTs `body` (mirrored headers, bearer `key`) and reads the answer.
pub(crate) async fn call(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    key: Option<&str>,
) -> Answer {
    send(request(http, url, body, key, &[])).await
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
        assert_eq!(
            (self.status, self.code()),
            (status, Some(code)),
            "{what}: expected HTTP {status} with {code}, got {}",
            cut(&self.text)
        );
        self.msg["error"]["data"].clone()
    }

    /// The error message.
    pub(crate) fn message(&self) -> &str {
        self.msg["error"]["message"].as_str().unwrap_or("")
    }

    /// The result's `requestState` (Sluice's), failing the test without one.
    pub(crate) fn state(&self) -> String {
        self.msg["result"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("no requestState in {}", cut(&self.text)))
            .to_owned()
    }

    /// The result's `inputRequests`.
    pub(crate) fn input_requests(&self) -> serde_json::Map<String, Value> {
        self.msg["result"]["inputRequests"]
            .as_object()
            .cloned()
            .unwrap_or_default()
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

/// Reads an answer that may be a stream that stays open (a listen): a JSON body whole, an SSE
/// body up to its first JSON-RPC message (10 s at most).
pub(crate) async fn first(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let sse = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !sse {
        return read(resp).await;
    }
    let msg = Events::of(resp)
        .next(Duration::from_secs(10))
        .await
        .unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        text: format!("(an SSE stream, first message) {msg}"),
        msg,
    }
}

/// Reads an answer.
pub(crate) async fn read(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("read sluice's answer");
    let json_text = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .unwrap_or(&text);
    let msg = serde_json::from_str(json_text).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        msg,
        text,
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
        Events {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next JSON-RPC message (comments and non-JSON data skipped); None when the stream
    /// ended. Fails the test after `wait` without one.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Value> {
        use futures_util::StreamExt;
        tokio::time::timeout(wait, async {
            loop {
                while let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    let data: Vec<&str> = block
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(|d| d.trim_start())
                        .collect();
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
