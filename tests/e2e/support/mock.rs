//! A mock 2026-07-28 upstream over real HTTP: lists from raw descriptor text (pages, cache
//! hints or none), default answers for every routed method, listen streams a test can push
//! notifications into, and per-test handlers for anything else (SSE, errors, hangs).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::{eventually, V};

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
