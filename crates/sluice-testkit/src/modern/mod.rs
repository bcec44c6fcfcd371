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

mod noted;
mod reply;
mod serve;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

pub use noted::{noted, Noted};
pub use reply::*;
use serve::{Note, State};

use crate::WAIT;

/// A request the mock received (notifications too).
#[derive(Clone, Debug)]
pub struct Seen {
    /// The JSON-RPC method.
    pub method: String,
    /// The JSON-RPC id (`Null` for a notification); its `Display` is the raw id text.
    pub id: Value,
    /// The params.
    pub params: Value,
    /// The request headers.
    pub headers: http::HeaderMap,
    /// The raw body.
    pub body: String,
}

impl Seen {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `params.name` (the tool or prompt), or "".
    pub fn tool(&self) -> &str {
        self.params["name"].as_str().unwrap_or("")
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

const MEMBERS: [&str; 4] = ["tools", "prompts", "resources", "resourceTemplates"];

fn list_index(method: &str) -> Option<usize> {
    [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ]
    .iter()
    .position(|m| *m == method)
}

/// What the mock serves.
pub struct Spec {
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
    v.as_array()
        .map(|a| a.iter().map(Value::to_string).collect())
        .unwrap_or_default()
}

impl Spec {
    /// Tools (`echo`), prompts (`greet`), resources (`mock://<server>/doc`, template
    /// `mock://<server>/items/{id}`), all lists with `ttlMs` 60000, `public` and the server's
    /// `_meta`; every routed method answered ("<server> ran <tool>"…).
    pub fn new(server: &str) -> Self {
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
    pub fn raw(server: &str) -> Self {
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
    pub fn caps(mut self, c: Value) -> Self {
        self.capabilities = Some(c);
        self
    }

    /// Instructions in discover.
    pub fn instructions(mut self, i: &str) -> Self {
        self.instructions = Some(i.to_owned());
        self
    }

    /// Discover's `ttlMs` and `cacheScope`.
    pub fn discover_hints(mut self, ttl: u64, scope: &'static str) -> Self {
        self.discover_hints = (ttl, scope);
        self
    }

    /// One more member of the discover result.
    pub fn discover_member(mut self, k: &str, v: Value) -> Self {
        self.discover_members.insert(k.to_owned(), v);
        self
    }

    /// Answers `server/discover` with this instead (`{id}` in JSON text stands for the id).
    pub fn discover(mut self, r: Reply) -> Self {
        self.discover = Some(r);
        self
    }

    /// Raw tool descriptors.
    pub fn tools(mut self, raw: Vec<String>) -> Self {
        self.lists[0] = raw;
        self
    }

    /// Tool descriptors as a JSON array.
    pub fn tools_json(self, t: Value) -> Self {
        self.tools(items(&t))
    }

    /// Raw prompt descriptors.
    pub fn prompts(mut self, raw: Vec<String>) -> Self {
        self.lists[1] = raw;
        self
    }

    /// Prompt descriptors as a JSON array; a [`Spec::raw`] mock then also declares `prompts`
    /// and `completions`.
    pub fn prompts_json(mut self, p: Value) -> Self {
        self.has_prompts = true;
        self.prompts(items(&p))
    }

    /// Raw resource descriptors.
    pub fn resources(mut self, raw: Vec<String>) -> Self {
        self.lists[2] = raw;
        self
    }

    /// Resource descriptors as a JSON array.
    pub fn resources_json(self, r: Value) -> Self {
        self.resources(items(&r))
    }

    /// Raw resource template descriptors.
    pub fn templates(mut self, raw: Vec<String>) -> Self {
        self.lists[3] = raw;
        self
    }

    /// Resource template descriptors as a JSON array.
    pub fn templates_json(self, t: Value) -> Self {
        self.templates(items(&t))
    }

    /// List `ttlMs` and `cacheScope`; `None` sends neither, nor `resultType`.
    pub fn hints(mut self, h: Option<(u64, &'static str)>) -> Self {
        self.hints = h;
        self
    }

    /// Whether lists carry the server's `_meta`.
    pub fn list_meta(mut self, on: bool) -> Self {
        self.list_meta = on;
        self
    }

    /// The version in the server's info.
    pub fn version(mut self, v: &'static str) -> Self {
        self.version = v;
        self
    }

    /// Serves lists in pages of `n` items with `nextCursor`.
    pub fn page(mut self, n: usize) -> Self {
        self.page = Some(n);
        self
    }

    /// Called with every request as it arrives (notifications too), before any answer.
    pub fn observe(mut self, f: impl Fn(&Seen) + Send + Sync + 'static) -> Self {
        self.observe = Some(Arc::new(f));
        self
    }

    /// A handler tried before everything else; `None` falls through.
    pub fn on(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Self {
        self.on = Some(Arc::new(f));
        self
    }

    /// A handler for what discover, the lists and listen leave; `None` falls through to the
    /// default answers ([`Spec::new`]) or -32601.
    pub fn fallback(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }

    /// Binds 127.0.0.1:0 and serves until the [`Mock`] is dropped.
    pub async fn start(self) -> Mock {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the mock upstream");
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
                    let svc = hyper::service::service_fn(move |req| serve::handle(st.clone(), req));
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
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
pub async fn start(
    server: &str,
    tools: Value,
    resources: Value,
    handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
) -> Mock {
    Spec::raw(server)
        .caps(json!({"tools": {}, "resources": {}}))
        .list_meta(true)
        .tools_json(tools)
        .resources_json(resources)
        .fallback(move |s| Some(handler(s)))
        .start()
        .await
}

/// A running mock upstream; stops when dropped.
pub struct Mock {
    /// Its address.
    pub addr: SocketAddr,
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
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Requests received with `method`, in order.
    pub fn seen(&self, method: &str) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .map(|s| s.iter().filter(|x| x.method == method).cloned().collect())
            .unwrap_or_default()
    }

    /// How many requests with `method` arrived.
    pub fn count(&self, method: &str) -> usize {
        self.seen(method).len()
    }

    /// The last request with `method`.
    pub fn last(&self, method: &str) -> Seen {
        self.seen(method)
            .pop()
            .unwrap_or_else(|| panic!("the mock saw no {method}"))
    }

    /// How many `tools/call`s of `tool` it received.
    pub fn calls(&self, tool: &str) -> usize {
        self.seen("tools/call")
            .iter()
            .filter(|s| s.tool() == tool)
            .count()
    }

    /// Replaces the tool list.
    pub fn set_tools(&self, raw: Vec<String>) {
        if let Ok(mut s) = self.state.spec.lock() {
            s.lists[0] = raw;
        }
    }

    /// Replaces the prompt list.
    pub fn set_prompts(&self, raw: Vec<String>) {
        if let Ok(mut s) = self.state.spec.lock() {
            s.lists[1] = raw;
        }
    }

    /// Sends `msg` on every open listen stream.
    pub fn notify(&self, msg: Value) {
        let _ = self.state.notes.send(Note::Raw(ev(&msg)));
    }

    /// Sends the notification `method` (e.g. `notifications/tools/list_changed`) on every open
    /// listen stream, with that stream's subscription id.
    pub fn notify_method(&self, method: &str) {
        let _ = self.state.notes.send(Note::Method(method.to_owned()));
    }

    /// Listen streams currently open.
    pub fn listens_open(&self) -> usize {
        *self.state.listening.borrow()
    }

    /// Non-listen SSE answers whose body was dropped (finished or cancelled).
    pub fn streams_closed(&self) -> usize {
        self.state.streams_closed.load(Ordering::SeqCst)
    }

    /// Waits until Sluice holds a listen stream open.
    pub async fn wait_listen(&self) {
        self.listening(1).await;
    }

    /// Waits (at most [`WAIT`]) until at least `n` listen streams are open to it.
    pub async fn listening(&self, n: usize) {
        let mut rx = self.state.listening.subscribe();
        let name = self
            .state
            .spec
            .lock()
            .map(|s| s.server.clone())
            .unwrap_or_default();
        tokio::time::timeout(WAIT, rx.wait_for(|open| *open >= n))
            .await
            .unwrap_or_else(|_| {
                panic!("fewer than {n} listen streams opened to upstream {name} within {WAIT:?}")
            })
            .expect("listen counter");
    }

    /// Waits (at most [`WAIT`]) until `cond` holds of the mock: woken by each request it
    /// records, each SSE answer that closes and each listen stream that opens or closes.
    pub async fn until(&self, what: &str, cond: impl Fn(&Mock) -> bool) {
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
    pub fn stop(&self) {
        self.stop.cancel();
    }
}
