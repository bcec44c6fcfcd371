//! The mock 2026-07-28 upstream, over real HTTP on 127.0.0.1 port 0.
//!
//! It answers `server/discover` and the four lists from what it is given (raw descriptor
//! text, pages, cache hints or none), keeps `subscriptions/listen` streams open (a test pushes
//! raw messages or list-changed notifications into them), records every request (headers, raw
//! body), and answers the rest through per-test handlers: JSON or raw bytes written as given
//! (escaped keys, `1e6`), SSE bodies cut into chunks of any size with pauses between them,
//! answers held until a gate opens, hangs.
//!
//! Presets: [`Spec::new`] (lists `echo`, `greet`, a resource and a template, and answers every
//! routed method by default), [`Spec::raw`] (nothing listed; every unhandled method gets
//! -32601) and [`start`] (tools and resources given as JSON, every other request to one
//! handler, each result stamped with `resultType` and the server's `_meta`).
//!
//! ```ignore
//! let up = Spec::raw("alpha").tools(json!([tool_args("ask", &[])])).fallback(|s| match s.tool() {
//!     "ask" => Some(result(&s.id, r#"{"resultType":"input\u005frequired", ...}"#)),
//!     _ => None,
//! }).start().await;
//! assert_eq!(up.calls("ask"), 1);
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{V, WAIT};

type Body = BoxBody<Bytes, Infallible>;

/// A request the mock received (notifications too).
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The JSON-RPC method.
    pub(crate) method: String,
    /// The JSON-RPC id (`Null` for a notification); its `Display` is the raw id text.
    pub(crate) id: Value,
    /// The params.
    pub(crate) params: Value,
    /// The request headers.
    pub(crate) headers: http::HeaderMap,
    /// The raw body.
    pub(crate) body: String,
}

impl Seen {
    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `params.name` (the tool or prompt), or "".
    pub(crate) fn tool(&self) -> &str {
        self.params["name"].as_str().unwrap_or("")
    }
}

