//! Sluice in-process (127.0.0.1 port 0, timeouts in milliseconds) and a raw 2025-11-25 client for
//! wire-level checks: `initialize`, requests on the session, SSE answers read event by event.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use sluice::config::{Config, Overrides};

/// The sealing key of every test gateway (`[state] keys`: id 1, 32 bytes).
const STATE_KEY: &str = "1:YnJpZGdlLWItdGVzdHMtc3RhdGUta2V5LTMyLWJ5dGVzIQ==";

/// The API keys of the two principals a test may configure with [`Setup::two_keys`].
pub(crate) const ALICE_KEY: &str = "bridge-b-alice-key-0123456789";
pub(crate) const BOB_KEY: &str = "bridge-b-bob-key-9876543210";

/// How long a raw read waits for the next SSE event before failing the test.
pub(crate) const EVENT_WAIT: Duration = Duration::from_secs(10);

/// A gateway config built in code.
pub(crate) struct Setup {
    bridge: Vec<(&'static str, u64)>,
    tables: String,
    upstreams: Vec<(String, String)>,
}

impl Setup {
    /// Loopback port 0, tool names always prefixed by their upstream's, short timeouts, parked
    /// rounds for 10 s, no upstreams yet.
    pub(crate) fn new() -> Setup {
        Setup {
            bridge: vec![("gather_ms", 20), ("park_ms", 10_000), ("session_idle_ms", 60_000)],
            tables: String::new(),
            upstreams: Vec::new(),
        }
    }

    /// Adds an `[[upstream]]`.
    pub(crate) fn upstream(mut self, name: &str, url: &str) -> Setup {
        self.upstreams.push((name.to_owned(), url.to_owned()));
        self
    }

    /// Sets a `[bridge]` key.
    pub(crate) fn bridge(mut self, key: &'static str, value: u64) -> Setup {
        self.bridge.retain(|(k, _)| *k != key);
        self.bridge.push((key, value));
        self
    }

    /// Adds config text (whole tables) before the upstreams.
    pub(crate) fn table(mut self, text: &str) -> Setup {
        self.tables.push('\n');
        self.tables.push_str(text);
        self.tables.push('\n');
        self
    }

    /// Two API-key principals: `alice` ([`ALICE_KEY`]) and `bob` ([`BOB_KEY`]).
    pub(crate) fn two_keys(self) -> Setup {
        let text = format!(
            "[auth]\nresource = \"http://gw.test/mcp\"\n\
             [[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n\
             [[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"bob\"\n",
            sluice::auth::api_keys::hash_key(ALICE_KEY),
            sluice::auth::api_keys::hash_key(BOB_KEY)
        );
        self.table(&text)
    }

    /// The audit log appended to `path`.
    pub(crate) fn audit_to(self, path: &std::path::Path) -> Setup {
        self.table(&format!("[audit]\nsink = \"{}\"\n", path.display()))
    }

    /// Starts Sluice; waits until every upstream was probed and is healthy.
    pub(crate) async fn start(self) -> sluice::Running {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "sluice=warn".into());
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        let mut text = String::from(
            "listen = \"127.0.0.1:0\"\nprefix = \"always\"\n\n[timeouts]\nconnect_ms = 500\nresponse_ms = 5000\nrefresh_ms = 60000\nshutdown_ms = 500\nlisten_retry_ms = 250\n\n[bridge]\n",
        );
        for (k, v) in &self.bridge {
            text.push_str(&format!("{k} = {v}\n"));
        }
        text.push_str(&format!("\n[state]\nkeys = [\"{STATE_KEY}\"]\n"));
        text.push_str(&self.tables);
        for (name, url) in &self.upstreams {
            text.push_str(&format!("\n[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\n"));
        }
        let cfg = Config::from_toml(&text, "bridge_b.toml", &Overrides::default()).unwrap_or_else(|e| panic!("config: {e}\n{text}"));
        let running = sluice::start(cfg).await.expect("start sluice");
        tokio::time::timeout(Duration::from_secs(10), running.ready()).await.expect("sluice probed its upstreams within 10 s");
        for up in &running.gateway.upstreams {
            let s = up.status();
            assert!(s.healthy, "upstream {} is not healthy behind sluice: {:?}", up.name, s.error);
        }
        running
    }
}

/// A per-process scratch file path under the target's temp dir (any earlier file removed).
pub(crate) fn scratch_file(name: &str) -> PathBuf {
    let path = crate::peers::scratch().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// An HTTP client for raw calls; a request that hangs fails the test after 20 s.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().expect("reqwest client")
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
    /// A client of `url` with no session yet.
    pub(crate) fn new(url: &str) -> Legacy {
        Legacy { http: http(), url: url.to_owned(), token: None, session: None }
    }

    /// The same client authenticating with the API key `token`.
    pub(crate) fn token(mut self, token: &str) -> Legacy {
        self.token = Some(token.to_owned());
        self
    }

    /// The same client presenting `session` as its `Mcp-Session-Id`.
    pub(crate) fn with_session(&self, session: &str) -> Legacy {
        Legacy { session: Some(session.to_owned()), ..self.clone() }
    }

    fn request(&self, verb: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.http.request(verb, &self.url);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25");
        }
        r
    }

    /// `initialize` declaring `caps`; keeps the session id Sluice minted. Gives the result.
    pub(crate) async fn initialize(&mut self, caps: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "bridge-b-raw", "version": "1"}}});
        let resp = self.post(&body).await;
        assert_eq!(resp.status(), 200, "initialize");
        let sid = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("initialize without Mcp-Session-Id").to_owned();
        assert!(!sid.is_empty() && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)), "session id {sid:?} is not visible ASCII");
        let msg: Value = resp.json().await.expect("initialize JSON");
        self.session = Some(sid);
        let initialized = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
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
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("sluice body");
        let json_text = text.lines().rev().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(&text).to_owned();
        let msg = serde_json::from_str(&json_text).unwrap_or_else(|e| panic!("{method}: non-JSON ({e}): {text:?}"));
        (status, msg)
    }

    /// POSTs a request whose answer is an SSE stream; gives its status, content type and events.
    pub(crate) async fn stream(&self, id: u64, method: &str, params: Value) -> Sse {
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        Sse::of(resp)
    }

    /// A `GET` (the standalone stream).
    pub(crate) async fn get(&self) -> reqwest::Response {
        self.request(reqwest::Method::GET).header("accept", "text/event-stream").send().await.expect("GET sluice")
    }

    /// A `DELETE` (ends the session).
    pub(crate) async fn delete(&self) -> reqwest::Response {
        self.request(reqwest::Method::DELETE).send().await.expect("DELETE sluice")
    }
}

/// One SSE event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: Option<String>,
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
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        Sse { status, content_type, body: Box::pin(resp.bytes_stream()), buf: String::new() }
    }

    /// The next event (comments skipped); `None` when the stream ended. Fails the test after
    /// [`EVENT_WAIT`] without one.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(EVENT_WAIT, self.next_event()).await.unwrap_or_else(|_| panic!("no SSE event within {EVENT_WAIT:?}"))
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
                let mut id = None;
                let mut data = Vec::new();
                let mut fields = false;
                for line in block.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    fields = true;
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if fields {
                    return Some(Event { id, data: data.join("\n") });
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
            let e = self.next().await.expect("the stream ended before the next message");
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
