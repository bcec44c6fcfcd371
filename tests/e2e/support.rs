//! The e2e harness: Sluice started in-process on 127.0.0.1:0, a configurable mock 2026-07-28
//! upstream over real HTTP, a client that builds well-formed modern requests (and lets a test
//! break any part of them), an SSE reader, a raw HTTP/1.1 writer for headers reqwest would
//! normalise, and a capture of Sluice's warnings.
//!
//! No fixed ports, no waits longer than 2 s: every wait polls with a deadline.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use sluice::config::{Config, Overrides};
use sluice::Running;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

/// The modern protocol version.
pub(crate) const V: &str = "2026-07-28";
/// Longest any test waits for one thing.
pub(crate) const WAIT: Duration = Duration::from_secs(2);

// ============================================================================================
// Sluice
// ============================================================================================

/// A config built in code, with every timeout in milliseconds.
pub(crate) struct Setup {
    top: Vec<String>,
    timeouts: Vec<(&'static str, u64)>,
    limits: Vec<(&'static str, u64)>,
    upstreams: Vec<(String, String)>,
    no_prefix: bool,
}

impl Setup {
    /// Loopback port 0, short timeouts, no upstreams yet.
    pub(crate) fn new() -> Self {
        Setup {
            top: Vec::new(),
            timeouts: vec![
                ("connect_ms", 300),
                ("response_ms", 1500),
                ("refresh_ms", 60_000),
                ("shutdown_ms", 500),
                ("listen_retry_ms", 20),
            ],
            limits: Vec::new(),
            upstreams: Vec::new(),
            no_prefix: false,
        }
    }

    /// Adds an `[[upstream]]`.
    pub(crate) fn upstream(mut self, name: &str, url: &str) -> Self {
        self.upstreams.push((name.to_owned(), url.to_owned()));
        self
    }

    /// Adds a top-level line such as `separator = "--"`.
    pub(crate) fn top(mut self, line: &str) -> Self {
        self.top.push(line.to_owned());
        self
    }

    /// Sets a `[timeouts]` key.
    pub(crate) fn timeout(mut self, key: &'static str, ms: u64) -> Self {
        self.timeouts.retain(|(k, _)| *k != key);
        self.timeouts.push((key, ms));
        self
    }

    /// Sets a `[limits]` key.
    pub(crate) fn limit(mut self, key: &'static str, n: u64) -> Self {
        self.limits.push((key, n));
        self
    }

    /// The `--no-prefix` quick flag.
    pub(crate) fn no_prefix(mut self) -> Self {
        self.no_prefix = true;
        self
    }

    /// The config text.
    pub(crate) fn toml(&self) -> String {
        let mut t = String::from("listen = \"127.0.0.1:0\"\n");
        for l in &self.top {
            t.push_str(l);
            t.push('\n');
        }
        t.push_str("[timeouts]\n");
        for (k, v) in &self.timeouts {
            t.push_str(&format!("{k} = {v}\n"));
        }
        t.push_str("[limits]\n");
        for (k, v) in &self.limits {
            t.push_str(&format!("{k} = {v}\n"));
        }
        for (n, u) in &self.upstreams {
            t.push_str(&format!("[[upstream]]\nname = \"{n}\"\nurl = \"{u}\"\n"));
        }
        t
    }

    /// The validated config.
    pub(crate) fn config(&self) -> Config {
        let over = Overrides { no_prefix: self.no_prefix, ..Default::default() };
        Config::from_toml(&self.toml(), "e2e.toml", &over).unwrap_or_else(|e| panic!("config refused: {e}\n{}", self.toml()))
    }

    /// Starts Sluice and waits until every upstream was probed.
    pub(crate) async fn start(self) -> Running {
        capture_logs();
        let running = sluice::start(self.config()).await.expect("sluice starts");
        tokio::time::timeout(Duration::from_secs(5), running.ready()).await.expect("sluice probes its upstreams");
        running
    }
}

/// One demo upstream named `name`, and Sluice in front of it alone (names unprefixed).
pub(crate) async fn one_demo(name: &'static str) -> (sluice::demo::upstream::DemoUpstream, Running) {
    let demo = sluice::demo::upstream::start(name, ([127, 0, 0, 1], 0).into()).await.expect("demo upstream starts");
    let sluice = Setup::new().upstream(name, &demo.url()).start().await;
    (demo, sluice)
}

/// An `http://` URL on loopback where nothing listens.
pub(crate) fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    format!("http://{addr}/mcp")
}

/// A loopback listener whose accept queue is full: connecting to it hangs until the caller's
/// connect timeout. Keep the value alive while it is used.
pub(crate) struct Stalled {
    _listener: tokio::net::TcpListener,
    _filler: std::net::TcpStream,
    pub(crate) url: String,
}

/// A [`Stalled`] listener.
pub(crate) fn stalled() -> Stalled {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = sock.local_addr().expect("addr");
    let listener = sock.listen(0).expect("listen");
    let filler = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).expect("the one queued connection");
    Stalled { _listener: listener, _filler: filler, url: format!("http://{addr}/mcp") }
}

