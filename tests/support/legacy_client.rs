//! A raw 2025-11-25 client for bridge B: `initialize`, requests on the session (no `_meta`
//! envelope, no modern headers), SSE answers read event by event.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use super::rpc::{cut, read, Answer};

/// How long a raw read waits for the next SSE event before failing the test.
pub(crate) const EVENT_WAIT: Duration = Duration::from_secs(10);

/// An HTTP client for raw calls; a request that hangs fails the test after 20 s.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("reqwest client")
}

/// A raw 2025-11-25 client: no `_meta` envelope, no modern headers, a session after initialize.
#[derive(Clone)]
pub(crate) struct Legacy {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    pub(crate) session: Option<String>,
}

impl Legacy {
    /// A client of `url` with no session yet (requests fail the test after 20 s).
    pub(crate) fn new(url: &str) -> Legacy {
        Legacy {
            http: http(),
            url: url.to_owned(),
            token: None,
            session: None,
        }
    }

    /// A client of `url` through `http`, authenticating with `key` when given.
    pub(crate) fn with(http: &reqwest::Client, url: &str, key: Option<&str>) -> Legacy {
        Legacy {
            http: http.clone(),
            url: url.to_owned(),
            token: key.map(str::to_owned),
            session: None,
        }
    }

    /// The same client authenticating with the API key `token`.
    pub(crate) fn token(mut self, token: &str) -> Legacy {
        self.token = Some(token.to_owned());
        self
    }

    /// The same client presenting `session` as its `Mcp-Session-Id`.
    pub(crate) fn with_session(&self, session: &str) -> Legacy {
        Legacy {
            session: Some(session.to_owned()),
            ..self.clone()
        }
    }

    fn request(&self, verb: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.http.request(verb, &self.url);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        if let Some(s) = &self.session {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        r
    }

    /// `initialize` declaring `caps`; keeps the session id Sluice minted. Gives the result.
    pub(crate) async fn initialize(&mut self, caps: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "bridge-b-raw", "version": "1"}}});
        let resp = self.post(&body).await;
        assert_eq!(resp.status(), 200, "initialize");
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("initialize without Mcp-Session-Id")
            .to_owned();
        assert!(
            !sid.is_empty() && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "session id {sid:?} is not visible ASCII"
        );
        let msg: Value = resp.json().await.expect("initialize JSON");
        self.session = Some(sid);
        let initialized = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status(), 202, "notifications/initialized");
        msg["result"].clone()
    }

    /// The session id.
    pub(crate) fn sid(&self) -> String {
        self.session.clone().expect("a session")
    }

    /// POSTs one message; gives the raw response.
    pub(crate) async fn post(&self, msg: &Value) -> reqwest::Response {
        self.request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(msg.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {msg} to sluice: {e}"))
    }

    /// POSTs a request and reads a JSON answer: (status, message).
    pub(crate) async fn call(&self, id: u64, method: &str, params: Value) -> (u16, Value) {
        let resp = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("sluice body");
        let json_text = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .unwrap_or(&text)
            .to_owned();
        let msg = serde_json::from_str(&json_text)
            .unwrap_or_else(|e| panic!("{method}: non-JSON ({e}): {text:?}"));
        (status, msg)
    }

    /// `initialize` declaring `caps` then `notifications/initialized`, asserting only their
    /// statuses and the session id's presence; keeps the session id.
    pub(crate) async fn handshake(&mut self, caps: Value) {
        self.session = None;
        let a = self
            .answer_to(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "hostile-legacy-client", "version": "1"}}}))
            .await;
        assert_eq!(a.status, 200, "initialize: {}", cut(&a.text));
        let sid = a
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("initialize without Mcp-Session-Id");
        self.session = Some(sid.to_owned());
        let n = self
            .answer_to(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(n.status, 202, "notifications/initialized: {}", n.text);
    }

    /// POSTs one message; gives the [`Answer`].
    pub(crate) async fn answer_to(&self, msg: &Value) -> Answer {
        read(self.post(msg).await).await
    }

    /// POSTs a request; gives the [`Answer`].
    pub(crate) async fn answer(&self, id: u64, method: &str, params: Value) -> Answer {
        self.answer_to(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// POSTs a request whose answer is an SSE stream; gives its status, content type and events.
    pub(crate) async fn stream(&self, id: u64, method: &str, params: Value) -> Sse {
        let resp = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        Sse::of(resp)
    }

    /// A `GET` (the standalone stream).
    pub(crate) async fn get(&self) -> reqwest::Response {
        self.request(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET sluice")
    }

    /// A `GET` with `Last-Event-ID: last` (takes up a call stream that ended early).
    pub(crate) async fn resume(&self, last: &str) -> reqwest::Response {
        self.request(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .header("last-event-id", last)
            .send()
            .await
            .expect("GET sluice")
    }

    /// A `DELETE` (ends the session).
    pub(crate) async fn delete(&self) -> reqwest::Response {
        self.request(reqwest::Method::DELETE)
            .send()
            .await
            .expect("DELETE sluice")
    }
}

/// One SSE event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: Option<String>,
    /// Its `event:` field, when it has one.
    pub(crate) name: Option<String>,
    pub(crate) data: String,
}

impl Event {
    /// Its data as JSON (`Null` for an empty or non-JSON data line, such as a priming event).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// An SSE answer read event by event.
pub(crate) struct Sse {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl Sse {
    pub(crate) fn of(resp: reqwest::Response) -> Sse {
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        Sse {
            status,
            content_type,
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event (comments skipped); `None` when the stream ended. Fails the test after
    /// [`EVENT_WAIT`] without one.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(EVENT_WAIT, self.next_event())
            .await
            .unwrap_or_else(|_| panic!("no SSE event within {EVENT_WAIT:?}"))
    }

    /// Whether the stream ends (without another event) within `wait`.
    pub(crate) async fn ends_within(&mut self, wait: Duration) -> Result<(), String> {
        match tokio::time::timeout(wait, self.next_event()).await {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(format!("another event came: {e:?}")),
            Err(_) => Err(format!("the stream was still open after {wait:?}")),
        }
    }

    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut name) = (None, None);
                let mut data = Vec::new();
                let mut fields = false;
                for line in block.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    fields = true;
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        name = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if fields {
                    return Some(Event {
                        id,
                        name,
                        data: data.join("\n"),
                    });
                }
                continue;
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// The next event that carries a JSON-RPC message.
    pub(crate) async fn next_message(&mut self) -> Value {
        loop {
            let e = self
                .next()
                .await
                .expect("the stream ended before the next message");
            let v = e.json();
            if !v.is_null() {
                return v;
            }
        }
    }
}

/// A sampling answer (`CreateMessageResult`) with `text`.
pub(crate) fn sample(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "raw-llm", "stopReason": "endTurn"})
}

/// Whether `v` holds a `resultType` member anywhere.
pub(crate) fn has_result_type(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("resultType") || m.values().any(has_result_type),
        Value::Array(a) => a.iter().any(has_result_type),
        _ => false,
    }
}