/// What a handler answers.
pub(crate) enum Reply {
    /// JSON text as written, with an HTTP status.
    Json(u16, String),
    /// Raw bytes with an HTTP status and content type.
    Raw(u16, &'static str, Bytes),
    /// A result for the request's id: `resultType` "complete" added when missing, `_meta` set
    /// to the server's info.
    Result(Value),
    /// A JSON-RPC error for the request's id, with an HTTP status.
    Error(u16, i64, &'static str),
    /// An SSE answer.
    Sse(Sse),
    /// This answer after a pause.
    After(Duration, Box<Reply>),
    /// This answer once the gate reads `true`.
    Gate(watch::Receiver<bool>, Box<Reply>),
    /// Never answers (until the mock stops).
    Hang,
}

impl Reply {
    /// The result `r` ([`Reply::Result`]) once the gate reads `true`.
    pub(crate) fn gate(gate: watch::Receiver<bool>, r: Value) -> Reply {
        Reply::Gate(gate, Box::new(Reply::Result(r)))
    }

    /// The result `r` ([`Reply::Result`]) after `pause`.
    pub(crate) fn after(pause: Duration, r: Value) -> Reply {
        Reply::After(pause, Box::new(Reply::Result(r)))
    }
}

/// An SSE answer: body chunks, each written after its pause; `hang` keeps the stream open
/// afterwards; `on_close` runs when the body is dropped (finished, or cancelled by Sluice).
pub(crate) struct Sse {
    chunks: Vec<(Duration, Bytes)>,
    hang: bool,
    on_close: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Sse {
    /// Runs `f` when Sluice drops the stream (or it ends).
    pub(crate) fn on_close(mut self, f: impl FnOnce() + Send + Sync + 'static) -> Sse {
        self.on_close = Some(Box::new(f));
        self
    }
}

impl From<Sse> for Reply {
    fn from(s: Sse) -> Reply {
        Reply::Sse(s)
    }
}

/// SSE text chunks written `every` apart; `hang` keeps the stream open afterwards.
pub(crate) fn sse(chunks: Vec<String>, every: Duration, hang: bool) -> Reply {
    let chunks = chunks.into_iter().enumerate().map(|(i, c)| (if i == 0 { Duration::ZERO } else { every }, Bytes::from(c))).collect();
    Reply::Sse(Sse { chunks, hang, on_close: None })
}

/// An SSE answer of these body chunks, in order, one HTTP chunk each.
pub(crate) fn chunked(chunks: Vec<Bytes>) -> Reply {
    Reply::Sse(Sse { chunks: chunks.into_iter().map(|c| (Duration::ZERO, c)).collect(), hang: false, on_close: None })
}

/// An SSE stream of JSON-RPC messages, each after its pause (the request's id is not filled
/// in: write it into the messages).
pub(crate) fn stream(events: Vec<(Duration, Value)>) -> Reply {
    Reply::Sse(Sse { chunks: events.into_iter().map(|(p, m)| (p, Bytes::from(ev(&m)))).collect(), hang: false, on_close: None })
}

/// An SSE answer sending these chunks, then held open until Sluice drops it.
pub(crate) fn held(chunks: Vec<String>) -> Sse {
    Sse { chunks: chunks.into_iter().map(|c| (Duration::ZERO, Bytes::from(c))).collect(), hang: true, on_close: None }
}

/// A JSON-RPC result body for `id`, HTTP 200.
pub(crate) fn ok(id: &Value, result: Value) -> Reply {
    Reply::Json(200, json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

/// A JSON-RPC error body for `id`, with the HTTP status.
pub(crate) fn err(status: u16, id: &Value, code: i64, message: &str) -> Reply {
    Reply::Json(status, json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string())
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<raw>}` as written (no re-encoding), HTTP 200.
pub(crate) fn result(id: impl std::fmt::Display, raw: &str) -> Reply {
    Reply::Json(200, result_text(id, raw))
}

/// The text of a JSON-RPC result message (`id` is raw JSON text, or `{id}` for a script).
pub(crate) fn result_text(id: impl std::fmt::Display, raw: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{raw}}}"#)
}

/// A JSON-RPC error answer, HTTP 200.
pub(crate) fn error(id: impl std::fmt::Display, code: i64, message: &str) -> Reply {
    let id: Value = serde_json::from_str(&id.to_string()).unwrap_or(Value::Null);
    Reply::Json(200, json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string())
}

/// One SSE event carrying `msg` on one data line.
pub(crate) fn ev(msg: &Value) -> String {
    event(&msg.to_string())
}

/// One SSE event carrying `data` on one line.
pub(crate) fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// `bytes` cut into chunks of `size` bytes (the last may be shorter).
pub(crate) fn chunks(bytes: &[u8], size: usize) -> Vec<Bytes> {
    bytes.chunks(size.max(1)).map(Bytes::copy_from_slice).collect()
}

/// A plain tool descriptor, as text.
pub(crate) fn tool(name: &str) -> String {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object"}}).to_string()
}

/// A tool descriptor with string arguments.
pub(crate) fn tool_args(name: &str, args: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = args.iter().map(|a| ((*a).to_owned(), json!({"type": "string"}))).collect();
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object", "properties": props}})
}

/// A tool descriptor marked destructive.
pub(crate) fn destructive(name: &str) -> Value {
    let mut t = tool_args(name, &[]);
    t["annotations"] = json!({"destructiveHint": true});
    t
}

type Handler = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

const MEMBERS: [&str; 4] = ["tools", "prompts", "resources", "resourceTemplates"];

fn list_index(method: &str) -> Option<usize> {
    ["tools/list", "prompts/list", "resources/list", "resources/templates/list"].iter().position(|m| *m == method)
}

/// What the mock serves.
pub(crate) struct Spec {
    server: String,
    version: &'static str,
    capabilities: Option<Value>,
    instructions: Option<String>,
    discover_hints: (u64, &'static str),
    discover_members: serde_json::Map<String, Value>,
    discover: Option<Reply>,
    lists: [Vec<String>; 4],
    has_prompts: bool,
    hints: Option<(u64, &'static str)>,
    list_meta: bool,
    page: Option<usize>,
    observe: Option<Arc<dyn Fn(&Seen) + Send + Sync>>,
    on: Option<Handler>,
    fallback: Option<Handler>,
    answers: bool,
}

/// Each item of a JSON array, as text.
fn items(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().map(Value::to_string).collect()).unwrap_or_default()
}

impl Spec {
    /// Tools (`echo`), prompts (`greet`), resources (`mock://<server>/doc`, template
    /// `mock://<server>/items/{id}`), all lists with `ttlMs` 60000, `public` and the server's
    /// `_meta`; every routed method answered ("<server> ran <tool>"…).
    pub(crate) fn new(server: &str) -> Self {
        Spec {
            server: server.to_owned(),
            version: "9.9.9",
            capabilities: Some(json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}})),
            instructions: None,
            discover_hints: (60_000, "public"),
            discover_members: serde_json::Map::new(),
            discover: None,
            lists: [
                vec![tool("echo")],
                vec![json!({"name": "greet", "description": "Greet", "arguments": [{"name": "who"}]}).to_string()],
                vec![json!({"uri": format!("mock://{server}/doc"), "name": "doc"}).to_string()],
                vec![json!({"uriTemplate": format!("mock://{server}/items/{{id}}"), "name": "item"}).to_string()],
            ],
            has_prompts: true,
            hints: Some((60_000, "public")),
            list_meta: true,
            page: None,
            observe: None,
            on: None,
            fallback: None,
            answers: true,
        }
    }

    /// Serves nothing (empty lists without `_meta`, tools and resources declared listChanged
    /// and subscribable) and answers nothing by default: every request no handler takes gets
    /// -32601 with HTTP 404.
    pub(crate) fn raw(server: &str) -> Self {
        Spec {
            version: "1.0.0",
            capabilities: None,
            lists: [Vec::new(), Vec::new(), Vec::new(), Vec::new()],
            has_prompts: false,
            list_meta: false,
            answers: false,
            ..Spec::new(server)
        }
    }

    /// Server capabilities in discover.
    pub(crate) fn caps(mut self, c: Value) -> Self {
        self.capabilities = Some(c);
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

    /// One more member of the discover result.
    pub(crate) fn discover_member(mut self, k: &str, v: Value) -> Self {
        self.discover_members.insert(k.to_owned(), v);
        self
    }

    /// Answers `server/discover` with this instead (`{id}` in JSON text stands for the id).
    pub(crate) fn discover(mut self, r: Reply) -> Self {
        self.discover = Some(r);
        self
    }

    /// Raw tool descriptors.
    pub(crate) fn tools(mut self, raw: Vec<String>) -> Self {
        self.lists[0] = raw;
        self
    }

    /// Tool descriptors as a JSON array.
    pub(crate) fn tools_json(self, t: Value) -> Self {
        self.tools(items(&t))
    }

    /// Raw prompt descriptors.
    pub(crate) fn prompts(mut self, raw: Vec<String>) -> Self {
        self.lists[1] = raw;
        self
    }

    /// Prompt descriptors as a JSON array; a [`Spec::raw`] mock then also declares `prompts`
    /// and `completions`.
    pub(crate) fn prompts_json(mut self, p: Value) -> Self {
        self.has_prompts = true;
        self.prompts(items(&p))
    }

    /// Raw resource descriptors.
    pub(crate) fn resources(mut self, raw: Vec<String>) -> Self {
        self.lists[2] = raw;
        self
    }

    /// Resource descriptors as a JSON array.
    pub(crate) fn resources_json(self, r: Value) -> Self {
        self.resources(items(&r))
    }

    /// Raw resource template descriptors.
    pub(crate) fn templates(mut self, raw: Vec<String>) -> Self {
        self.lists[3] = raw;
        self
    }

    /// Resource template descriptors as a JSON array.
    pub(crate) fn templates_json(self, t: Value) -> Self {
        self.templates(items(&t))
    }

    /// List `ttlMs` and `cacheScope`; `None` sends neither, nor `resultType`.
    pub(crate) fn hints(mut self, h: Option<(u64, &'static str)>) -> Self {
        self.hints = h;
        self
    }

    /// Whether lists carry the server's `_meta`.
    pub(crate) fn list_meta(mut self, on: bool) -> Self {
        self.list_meta = on;
        self
    }

    /// The version in the server's info.
    pub(crate) fn version(mut self, v: &'static str) -> Self {
        self.version = v;
        self
    }

    /// Serves lists in pages of `n` items with `nextCursor`.
    pub(crate) fn page(mut self, n: usize) -> Self {
        self.page = Some(n);
        self
    }

    /// Called with every request as it arrives (notifications too), before any answer.
    pub(crate) fn observe(mut self, f: impl Fn(&Seen) + Send + Sync + 'static) -> Self {
        self.observe = Some(Arc::new(f));
        self
    }

    /// A handler tried before everything else; `None` falls through.
    pub(crate) fn on(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Self {
        self.on = Some(Arc::new(f));
        self
    }

    /// A handler for what discover, the lists and listen leave; `None` falls through to the
    /// default answers ([`Spec::new`]) or -32601.
    pub(crate) fn fallback(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }

    /// Binds 127.0.0.1:0 and serves until the [`Mock`] is dropped.
    pub(crate) async fn start(self) -> Mock {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the mock upstream");
        let addr = listener.local_addr().expect("mock address");
        let stop = CancellationToken::new();
        let state = Arc::new(State {
            spec: Mutex::new(self),
            seen: Mutex::new(Vec::new()),
            notes: broadcast::channel(64).0,
            listening: watch::channel(0usize).0,
            streams_closed: AtomicUsize::new(0),
            changed: tokio::sync::Notify::new(),
            stop: stop.clone(),
        });
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

/// A mock named `server` listing `tools` and `resources` (JSON arrays of descriptors, with the
/// server's `_meta`, capabilities `tools` and `resources`), every other request answered by
/// `handler`.
pub(crate) async fn start(server: &str, tools: Value, resources: Value, handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Mock {
    Spec::raw(server)
        .caps(json!({"tools": {}, "resources": {}}))
        .list_meta(true)
        .tools_json(tools)
        .resources_json(resources)
        .fallback(move |s| Some(handler(s)))
        .start()
        .await
}

/// What a listen stream is told to send.
#[derive(Clone)]
enum Note {
    /// This SSE text as it is.
    Raw(String),
    /// A notification of this method carrying the stream's subscription id.
    Method(String),
}

struct State {
    spec: Mutex<Spec>,
    seen: Mutex<Vec<Seen>>,
    notes: broadcast::Sender<Note>,
    listening: watch::Sender<usize>,
    streams_closed: AtomicUsize,
    /// Notified whenever a request is recorded, an SSE answer closes or a listen opens or
    /// closes: what [`Mock::until`] waits on.
    changed: tokio::sync::Notify,
    stop: CancellationToken,
}

/// A running mock upstream; stops when dropped.
pub(crate) struct Mock {
    /// Its address.
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

    /// Requests received with `method`, in order.
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

    /// How many `tools/call`s of `tool` it received.
    pub(crate) fn calls(&self, tool: &str) -> usize {
        self.seen("tools/call").iter().filter(|s| s.tool() == tool).count()
    }

    /// Replaces the tool list.
    pub(crate) fn set_tools(&self, raw: Vec<String>) {
        if let Ok(mut s) = self.state.spec.lock() {
            s.lists[0] = raw;
        }
    }

    /// Sends `msg` on every open listen stream.
    pub(crate) fn notify(&self, msg: Value) {
        let _ = self.state.notes.send(Note::Raw(ev(&msg)));
    }

    /// Sends the notification `method` (e.g. `notifications/tools/list_changed`) on every open
    /// listen stream, with that stream's subscription id.
    pub(crate) fn notify_method(&self, method: &str) {
        let _ = self.state.notes.send(Note::Method(method.to_owned()));
    }

    /// Listen streams currently open.
    pub(crate) fn listens_open(&self) -> usize {
        *self.state.listening.borrow()
    }

    /// Non-listen SSE answers whose body was dropped (finished or cancelled).
    pub(crate) fn streams_closed(&self) -> usize {
        self.state.streams_closed.load(Ordering::SeqCst)
    }

    /// Waits until Sluice holds a listen stream open.
    pub(crate) async fn wait_listen(&self) {
        self.listening(1).await;
    }

    /// Waits (at most [`WAIT`]) until at least `n` listen streams are open to it.
    pub(crate) async fn listening(&self, n: usize) {
        let mut rx = self.state.listening.subscribe();
        let name = self.state.spec.lock().map(|s| s.server.clone()).unwrap_or_default();
        tokio::time::timeout(WAIT, rx.wait_for(|open| *open >= n))
            .await
            .unwrap_or_else(|_| panic!("fewer than {n} listen streams opened to upstream {name} within {WAIT:?}"))
            .expect("listen counter");
    }

    /// Waits (at most [`WAIT`]) until `cond` holds of the mock: woken by each request it
    /// records, each SSE answer that closes and each listen stream that opens or closes.
    pub(crate) async fn until(&self, what: &str, cond: impl Fn(&Mock) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let changed = self.state.changed.notified();
            if cond(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                assert!(cond(self), "timed out waiting for: {what}");
                return;
            }
        }
    }

    /// Stops accepting and closes its connections.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}

/// Counts a closed SSE answer and runs its `on_close`.
struct CloseGuard(Arc<State>, Option<Box<dyn FnOnce() + Send + Sync>>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        self.0.streams_closed.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = self.1.take() {
            f();
        }
        self.0.changed.notify_waiters();
    }
}

fn plain(status: u16, ctype: &str, body: impl Into<Bytes>) -> http::Response<Body> {
    http::Response::builder().status(status).header("content-type", ctype).body(Full::new(body.into()).boxed()).expect("a response")
}

fn sse_body(rx: mpsc::Receiver<Bytes>, guard: Option<CloseGuard>) -> http::Response<Body> {
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), (rx, guard)))
    });
    http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("an SSE response")
}

async fn handle(st: Arc<State>, req: http::Request<hyper::body::Incoming>) -> Result<http::Response<Body>, Infallible> {
    if req.method() != http::Method::POST {
        return Ok(plain(405, "text/plain", Bytes::new()));
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
    // Subscribed before the request is recorded, so a test that saw the listen never misses
    // a notification it then pushes.
    let notes = st.notes.subscribe();
    let seen = Seen {
        method: msg["method"].as_str().unwrap_or("").to_owned(),
        id: msg.get("id").cloned().unwrap_or(Value::Null),
        params: msg.get("params").cloned().unwrap_or(Value::Null),
        headers: parts.headers,
        body,
    };
    if let Ok(mut s) = st.seen.lock() {
        s.push(seen.clone());
    }
    st.changed.notify_waiters();
    let observe = st.spec.lock().ok().and_then(|s| s.observe.clone());
    if let Some(f) = observe {
        f(&seen);
    }
    if seen.id.is_null() {
        return Ok(plain(202, "application/json", Bytes::new()));
    }
    let on = st.spec.lock().ok().and_then(|s| s.on.clone());
    if let Some(reply) = on.and_then(|h| h(&seen)) {
        return Ok(respond(&st, &seen, reply).await);
    }
    if seen.method == "subscriptions/listen" {
        return Ok(listen(&st, &seen, notes));
    }
    let known = st.spec.lock().ok().and_then(|s| listed(&s, &seen));
    if let Some(reply) = known {
        return Ok(respond(&st, &seen, reply).await);
    }
    let fallback = st.spec.lock().ok().and_then(|s| s.fallback.clone());
    if let Some(reply) = fallback.and_then(|h| h(&seen)) {
        return Ok(respond(&st, &seen, reply).await);
    }
    let reply = st.spec.lock().map(|s| default_reply(&s, &seen)).unwrap_or(Reply::Hang);
    Ok(respond(&st, &seen, reply).await)
}

fn respond<'a>(
    st: &'a Arc<State>,
    seen: &'a Seen,
    reply: Reply,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = http::Response<Body>> + Send + 'a>> {
    Box::pin(async move {
        match reply {
            Reply::Json(status, body) => plain(status, "application/json", body),
            Reply::Raw(status, ctype, bytes) => plain(status, ctype, bytes),
            Reply::Result(mut r) => {
                if r.get("resultType").is_none() {
                    r["resultType"] = json!("complete");
                }
                r["_meta"] = st.spec.lock().map(|s| server_meta(&s)).unwrap_or_default();
                plain(200, "application/json", json!({"jsonrpc": "2.0", "id": seen.id, "result": r}).to_string())
            }
            Reply::Error(status, code, message) => plain(
                status,
                "application/json",
                json!({"jsonrpc": "2.0", "id": seen.id, "error": {"code": code, "message": message}}).to_string(),
            ),
            Reply::Sse(Sse { chunks, hang, on_close }) => {
                // A stream, not a task: a million one-byte chunks cost what the bytes cost.
                let guard = CloseGuard(st.clone(), on_close);
                let stop = st.stop.clone();
                let chunks = futures_util::stream::unfold(chunks.into_iter(), |mut it| async move {
                    let (pause, c) = it.next()?;
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Some((Ok::<_, Infallible>(Frame::data(c)), it))
                });
                let tail = futures_util::stream::once(async move {
                    if hang {
                        stop.cancelled().await;
                    }
                    drop(guard);
                })
                .filter_map(|()| async { None::<Result<Frame<Bytes>, Infallible>> });
                http::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(BodyExt::boxed(StreamBody::new(chunks.chain(tail))))
                    .expect("an SSE response")
            }
            Reply::After(pause, r) => {
                tokio::time::sleep(pause).await;
                respond(st, seen, *r).await
            }
            Reply::Gate(mut gate, r) => {
                let _ = gate.wait_for(|open| *open).await;
                respond(st, seen, *r).await
            }
            Reply::Hang => {
                st.stop.cancelled().await;
                plain(503, "text/plain", Bytes::new())
            }
        }
    })
}

/// A listen stream: the acknowledgement, then each notification the test sends, until Sluice
/// closes it or the mock stops.
fn listen(st: &Arc<State>, seen: &Seen, mut notes: broadcast::Receiver<Note>) -> http::Response<Body> {
    let id = seen.id.clone();
    let filter = seen.params.get("notifications").cloned().unwrap_or(json!({}));
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": filter}});
    let (tx, rx) = mpsc::channel(64);
    let st = st.clone();
    tokio::spawn(async move {
        if tx.send(Bytes::from(ev(&ack))).await.is_err() {
            return;
        }
        st.listening.send_modify(|n| *n += 1);
        st.changed.notify_waiters();
        loop {
            let text = tokio::select! {
                _ = st.stop.cancelled() => break,
                _ = tx.closed() => break,
                n = notes.recv() => match n {
                    Ok(Note::Raw(text)) => text,
                    Ok(Note::Method(method)) => ev(&json!({"jsonrpc": "2.0", "method": method,
                        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}})),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            };
            if tx.send(Bytes::from(text)).await.is_err() {
                break;
            }
        }
        st.listening.send_modify(|n| *n -= 1);
        st.changed.notify_waiters();
    });
    sse_body(rx, None)
}

fn server_meta(s: &Spec) -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": s.server, "version": s.version}})
}