// ============================================================================================
// Requests
// ============================================================================================

/// The `_meta` envelope every modern request carries.
pub(crate) fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
    })
}

/// A modern request, well formed unless a test says otherwise.
pub(crate) struct Req {
    id: Option<Value>,
    method: String,
    params: Value,
    headers: Vec<(String, Vec<u8>)>,
    removed: Vec<String>,
    body: Option<Vec<u8>>,
}

impl Req {
    /// `method` with id 1, params `{_meta}` and the mirrored headers.
    pub(crate) fn new(method: &str) -> Self {
        Req {
            id: Some(json!(1)),
            method: method.to_owned(),
            params: json!({"_meta": meta()}),
            headers: Vec::new(),
            removed: Vec::new(),
            body: None,
        }
    }

    /// Sets the id.
    pub(crate) fn id(mut self, id: Value) -> Self {
        self.id = Some(id);
        self
    }

    /// Makes it a notification.
    pub(crate) fn notification(mut self) -> Self {
        self.id = None;
        self
    }

    /// Adds params members (the default `_meta` stays unless `p` has its own).
    pub(crate) fn params(mut self, p: Value) -> Self {
        if let Value::Object(m) = p {
            for (k, v) in m {
                self.params[k] = v;
            }
        }
        self
    }

    /// Replaces `_meta`.
    pub(crate) fn meta(mut self, m: Value) -> Self {
        self.params["_meta"] = m;
        self
    }

    /// Sets one `_meta` member.
    pub(crate) fn meta_member(mut self, k: &str, v: Value) -> Self {
        self.params["_meta"][k] = v;
        self
    }

    /// Drops `_meta`.
    pub(crate) fn no_meta(mut self) -> Self {
        if let Some(o) = self.params.as_object_mut() {
            o.remove("_meta");
        }
        self
    }

    /// Sets a header (replacing the default of that name).
    pub(crate) fn header(self, k: &str, v: &str) -> Self {
        self.header_bytes(k, v.as_bytes())
    }

