//! A hostile 2026-07-28 upstream over real HTTP (127.0.0.1 port 0) whose answers a test writes
//! as raw bytes: escaped or repeated keys, odd numbers (`1e6`), SSE bodies cut into chunks of any
//! size. It answers `server/discover` and the four lists from the JSON it is given, keeps
//! `subscriptions/listen` streams open (sending a list-changed notification when the test asks),
//! and records every request (headers, raw body) for assertions.
//!
//! ```ignore
//! let up = Spec::new("alpha").tools(json!([tool("ask", &[])])).on(|s| match s.tool() {
//!     "ask" => Some(result(&s.id, r#"{"resultType":"input\u005frequired", ...}"#)),
//!     _ => None,
//! }).start().await;
//! assert_eq!(up.calls("ask"), 1);
//! ```

#![allow(dead_code)] // each test uses part of it

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// A request the upstream received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The JSON-RPC method.
    pub(crate) method: String,
    /// The JSON-RPC id as raw JSON text (`"null"` for a notification).
    pub(crate) id: String,
    /// The params, parsed.
    pub(crate) params: Value,
    /// The raw body.
    pub(crate) body: String,
    /// The request headers.
    pub(crate) headers: http::HeaderMap,
}

impl Seen {
    /// A header's value.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `params.name` (the tool or prompt), or "".
    pub(crate) fn tool(&self) -> &str {
        self.params["name"].as_str().unwrap_or("")
    }
}