/// Discover and the lists.
fn listed(s: &Spec, seen: &Seen) -> Option<Reply> {
    let id = &seen.id;
    if let Some(i) = list_index(&seen.method) {
        let items = &s.lists[i];
        let start: usize = seen.params["cursor"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = s.page.map_or(items.len(), |n| (start + n).min(items.len()));
        let mut r = format!("{{\"{}\":[{}]", MEMBERS[i], items[start.min(end)..end].join(","));
        if end < items.len() {
            r.push_str(&format!(",\"nextCursor\":\"{end}\""));
        }
        if let Some((ttl, scope)) = s.hints {
            r.push_str(&format!(",\"ttlMs\":{ttl},\"cacheScope\":\"{scope}\",\"resultType\":\"complete\""));
            if s.list_meta {
                r.push_str(&format!(",\"_meta\":{}", server_meta(s)));
            }
        }
        r.push('}');
        return Some(Reply::Json(200, result_text(id, &r)));
    }
    if seen.method != "server/discover" {
        return None;
    }
    if let Some(r) = &s.discover {
        return Some(match r {
            Reply::Json(status, t) => Reply::Json(*status, t.replace("{id}", &id.to_string())),
            Reply::Raw(st, ct, b) => Reply::Raw(*st, ct, b.clone()),
            _ => panic!("a discover override is JSON or raw bytes"),
        });
    }
    let caps = s.capabilities.clone().unwrap_or_else(|| {
        let mut caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}});
        if s.has_prompts {
            caps["prompts"] = json!({"listChanged": true});
            caps["completions"] = json!({});
        }
        caps
    });
    let mut r = json!({"resultType": "complete", "supportedVersions": [V], "capabilities": caps,
        "ttlMs": s.discover_hints.0, "cacheScope": s.discover_hints.1, "_meta": server_meta(s)});
    if let Some(i) = &s.instructions {
        r["instructions"] = i.clone().into();
    }
    for (k, v) in &s.discover_members {
        r[k] = v.clone();
    }
    Some(ok(id, r))
}