    /// Sets a header with raw bytes.
    pub(crate) fn header_bytes(mut self, k: &str, v: &[u8]) -> Self {
        let k = k.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != k);
        self.headers.push((k, v.to_vec()));
        self
    }

    /// Leaves out a default header.
    pub(crate) fn without(mut self, k: &str) -> Self {
        self.removed.push(k.to_ascii_lowercase());
        self
    }

    /// Sends these bytes instead of the built body.
    pub(crate) fn raw_body(mut self, b: impl Into<Vec<u8>>) -> Self {
        self.body = Some(b.into());
        self
    }

    /// The JSON body.
    pub(crate) fn body_json(&self) -> Value {
        let mut b = json!({"jsonrpc": "2.0", "method": self.method, "params": self.params});
        if let Some(id) = &self.id {
            b["id"] = id.clone();
        }
        b
    }

    /// The headers and body as sent.
    pub(crate) fn build(&self) -> (Vec<(String, Vec<u8>)>, Vec<u8>) {
        let mut h: Vec<(String, Vec<u8>)> = vec![
            ("content-type".into(), b"application/json".to_vec()),
            ("accept".into(), b"application/json, text/event-stream".to_vec()),
            ("mcp-protocol-version".into(), V.as_bytes().to_vec()),
            ("mcp-method".into(), self.method.as_bytes().to_vec()),
        ];
        let member = match self.method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        };
        if let Some(v) = member.and_then(|m| self.params.get(m)).and_then(Value::as_str) {
            h.push(("mcp-name".into(), sluice::mcp::headers::encode(v).into_bytes()));
        }
        h.retain(|(k, _)| !self.removed.contains(k) && !self.headers.iter().any(|(n, _)| n == k));
        h.extend(self.headers.iter().cloned());
        let body = self.body.clone().unwrap_or_else(|| self.body_json().to_string().into_bytes());
        (h, body)
    }

    fn request(&self, url: &str) -> reqwest::RequestBuilder {
        let (headers, body) = self.build();
        let mut rb = client().post(url);
        for (k, v) in headers {
            rb = rb.header(k, reqwest::header::HeaderValue::from_bytes(&v).expect("header value"));
        }
        rb.body(body)
    }

    /// Sends and reads the whole answer.
    pub(crate) async fn send(self, url: &str) -> Resp {
        let resp = tokio::time::timeout(WAIT, self.request(url).send()).await.expect("answer within 2 s").expect("request sent");
        Resp::read(resp).await
    }

    /// Sends and keeps the answer open as an SSE stream.
    pub(crate) async fn stream(self, url: &str) -> Stream {
        let resp = tokio::time::timeout(WAIT, self.request(url).send()).await.expect("answer within 2 s").expect("request sent");
        Stream { status: resp.status().as_u16(), headers: resp.headers().clone(), resp, buf: String::new() }
    }
}

/// One reqwest client for the whole binary.
pub(crate) fn client() -> reqwest::Client {
    static C: OnceLock<reqwest::Client> = OnceLock::new();
    C.get_or_init(|| reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client")).clone()
}

/// A whole answer.
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) text: String,
}

impl Resp {
    async fn read(resp: reqwest::Response) -> Self {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = tokio::time::timeout(WAIT, resp.text()).await.expect("body within 2 s").expect("body");
        Resp { status, headers, text }
    }

    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as one compact JSON object (asserts both).
    pub(crate) fn json(&self) -> Value {
        assert_eq!(self.header("content-type"), Some("application/json"), "JSON answer expected: {} {}", self.status, self.text);
        assert_compact(&self.text);
        let v: Value = serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not one JSON value ({e}): {}", self.text));
        assert!(v.is_object(), "not an object: {}", self.text);
        v
    }

    /// Asserts a JSON-RPC error with this status, code and id; gives the error object.
    pub(crate) fn error(&self, status: u16, code: i64, id: &Value) -> Value {
        let v = self.json();
        assert_eq!((self.status, v["error"]["code"].as_i64()), (status, Some(code)), "{}", self.text);
        assert_eq!(&v["id"], id, "error must carry the request id: {}", self.text);
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "error message: {}", self.text);
        v["error"].clone()
    }

    /// Asserts a 200 JSON-RPC result stamped by Sluice (resultType, serverInfo) with this id.
    pub(crate) fn result(&self, id: &Value) -> Value {
        let v = self.json();
        assert_eq!(self.status, 200, "{}", self.text);
        assert_eq!(&v["id"], id, "{}", self.text);
        let r = v["result"].clone();
        assert_result_stamped(&r);
        r
    }

    /// The SSE events of an event-stream body, each asserted to hold one `data:` line.
    pub(crate) fn events(&self) -> Vec<Value> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"), "{}", self.text);
        let mut out = Vec::new();
        for block in self.text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            out.push(parse_event(block));
        }
        out
    }
}

/// Asserts what every result Sluice sends must carry.
pub(crate) fn assert_result_stamped(r: &Value) {
    assert!(r["resultType"].is_string(), "result without resultType: {r}");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sluice", "result without Sluice's serverInfo: {r}");
}

/// Asserts the text is JSON with no whitespace outside strings.
pub(crate) fn assert_compact(text: &str) {
    let (mut in_str, mut esc) = (false, false);
    for c in text.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
        } else {
            assert!(!c.is_whitespace(), "body is not compact JSON: {text:?}");
        }
    }
}