/// What the upstream answers.
pub(crate) enum Reply {
    /// A raw JSON body, HTTP 200.
    Json(String),
    /// Raw bytes with a status and content type.
    Raw(u16, &'static str, Bytes),
    /// An SSE answer: these body chunks, in order, one HTTP chunk each.
    Chunks(Vec<Bytes>),
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<raw>}` as written, no re-encoding.
pub(crate) fn result(id: &str, raw: &str) -> Reply {
    Reply::Json(result_text(id, raw))
}

/// The text of a JSON-RPC result message.
pub(crate) fn result_text(id: &str, raw: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{raw}}}"#)
}

/// A JSON-RPC error answer, HTTP 200.
pub(crate) fn error(id: &str, code: i64, message: &str) -> Reply {
    Reply::Json(json!({"jsonrpc": "2.0", "id": serde_json::from_str::<Value>(id).unwrap_or(Value::Null), "error": {"code": code, "message": message}}).to_string())
}

/// One SSE event carrying `data` on one line.
pub(crate) fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// `bytes` cut into chunks of `size` bytes (the last may be shorter).
pub(crate) fn chunks(bytes: &[u8], size: usize) -> Vec<Bytes> {
    bytes.chunks(size.max(1)).map(Bytes::copy_from_slice).collect()
}

/// A tool descriptor with string arguments.
pub(crate) fn tool(name: &str, args: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = args.iter().map(|a| ((*a).to_owned(), json!({"type": "string"}))).collect();
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object", "properties": props}})
}

/// A tool descriptor marked destructive.
pub(crate) fn destructive(name: &str) -> Value {
    let mut t = tool(name, &[]);
    t["annotations"] = json!({"destructiveHint": true});
    t
}

type Handler = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

/// What the upstream serves.
pub(crate) struct Spec {
    name: String,
    tools: Value,
    resources: Value,
    templates: Value,
    prompts: Option<Value>,
    discover: Option<Reply>,
    handler: Handler,
}

impl Spec {
    /// An upstream named `name` serving no tools, resources or prompts; every other request
    /// gets -32601.
    pub(crate) fn new(name: &str) -> Spec {
        Spec {
            name: name.to_owned(),
            tools: json!([]),
            resources: json!([]),
            templates: json!([]),
            prompts: None,
            discover: None,
            handler: Arc::new(|_| None),
        }
    }

    /// Its tools (descriptors).
    pub(crate) fn tools(mut self, t: Value) -> Spec {
        self.tools = t;
        self
    }

    /// Its resources (descriptors).
    pub(crate) fn resources(mut self, r: Value) -> Spec {
        self.resources = r;
        self
    }

    /// Its resource templates (descriptors).
    pub(crate) fn templates(mut self, t: Value) -> Spec {
        self.templates = t;
        self
    }

    /// Its prompts: it then also declares `prompts` and `completions`.
    pub(crate) fn prompts(mut self, p: Value) -> Spec {
        self.prompts = Some(p);
        self
    }

    /// Answers `server/discover` with this instead (e.g. an error naming something unique).
    pub(crate) fn discover(mut self, r: Reply) -> Spec {
        self.discover = Some(r);
        self
    }

    /// Answers every other request (`None`: -32601).
    pub(crate) fn on(mut self, f: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> Spec {
        self.handler = Arc::new(f);
        self
    }

    /// Serves on 127.0.0.1 port 0 until the returned [`Upstream`] is dropped.
    pub(crate) async fn start(self) -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the hostile upstream");
        let addr = listener.local_addr().expect("its address");
        let (notes, _) = broadcast::channel(64);
        let shared =
            Arc::new(Shared { spec: self, seen: Mutex::new(Vec::new()), notes: notes.clone(), listening: watch::channel(0usize).0 });
        let stop = CancellationToken::new();
        let (token, s) = (stop.clone(), shared.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
                };
                let (s, token) = (s.clone(), token.clone());
                tokio::spawn(async move {
                    let t = token.clone();
                    let svc = service_fn(move |req| {
                        let (s, t) = (s.clone(), t.clone());
                        async move { Ok::<_, Infallible>(serve(req, &s, t).await) }
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
                });
            }
        });
        Upstream { addr, shared, stop }
    }
}

struct Shared {
    spec: Spec,
    seen: Mutex<Vec<Seen>>,
    notes: broadcast::Sender<String>,
    listening: watch::Sender<usize>,
}

/// A running hostile upstream; stops when dropped.
pub(crate) struct Upstream {
    /// Its address.
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Upstream {
    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request of `method` it received, in order.
    pub(crate) fn seen(&self, method: &str) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().iter().filter(|s| s.method == method).cloned().collect()
    }

    /// How many `tools/call`s of `tool` it received.
    pub(crate) fn calls(&self, tool: &str) -> usize {
        self.shared.seen.lock().unwrap().iter().filter(|s| s.method == "tools/call" && s.tool() == tool).count()
    }

    /// Waits (at most 10 s) until at least `n` listen streams are open to it.
    pub(crate) async fn listening(&self, n: usize) {
        let mut rx = self.shared.listening.subscribe();
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.wait_for(|open| *open >= n))
            .await
            .unwrap_or_else(|_| panic!("fewer than {n} listen streams opened to upstream {} within 10 s", self.shared.spec.name))
            .expect("listen counter");
    }

    /// Sends the notification `method` (e.g. `notifications/tools/list_changed`) on every open
    /// listen stream.
    pub(crate) fn notify(&self, method: &str) {
        let _ = self.shared.notes.send(method.to_owned());
    }
}

fn reply(status: u16, content_type: &'static str, body: Bytes) -> http::Response<Body> {
    http::Response::builder().status(status).header("content-type", content_type).body(Full::new(body).boxed()).expect("a response")
}

fn answer(r: Reply) -> http::Response<Body> {
    match r {
        Reply::Json(text) => reply(200, "application/json", Bytes::from(text)),
        Reply::Raw(status, ct, bytes) => reply(status, ct, bytes),
        Reply::Chunks(chunks) => {
            let frames = futures_util::stream::iter(chunks.into_iter().map(|b| Ok::<_, Infallible>(Frame::data(b))));
            http::Response::builder()
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(frames).boxed())
                .expect("an SSE response")
        }
    }
}

fn list(kind: &str, items: &Value) -> String {
    format!(r#"{{"resultType":"complete","{kind}":{items},"ttlMs":60000,"cacheScope":"public"}}"#)
}

async fn serve(req: http::Request<hyper::body::Incoming>, s: &Arc<Shared>, stop: CancellationToken) -> http::Response<Body> {
    let (parts, body) = req.into_parts();
    if parts.method != http::Method::POST {
        return reply(405, "text/plain", Bytes::new());
    }
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let text = String::from_utf8_lossy(&body).into_owned();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let seen = Seen {
        method: msg["method"].as_str().unwrap_or("").to_owned(),
        id: msg.get("id").map_or("null".to_owned(), Value::to_string),
        params: msg.get("params").cloned().unwrap_or(Value::Null),
        body: text,
        headers: parts.headers,
    };
    s.seen.lock().unwrap().push(seen.clone());
    if msg.get("id").is_none() {
        return reply(202, "application/json", Bytes::new());
    }
    let spec = &s.spec;
    let id = seen.id.as_str();
    match seen.method.as_str() {
        "server/discover" => {
            if let Some(r) = &spec.discover {
                return answer(match r {
                    Reply::Json(t) => Reply::Json(t.replace("{id}", id)),
                    Reply::Raw(st, ct, b) => Reply::Raw(*st, *ct, b.clone()),
                    Reply::Chunks(c) => Reply::Chunks(c.clone()),
                });
            }
            let mut caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}});
            if spec.prompts.is_some() {
                caps["prompts"] = json!({"listChanged": true});
                caps["completions"] = json!({});
            }
            let r = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": caps,
                "ttlMs": 60000, "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": spec.name, "version": "1.0.0"}}});
            return answer(result(id, &r.to_string()));
        }
        "tools/list" => return answer(result(id, &list("tools", &spec.tools))),
        "resources/list" => return answer(result(id, &list("resources", &spec.resources))),
        "resources/templates/list" => return answer(result(id, &list("resourceTemplates", &spec.templates))),
        "prompts/list" => return answer(result(id, &list("prompts", spec.prompts.as_ref().unwrap_or(&json!([]))))),
        "subscriptions/listen" => return listen(s, &seen, stop),
        _ => {}
    }
    match (spec.handler)(&seen) {
        Some(r) => answer(r),
        None => reply(
            404,
            "application/json",
            Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"method not found"}}}}"#)),
        ),
    }
}

/// A listen stream: the acknowledgement, then each notification the test sends, until Sluice
/// closes it or the upstream stops.
fn listen(s: &Arc<Shared>, seen: &Seen, stop: CancellationToken) -> http::Response<Body> {
    let id = seen.id.clone();
    let filter = seen.params.get("notifications").cloned().unwrap_or(json!({}));
    let ack = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{id}}},"notifications":{filter}}}}}"#
    );
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    let mut notes = s.notes.subscribe();
    let counter = s.clone();
    tokio::spawn(async move {
        if tx.send(Ok(Frame::data(Bytes::from(event(&ack))))).await.is_err() {
            return;
        }
        counter.listening.send_modify(|n| *n += 1);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tx.closed() => break,
                n = notes.recv() => {
                    let Ok(method) = n else { break };
                    let msg = format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{id}}}}}}}"#);
                    if tx.send(Ok(Frame::data(Bytes::from(event(&msg))))).await.is_err() {
                        break;
                    }
                }
            }
        }
        counter.listening.send_modify(|n| *n -= 1);
    });
    let frames = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    http::Response::builder().header("content-type", "text/event-stream").body(StreamBody::new(frames).boxed()).expect("a listen stream")
}