/// The answers of a [`Spec::new`] mock to the routed methods.
fn default_reply(s: &Spec, seen: &Seen) -> Reply {
    let id = &seen.id;
    let p = &seen.params;
    if !s.answers {
        return err(404, id, -32601, "method not found");
    }
    match seen.method.as_str() {
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

/// The bridge B mock: a [`Spec::raw`] mock noting, in order, every request (`"<method>
/// <name>"`) and what its tools did. Tools:
///
/// - `echo(text)`: completes at once with the text (and a `resultType` Sluice must strip for a
///   legacy client);
/// - `forever(topic)`: always answers `input_required` with one sampling request (input key
///   `llm`), whatever the retry carries: a loop bomb only the round cap ends; notes
///   `forever answered <n>`;
/// - `hang(tag)`: opens an SSE answer and never finishes it; notes `start <tag>` and, when
///   Sluice drops it (the request was cancelled), `closed <tag>`.
pub(crate) struct Noted {
    /// The mock.
    pub(crate) mock: Mock,
    events: Arc<Mutex<Vec<String>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl Noted {
    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        self.mock.url()
    }

    /// What it noted so far.
    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// How many events equal `event`.
    pub(crate) fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| *e == event).count()
    }

    /// Waits (at most 2 s) until it noted `event`; fails the test otherwise.
    pub(crate) async fn wait_event(&self, event: &str) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.count(event) > 0 {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(2), wait).await.is_err() {
            panic!("the mock upstream did not see {event:?} within 2 s; it saw {:?}", self.events());
        }
    }
}