fn parse_event(block: &str) -> Value {
    let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).collect();
    assert_eq!(data.len(), 1, "each SSE event must carry exactly one data: line: {block:?}");
    let text = data[0].strip_prefix(' ').unwrap_or(data[0]);
    for l in block.lines() {
        let field = l.split(':').next().unwrap_or("");
        assert!(
            l.is_empty() || l.starts_with(':') || matches!(field, "data" | "event" | "id" | "retry"),
            "stray SSE line: {l:?} in {block:?}"
        );
    }
    assert_compact(text);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {text}"))
}

/// An SSE answer read event by event.
pub(crate) struct Stream {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    resp: reqwest::Response,
    buf: String,
}

impl Stream {
    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next event's message, `None` when the stream ended; panics after `within`.
    pub(crate) async fn next_within(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                if block.trim().is_empty() || block.lines().all(|l| l.starts_with(':') || l.is_empty()) {
                    continue;
                }
                return Some(parse_event(&block));
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk()).await.expect("SSE event within the deadline");
            match chunk {
                Ok(Some(c)) => self.buf.push_str(&String::from_utf8_lossy(&c)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// The next event's message within 2 s.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        self.next_within(WAIT).await
    }

    /// Whether nothing arrives for `quiet`.
    pub(crate) async fn silent_for(&mut self, quiet: Duration) -> bool {
        if self.buf.contains("data:") {
            return false;
        }
        tokio::time::timeout(quiet, self.resp.chunk()).await.is_err()
    }
}

// ============================================================================================
// Raw HTTP/1.1 (exact header spelling, arbitrary Host)
// ============================================================================================

/// A raw answer: status, head text (lower-cased) and body.
pub(crate) struct Raw {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

/// Sends `head_lines` (without the request line and the Content-Length) and `body` as written.
pub(crate) async fn raw_post(addr: SocketAddr, path: &str, head_lines: &[String], body: &str) -> Raw {
    let mut req = format!("POST {path} HTTP/1.1\r\n");
    for l in head_lines {
        req.push_str(l);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()));
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out)).await.expect("answer within 2 s").expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_owned() };
    Raw { status, head, body }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Headers of a well-formed `server/discover` with the given Host (and Origin).
pub(crate) fn discover_head(host: &str, origin: Option<&str>) -> (Vec<String>, String) {
    let mut h = vec![
        format!("Host: {host}"),
        "Content-Type: application/json".to_owned(),
        "Accept: application/json, text/event-stream".to_owned(),
        format!("MCP-Protocol-Version: {V}"),
        "Mcp-Method: server/discover".to_owned(),
    ];
    if let Some(o) = origin {
        h.push(format!("Origin: {o}"));
    }
    (h, Req::new("server/discover").body_json().to_string())
}

// ============================================================================================
// Logs
// ============================================================================================

