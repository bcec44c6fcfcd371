//! One raw 2026-07-28 `tools/call` through Sluice and its retries (`inputResponses`,
//! `requestState`), for the multi-round tests (bridge A, governance).

use std::time::Duration;

use serde_json::{json, Value};

/// An HTTP client for raw calls; a request that hangs fails the test after 20 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("reqwest client")
}

/// Capabilities a raw call declares.
pub(crate) fn all_caps() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {}})
}

/// One raw 2026-07-28 `tools/call` through Sluice.
pub(crate) struct Call {
    /// The tool.
    pub(crate) name: String,
    /// Its arguments.
    pub(crate) arguments: Value,
    /// The client capabilities declared in `_meta`.
    pub(crate) caps: Value,
    /// The JSON-RPC id.
    pub(crate) id: Value,
    /// The API key sent as `Authorization: Bearer`, if any.
    pub(crate) token: Option<String>,
}

impl Call {
    /// A call of `name` with `arguments`, declaring sampling, form elicitation and roots.
    pub(crate) fn new(name: &str, arguments: Value) -> Call {
        Call {
            name: name.to_owned(),
            arguments,
            caps: all_caps(),
            id: json!(1),
            token: None,
        }
    }

    /// The same call with another JSON-RPC id.
    pub(crate) fn id(mut self, id: Value) -> Call {
        self.id = id;
        self
    }

    /// The same call authenticated with the API key `token`.
    pub(crate) fn token(mut self, token: &str) -> Call {
        self.token = Some(token.to_owned());
        self
    }

    /// The same call declaring `caps`.
    pub(crate) fn caps(mut self, caps: Value) -> Call {
        self.caps = caps;
        self
    }

    /// The request body: params plus `extra` members (inputResponses, requestState).
    pub(crate) fn body(&self, extra: Value) -> Value {
        let mut params = json!({
            "name": self.name,
            "arguments": self.arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": self.caps,
            },
        });
        if let Some(extra) = extra.as_object() {
            params
                .as_object_mut()
                .expect("params object")
                .extend(extra.clone());
        }
        json!({"jsonrpc": "2.0", "id": self.id, "method": "tools/call", "params": params})
    }

    /// The HTTP request for this call (not sent).
    pub(crate) fn request(
        &self,
        http: &reqwest::Client,
        url: &str,
        extra: Value,
    ) -> reqwest::RequestBuilder {
        self.request_with(http, url, self.body(extra))
    }

    /// Sends it with `progressToken` in its `_meta`; gives every JSON-RPC message of the
    /// answer in order (the `data:` lines of an SSE answer, or the one JSON body).
    pub(crate) async fn with_progress(
        &self,
        http: &reqwest::Client,
        url: &str,
        token: &str,
    ) -> Vec<Value> {
        self.with_progress_of(http, url, Some(token)).await
    }

    /// [`Call::with_progress`], with no `progressToken` when `token` is `None`.
    pub(crate) async fn with_progress_of(
        &self,
        http: &reqwest::Client,
        url: &str,
        token: Option<&str>,
    ) -> Vec<Value> {
        let mut body = self.body(json!({}));
        if let Some(token) = token {
            body["params"]["_meta"]["progressToken"] = json!(token);
        }
        let resp = self
            .request_with(http, url, body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST tools/call {}: {e}", self.name));
        let text = resp.text().await.expect("sluice body");
        let data: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect();
        if data.is_empty() {
            vec![serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))]
        } else {
            data
        }
    }

    fn request_with(
        &self,
        http: &reqwest::Client,
        url: &str,
        body: Value,
    ) -> reqwest::RequestBuilder {
        let req = match &self.token {
            Some(t) => http.post(url).bearer_auth(t),
            None => http.post(url),
        };
        req.header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", &self.name)
            .body(body.to_string())
    }

    /// Sends it with `extra` members; gives the HTTP status and the JSON-RPC message (the last
    /// `data:` line of an SSE answer).
    pub(crate) async fn send(&self, http: &reqwest::Client, url: &str, extra: Value) -> Reply {
        let resp = self
            .request(http, url, extra)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST tools/call {} to sluice: {e}", self.name));
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("sluice body");
        let json_text = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .unwrap_or(&text)
            .to_owned();
        let msg = serde_json::from_str(&json_text).unwrap_or_else(|e| {
            panic!(
                "sluice answered tools/call {} with non-JSON ({e}): {text}",
                self.name
            )
        });
        Reply { status, msg }
    }
}

/// Sluice's answer to one raw call.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) msg: Value,
}

impl Reply {
    /// The result, asserting a 200 with a result of `result_type`.
    pub(crate) fn expect(&self, result_type: &str) -> &Value {
        assert_eq!(
            self.status, 200,
            "expected HTTP 200 with a {result_type} result: {}",
            self.msg
        );
        assert_eq!(
            self.msg["result"]["resultType"], result_type,
            "expected a {result_type} result: {}",
            self.msg
        );
        &self.msg["result"]
    }

    /// An `input_required` result's requestState.
    pub(crate) fn state(&self) -> String {
        self.expect("input_required")["requestState"]
            .as_str()
            .expect("a requestState string")
            .to_owned()
    }

    /// An `input_required` result's input requests.
    pub(crate) fn input_requests(&self) -> &serde_json::Map<String, Value> {
        self.expect("input_required")["inputRequests"]
            .as_object()
            .expect("inputRequests object")
    }

    /// The text of a complete result.
    pub(crate) fn text(&self) -> String {
        let r = self.expect("complete");
        assert_ne!(
            r["isError"], true,
            "the tool answered isError: {}",
            self.msg
        );
        r["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// Asserts an HTTP 400 JSON-RPC error with `code`; gives its `data`.
    pub(crate) fn refused(&self, code: i64) -> &Value {
        assert_eq!(
            (self.status, &self.msg["error"]["code"]),
            (400, &json!(code)),
            "expected HTTP 400 with error {code}: {}",
            self.msg
        );
        &self.msg["error"]["data"]
    }

    /// Asserts an HTTP 400 `-32602` whose `data.reason` is `reason`.
    pub(crate) fn refused_for(&self, reason: &str) {
        assert_eq!(
            self.refused(-32602)["reason"],
            reason,
            "expected data.reason {reason:?}: {}",
            self.msg
        );
    }
}

/// A sampling answer (`CreateMessageResult`) with `text`.
pub(crate) fn sample(text: &str, model: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": model})
}

/// The extra members of a retry.
pub(crate) fn retry(responses: Value, state: &str) -> Value {
    json!({"inputResponses": responses, "requestState": state})
}