/// Starts the [`Noted`] bridge B mock.
pub(crate) async fn noted() -> Noted {
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let changed = Arc::new(tokio::sync::Notify::new());
    let note = {
        let (events, changed) = (events.clone(), changed.clone());
        move |e: String| {
            events.lock().unwrap().push(e);
            changed.notify_waiters();
        }
    };
    let meta = json!({"io.modelcontextprotocol/serverInfo": {"name": "bridge-b-mock", "version": "1.0.0"}});
    let (on_note, tool_note) = (note.clone(), note);
    let m = meta.clone();
    let mock = Spec::raw("bridge-b-mock")
        .caps(json!({"tools": {}}))
        .discover_member("serverInfo", json!({"name": "bridge-b-mock", "version": "1.0.0"}))
        .list_meta(true)
        .tools_json(json!([tool_args("echo", &["text"]), tool_args("forever", &["topic"]), tool_args("hang", &["tag"])]))
        .observe(move |s| on_note(format!("{} {}", s.method, s.params["name"].as_str().unwrap_or("")).trim_end().to_owned()))
        .fallback(move |s| {
            let p = &s.params;
            match (s.method.as_str(), s.tool()) {
                ("tools/call", "echo") => {
                    Some(ok(&s.id, json!({"resultType": "complete", "content": [{"type": "text", "text": p["arguments"]["text"]}], "_meta": m})))
                }
                ("tools/call", "forever") => {
                    let answered = p["inputResponses"].as_object().map_or(0, |r| r.len());
                    tool_note(format!("forever answered {answered}"));
                    Some(ok(
                        &s.id,
                        json!({"resultType": "input_required", "requestState": "mock-state",
                            "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {
                                "messages": [{"role": "user", "content": {"type": "text", "text": format!("one more idea about {}", p["arguments"]["topic"].as_str().unwrap_or("?"))}}],
                                "maxTokens": 16}}},
                            "_meta": m}),
                    ))
                }
                ("tools/call", "hang") => {
                    let tag = p["arguments"]["tag"].as_str().unwrap_or("").to_owned();
                    tool_note(format!("start {tag}"));
                    let closed = tool_note.clone();
                    Some(held(vec![": working\n\n".to_owned()]).on_close(move || closed(format!("closed {tag}"))).into())
                }
                ("tools/call", _) => Some(Reply::Json(200, json!({"jsonrpc": "2.0", "id": s.id, "error": {"code": -32602, "message": "unknown tool"}}).to_string())),
                _ => None,
            }
        })
        .start()
        .await;
    let _ = meta;
    Noted { mock, events, changed }
}