fn log_buf() -> &'static Mutex<Vec<u8>> {
    static BUF: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    BUF.get_or_init(|| Mutex::new(Vec::new()))
}

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = log_buf().lock() {
            v.extend_from_slice(b);
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Routes warnings of every test to one buffer (once per binary).
pub(crate) fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let sub = tracing_subscriber::fmt().with_writer(|| LogWriter).with_ansi(false).with_max_level(tracing::Level::WARN).finish();
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// Waits (up to 2 s) for a warning line holding every one of `parts`.
pub(crate) async fn wait_warning(parts: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = log_buf().lock().map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("WARN") && parts.iter().all(|p| l.contains(p))) {
            return line.to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "no warning holding {parts:?} in the log:\n{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `cond` every 5 ms for up to 2 s.
pub(crate) async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ============================================================================================
// Mock upstream
// ============================================================================================

type Body = BoxBody<Bytes, Infallible>;

/// A request the mock received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) id: Value,
    pub(crate) params: Value,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Seen {
    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What a custom handler answers.
pub(crate) enum Reply {
    /// A JSON body with a status.
    Json(u16, String),
    /// SSE text chunks written `every` apart; `hang` keeps the stream open afterwards.
    Sse { chunks: Vec<String>, every: Duration, hang: bool },
    /// Never answers.
    Hang,
}

/// A JSON-RPC result body for `id`.
pub(crate) fn ok(id: &Value, result: Value) -> Reply {
    Reply::Json(200, json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

/// A JSON-RPC error body for `id`, with the HTTP status.
pub(crate) fn err(status: u16, id: &Value, code: i64, message: &str) -> Reply {
    Reply::Json(status, json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string())
}

/// One SSE event carrying `msg` on one data line.
pub(crate) fn ev(msg: &Value) -> String {
    format!("data: {msg}\n\n")
}

type Handler = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

/// What the mock serves.
pub(crate) struct MockSpec {
    server: String,
    capabilities: Value,
    instructions: Option<String>,
    discover_hints: (u64, &'static str),
    lists: [Vec<String>; 4],
    hints: Option<(u64, &'static str)>,
    page: Option<usize>,
    handler: Option<Handler>,
}

const MEMBERS: [&str; 4] = ["tools", "prompts", "resources", "resourceTemplates"];

fn list_index(method: &str) -> Option<usize> {
    ["tools/list", "prompts/list", "resources/list", "resources/templates/list"].iter().position(|m| *m == method)
}

/// A plain tool descriptor.
pub(crate) fn tool(name: &str) -> String {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object"}}).to_string()
}

impl MockSpec {
    /// Tools (`echo`), prompts (`greet`), resources (`mock://<server>/doc`, template
    /// `mock://<server>/items/{id}`), all lists with `ttlMs` 60000 and `public`.
    pub(crate) fn new(server: &str) -> Self {
        MockSpec {
            server: server.to_owned(),
            capabilities: json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}}),
            instructions: None,
            discover_hints: (60_000, "public"),
            lists: [
                vec![tool("echo")],
                vec![json!({"name": "greet", "description": "Greet", "arguments": [{"name": "who"}]}).to_string()],
                vec![json!({"uri": format!("mock://{server}/doc"), "name": "doc"}).to_string()],
                vec![json!({"uriTemplate": format!("mock://{server}/items/{{id}}"), "name": "item"}).to_string()],
            ],
            hints: Some((60_000, "public")),
            page: None,
            handler: None,
        }
    }

    /// Server capabilities in discover.
    pub(crate) fn caps(mut self, c: Value) -> Self {
        self.capabilities = c;
        self
    }

    /// Instructions in discover.
    pub(crate) fn instructions(mut self, i: &str) -> Self {
        self.instructions = Some(i.to_owned());
        self
    }

    /// Discover's `ttlMs` and `cacheScope`.
    pub(crate) fn discover_hints(mut self, ttl: u64, scope: &'static str) -> Self {
        self.discover_hints = (ttl, scope);
        self
    }

    /// Raw tool descriptors.
    pub(crate) fn tools(mut self, raw: Vec<String>) -> Self {
        self.lists[0] = raw;
        self
    }

    /// Raw prompt descriptors.
    pub(crate) fn prompts(mut self, raw: Vec<String>) -> Self {
        self.lists[1] = raw;
        self
    }

    /// Raw resource descriptors.
    pub(crate) fn resources(mut self, raw: Vec<String>) -> Self {
        self.lists[2] = raw;
        self
    }

    /// Raw resource template descriptors.
    pub(crate) fn templates(mut self, raw: Vec<String>) -> Self {
        self.lists[3] = raw;
        self
    }

    /// List `ttlMs` and `cacheScope`; `None` sends neither, nor `resultType`.
    pub(crate) fn hints(mut self, h: Option<(u64, &'static str)>) -> Self {
        self.hints = h;
        self
    }

    /// Serves lists in pages of `n` items with `nextCursor`.
    pub(crate) fn page(mut self, n: usize) -> Self {
        self.page = Some(n);
        self
    }

    /// A handler tried before the defaults; `None` falls through to them.
    pub(crate) fn on(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Self {
        self.handler = Some(Arc::new(f));
        self
    }

    /// Binds 127.0.0.1:0 and serves.
    pub(crate) async fn start(self) -> Mock {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind mock");
        let addr = listener.local_addr().expect("mock addr");
        let state = Arc::new(State {
            spec: Mutex::new(self),
            seen: Mutex::new(Vec::new()),
            listen_tx: broadcast::channel(64).0,
            listens_open: AtomicUsize::new(0),
            streams_closed: AtomicUsize::new(0),
        });
        let stop = CancellationToken::new();
        let (st, token) = (state.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                let (st, token) = (st.clone(), token.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(st.clone(), req));
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
                });
            }
        });
        Mock { addr, state, stop }
    }
}

struct State {
    spec: Mutex<MockSpec>,
    seen: Mutex<Vec<Seen>>,
    listen_tx: broadcast::Sender<String>,
    listens_open: AtomicUsize,
    streams_closed: AtomicUsize,
}

/// A running mock upstream.
pub(crate) struct Mock {
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Mock {
    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Requests received with `method`.
    pub(crate) fn seen(&self, method: &str) -> Vec<Seen> {
        self.state.seen.lock().map(|s| s.iter().filter(|x| x.method == method).cloned().collect()).unwrap_or_default()
    }

    /// How many requests with `method` arrived.
    pub(crate) fn count(&self, method: &str) -> usize {
        self.seen(method).len()
    }

    /// The last request with `method`.
    pub(crate) fn last(&self, method: &str) -> Seen {
        self.seen(method).pop().unwrap_or_else(|| panic!("the mock saw no {method}"))
    }

    /// Replaces the tool list.
    pub(crate) fn set_tools(&self, raw: Vec<String>) {
        if let Ok(mut s) = self.state.spec.lock() {
            s.lists[0] = raw;
        }
    }

    /// Sends `msg` on every open listen stream.
    pub(crate) fn notify(&self, msg: Value) {
        let _ = self.state.listen_tx.send(ev(&msg));
    }

    /// Listen streams currently open.
    pub(crate) fn listens_open(&self) -> usize {
        self.state.listens_open.load(Ordering::SeqCst)
    }

    /// Non-listen SSE answers whose body was dropped (finished or cancelled).
    pub(crate) fn streams_closed(&self) -> usize {
        self.state.streams_closed.load(Ordering::SeqCst)
    }

    /// Waits until Sluice holds a listen stream open.
    pub(crate) async fn wait_listen(&self) {
        let st = self.state.clone();
        eventually("an upstream listen stream", move || st.listens_open.load(Ordering::SeqCst) > 0).await;
    }

    /// Stops accepting and closes its connections.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}

struct CloseGuard(Arc<State>, bool);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        if self.1 {
            self.0.listens_open.fetch_sub(1, Ordering::SeqCst);
        } else {
            self.0.streams_closed.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn sse_response(rx: mpsc::Receiver<String>, guard: CloseGuard) -> http::Response<Body> {
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|s| (Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(s))), (rx, guard)))
    });
    http::Response::builder().header("content-type", "text/event-stream").body(StreamBody::new(stream).boxed()).unwrap_or_default()
}

