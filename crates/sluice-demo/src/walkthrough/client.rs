//! The walkthrough's client: modern (2026-07-28) requests built from a [`Method`], sent to
//! Sluice, and the answers read back.
//!
//! Takes the gateway URL, a method, its params (and for `tools/call` the declared capabilities
//! and extra params members); gives an [`Answer`]: the status, the body's length and the last
//! JSON message in it (`Null` when there is none). Refuses nothing: a request that cannot be sent
//! or answered is an answer with status 0.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use sluice_mcp::method::Method;

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// The protocol version the walkthrough speaks.
pub(super) const VERSION: &str = "2026-07-28";

/// A raw answer: status, the body's length and the last JSON message in it.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) len: usize,
    pub(super) body: Value,
}

impl Answer {
    /// Its JSON-RPC error code, if it is an error.
    pub(super) fn error_code(&self) -> Option<i64> {
        self.body.pointer("/error/code").and_then(Value::as_i64)
    }

    /// The tool named `name` in a `tools/list` result.
    pub(super) fn tool(&self, name: &str) -> Option<&Value> {
        self.body
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .and_then(|t| t.iter().find(|t| t["name"] == name))
    }

    /// The tool names of a `tools/list` result, in order.
    pub(super) fn tool_names(&self) -> Vec<String> {
        self.body
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An `input_required` round: its input keys and its requestState.
    pub(super) fn round(&self) -> (Vec<String>, String) {
        let r = &self.body["result"];
        let keys = r["inputRequests"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        (keys, r["requestState"].as_str().unwrap_or("").to_owned())
    }
}

/// The `_meta` envelope declaring `caps`.
pub(super) fn meta_with(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": caps,
           "io.modelcontextprotocol/clientInfo": {"name": "sluice-walkthrough", "version": "1"}})
}

/// A request of `method` with `params` and the `_meta` envelope (declaring elicitation).
pub(super) fn request(id: u64, method: &Method, mut params: Value) -> Value {
    params["_meta"] = meta_with(json!({"elicitation": {}}));
    json!({"jsonrpc": "2.0", "id": id, "method": method.as_str(), "params": params})
}

/// The headers a modern client mirrors for `method`.
pub(super) fn headers(method: &Method) -> Vec<(&'static str, &str)> {
    vec![
        ("mcp-protocol-version", VERSION),
        ("mcp-method", method.as_str()),
    ]
}

/// What the client's model answers to a sampling request.
pub(super) fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "walkthrough-model"})
}

/// The walkthrough's connection to Sluice.
pub(super) struct Client {
    http: HttpClient,
    url: String,
}

impl Client {
    /// A client of the gateway at `url`.
    pub(super) fn new(url: &str) -> Client {
        Client {
            http: hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http(),
            url: url.to_owned(),
        }
    }

    /// POSTs `body` with `headers` (and the content type and accept headers).
    pub(super) async fn post(&self, headers: &[(&str, &str)], body: &Value) -> Answer {
        let mut b = http::Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let Ok(req) = b.body(Full::new(Bytes::from(body.to_string()))) else {
            return Answer {
                status: 0,
                len: 0,
                body: Value::Null,
            };
        };
        let Ok(resp) = self.http.request(req).await else {
            return Answer {
                status: 0,
                len: 0,
                body: Value::Null,
            };
        };
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map(str::to_owned)
            .unwrap_or_else(|| text.to_string());
        Answer {
            status,
            len: bytes.len(),
            body: serde_json::from_str(&last).unwrap_or(Value::Null),
        }
    }

    /// Sends a request of `method` with `params`, its `_meta` and its mirrored headers.
    pub(super) async fn send(&self, id: u64, method: &Method, params: Value) -> Answer {
        self.post(&headers(method), &request(id, method, params))
            .await
    }

    /// A `tools/call` of `tool` with `arguments`, declaring `caps`, with `extra` params members.
    pub(super) async fn call(
        &self,
        id: u64,
        tool: &str,
        arguments: Value,
        caps: Value,
        extra: Value,
    ) -> Answer {
        let method = Method::ToolsCall;
        let mut params = json!({"name": tool, "arguments": arguments, "_meta": meta_with(caps)});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let mut h = headers(&method);
        h.push(("mcp-name", tool));
        self.post(
            &h,
            &json!({"jsonrpc": "2.0", "id": id, "method": method.as_str(), "params": params}),
        )
        .await
    }
}