fn plain(status: u16, ctype: &str, body: String) -> http::Response<Body> {
    http::Response::builder().status(status).header("content-type", ctype).body(Full::new(Bytes::from(body)).boxed()).unwrap_or_default()
}

async fn handle(st: Arc<State>, req: http::Request<hyper::body::Incoming>) -> Result<http::Response<Body>, Infallible> {
    if req.method() != http::Method::POST {
        return Ok(plain(405, "text/plain", String::new()));
    }
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return Ok(plain(
            400,
            "application/json",
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}).to_string(),
        ));
    };
    let method = msg["method"].as_str().unwrap_or("").to_owned();
    let Some(id) = msg.get("id").cloned() else {
        return Ok(plain(202, "text/plain", String::new()));
    };
    // Subscribed before the request is recorded, so a test that saw the listen never misses
    // a notification it then pushes.
    let listen_rx = st.listen_tx.subscribe();
    let seen = Seen { method: method.clone(), id: id.clone(), params: msg["params"].clone(), headers: parts.headers, body };
    if let Ok(mut s) = st.seen.lock() {
        s.push(seen.clone());
    }
    let custom = st.spec.lock().ok().and_then(|s| s.handler.clone());
    if let Some(reply) = custom.and_then(|h| h(&seen)) {
        return Ok(respond(&st, reply).await);
    }
    if method == "subscriptions/listen" {
        return Ok(listen(&st, &seen, listen_rx));
    }
    let reply = st.spec.lock().map(|s| default_reply(&s, &seen)).unwrap_or(Reply::Hang);
    Ok(respond(&st, reply).await)
}

async fn respond(st: &Arc<State>, reply: Reply) -> http::Response<Body> {
    match reply {
        Reply::Json(status, body) => plain(status, "application/json", body),
        Reply::Sse { chunks, every, hang } => {
            let (tx, rx) = mpsc::channel(64);
            tokio::spawn(async move {
                for (i, c) in chunks.into_iter().enumerate() {
                    if i > 0 && !every.is_zero() {
                        tokio::time::sleep(every).await;
                    }
                    if tx.send(c).await.is_err() {
                        return;
                    }
                }
                if hang {
                    tx.closed().await;
                }
            });
            sse_response(rx, CloseGuard(st.clone(), false))
        }
        Reply::Hang => {
            futures_util::future::pending::<()>().await;
            plain(500, "text/plain", String::new())
        }
    }
}

fn listen(st: &Arc<State>, seen: &Seen, mut rx: broadcast::Receiver<String>) -> http::Response<Body> {
    st.listens_open.fetch_add(1, Ordering::SeqCst);
    let guard = CloseGuard(st.clone(), true);
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": seen.id}, "notifications": seen.params["notifications"]}});
    let (tx, out) = mpsc::channel(64);
    tokio::spawn(async move {
        if tx.send(ev(&ack)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                m = rx.recv() => match m {
                    Ok(m) => if tx.send(m).await.is_err() { return },
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    sse_response(out, guard)
}

fn server_meta(s: &MockSpec) -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": s.server, "version": "9.9.9"}})
}

fn default_reply(s: &MockSpec, seen: &Seen) -> Reply {
    let id = &seen.id;
    let p = &seen.params;
    if let Some(i) = list_index(&seen.method) {
        let items = &s.lists[i];
        let start: usize = p["cursor"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = s.page.map_or(items.len(), |n| (start + n).min(items.len()));
        let mut r = format!("{{\"{}\":[{}]", MEMBERS[i], items[start.min(end)..end].join(","));
        if end < items.len() {
            r.push_str(&format!(",\"nextCursor\":\"{end}\""));
        }
        if let Some((ttl, scope)) = s.hints {
            r.push_str(&format!(",\"ttlMs\":{ttl},\"cacheScope\":\"{scope}\",\"resultType\":\"complete\",\"_meta\":{}", server_meta(s)));
        }
        r.push('}');
        return Reply::Json(200, format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{r}}}"));
    }
    match seen.method.as_str() {
        "server/discover" => {
            let mut r = json!({"resultType": "complete", "supportedVersions": [V], "capabilities": s.capabilities,
                "ttlMs": s.discover_hints.0, "cacheScope": s.discover_hints.1, "_meta": server_meta(s)});
            if let Some(i) = &s.instructions {
                r["instructions"] = i.clone().into();
            }
            ok(id, r)
        }
        "tools/call" => ok(
            id,
            json!({"resultType": "complete", "content": [{"type": "text", "text": format!("{} ran {}", s.server, p["name"].as_str().unwrap_or("?"))}], "_meta": server_meta(s)}),
        ),
        "prompts/get" => ok(
            id,
            json!({"resultType": "complete", "messages": [{"role": "user", "content": {"type": "text", "text": format!("{} prompt {}", s.server, p["name"])}}]}),
        ),
        "resources/read" => ok(
            id,
            json!({"resultType": "complete", "contents": [{"uri": p["uri"], "text": format!("{} read {}", s.server, p["uri"].as_str().unwrap_or(""))}], "ttlMs": 1000, "cacheScope": "public"}),
        ),
        "completion/complete" => ok(id, json!({"resultType": "complete", "completion": {"values": [format!("{} completes", s.server)]}})),
        _ => err(404, id, -32601, "method not found"),
    }
}
