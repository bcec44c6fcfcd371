//! The mock 2025-11-25 upstream over real HTTP (127.0.0.1 port 0). It refuses
//! `server/discover` the way a handshake-era server does (HTTP 400, JSON-RPC -32600), so Sluice
//! falls back to `initialize`; it issues an `Mcp-Session-Id` per handshake and records the
//! capabilities each one declared; it keeps the GET stream open, answers DELETE, and answers
//! `tools/call` with an SSE stream scripted step by step: raw messages (server→client requests
//! such as `sampling/createMessage` with any params, and the final result, `{id}` standing for
//! the call's id), and waits for Sluice's POSTed responses to given ids (recorded). A `GET`
//! with `Last-Event-ID` (recorded, as method `GET Last-Event-ID`) gets a primed stream that
//! ends at once; the test sends notifications on the others (`notify`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use crate::modern::Seen;

type Body = BoxBody<Bytes, Infallible>;

/// One step of a scripted `tools/call` answer.
pub enum Step {
    /// An SSE event with this raw message (`{id}` is replaced by the call's JSON-RPC id).
    Send(String),
    /// Waits until Sluice POSTed a response to each of these ids (raw JSON text, e.g. `"7"` or
    /// `"\"ask-1\""`), or closed the stream.
    Await(Vec<String>),
    /// A priming event (SEP-1699): this id, `retry: 0`, no data. Ending the script after it ends
    /// the stream resumably; a `GET` with `Last-Event-ID` then gets another primed stream that
    /// ends at once, for ever (a server that never answers).
    Primed(u64),
}

type Script = Arc<dyn Fn(&Seen) -> Vec<Step> + Send + Sync>;

/// What a test can read back.
#[derive(Default)]
struct Record {
    seen: Mutex<Vec<Seen>>,
    /// The `capabilities` of each `initialize`, in order.
    initializes: Mutex<Vec<Value>>,
    /// Every JSON-RPC response Sluice POSTed (answers to the upstream's asks).
    replies: Mutex<Vec<Value>>,
    replied: Notify,
    sessions: AtomicUsize,
    /// Messages for every open GET stream ([`Legacy::notify`]).
    gets: Mutex<Vec<Sender>>,
    get_opened: Notify,
}

/// A running legacy upstream; stops when dropped.
pub struct Legacy {
    /// Its address.
    pub addr: SocketAddr,
    /// TCP connections it accepted.
    pub accepted: Arc<AtomicUsize>,
    rec: Arc<Record>,
    stop: CancellationToken,
}

impl Drop for Legacy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Legacy {
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The capabilities each `initialize` declared, in order.
    pub fn initializes(&self) -> Vec<Value> {
        self.rec.initializes.lock().unwrap().clone()
    }

    /// Sends `msg` (a notification) on every open GET stream.
    pub fn notify(&self, msg: &Value) {
        let frame = Bytes::from(format!("data: {msg}\n\n"));
        self.rec
            .gets
            .lock()
            .unwrap()
            .retain(|tx| tx.try_send(Ok(Frame::data(frame.clone()))).is_ok());
    }

    /// Waits (at most 10 s) until a GET stream is open.
    pub async fn wait_get(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let opened = self.rec.get_opened.notified();
            if self
                .rec
                .gets
                .lock()
                .unwrap()
                .iter()
                .any(|tx| !tx.is_closed())
            {
                return;
            }
            if tokio::time::timeout_at(deadline, opened).await.is_err() {
                panic!("Sluice opened no GET stream on the legacy upstream within 10 s");
            }
        }
    }

    /// Every response Sluice POSTed to the upstream's asks.
    pub fn replies(&self) -> Vec<Value> {
        self.rec.replies.lock().unwrap().clone()
    }

    /// Every request of `method` it received.
    pub fn seen(&self, method: &str) -> Vec<Seen> {
        self.rec
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.method == method)
            .cloned()
            .collect()
    }

    /// Waits (at most 10 s) until Sluice POSTed at least `n` responses.
    pub async fn wait_replies(&self, n: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.rec.replied.notified();
            let r = self.replies();
            if r.len() >= n {
                return r;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("Sluice POSTed {} responses to the legacy upstream within 10 s, expected {n}: {r:?}", r.len());
            }
        }
    }
}

/// Starts a legacy upstream listing `tools` and answering each `tools/call` with `script`.
pub async fn start(
    tools: Value,
    script: impl Fn(&Seen) -> Vec<Step> + Send + Sync + 'static,
) -> Legacy {
    listen(tools, script, false).await
}

/// The same, speaking HTTP/2 only (prior knowledge), any number of streams at once.
pub async fn start_h2_only(
    tools: Value,
    script: impl Fn(&Seen) -> Vec<Step> + Send + Sync + 'static,
) -> Legacy {
    listen(tools, script, true).await
}

async fn listen(
    tools: Value,
    script: impl Fn(&Seen) -> Vec<Step> + Send + Sync + 'static,
    h2_only: bool,
) -> Legacy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the legacy upstream");
    let addr = listener.local_addr().expect("its address");
    let rec = Arc::new(Record::default());
    let stop = CancellationToken::new();
    let script: Script = Arc::new(script);
    let (r, token) = (rec.clone(), stop.clone());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
            };
            count.fetch_add(1, Ordering::SeqCst);
            let (r, token, tools, script) =
                (r.clone(), token.clone(), tools.clone(), script.clone());
            tokio::spawn(async move {
                let t = token.clone();
                let svc = service_fn(move |req| {
                    let (r, t, tools, script) =
                        (r.clone(), t.clone(), tools.clone(), script.clone());
                    async move { Ok::<_, Infallible>(serve(req, &r, &tools, &script, t).await) }
                });
                let mut builder =
                    hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                if h2_only {
                    builder = builder.http2_only();
                    builder.http2().max_concurrent_streams(None);
                }
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
            });
        }
    });
    Legacy {
        addr,
        accepted,
        rec,
        stop,
    }
}

fn reply(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .expect("a response")
}

fn ok(id: &str, result: &Value) -> http::Response<Body> {
    reply(
        200,
        "application/json",
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
    )
}

type Sender = tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

fn sse(
    rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>,
    session: Option<&str>,
) -> http::Response<Body> {
    let frames =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let mut b = http::Response::builder().header("content-type", "text/event-stream");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(StreamBody::new(frames).boxed())
        .expect("an SSE response")
}

async fn serve(
    req: http::Request<hyper::body::Incoming>,
    rec: &Arc<Record>,
    tools: &Value,
    script: &Script,
    stop: CancellationToken,
) -> http::Response<Body> {
    let (parts, body) = req.into_parts();
    match parts.method {
        http::Method::GET => get(parts.headers, rec, stop),
        http::Method::DELETE => reply(200, "text/plain", Bytes::new()),
        http::Method::POST => post(parts.headers, body, rec, tools, script, stop).await,
        _ => reply(405, "text/plain", Bytes::new()),
    }
}

/// A GET: a resumption (recorded, answered by a primed stream that ends at once) or the
/// standalone stream.
fn get(
    headers: http::HeaderMap,
    rec: &Arc<Record>,
    stop: CancellationToken,
) -> http::Response<Body> {
    match () {
        () if headers.contains_key("last-event-id") => {
            let last = headers["last-event-id"].to_str().unwrap_or("").to_owned();
            let seen = Seen {
                method: "GET Last-Event-ID".into(),
                id: Value::String(last),
                params: Value::Null,
                body: String::new(),
                headers,
            };
            rec.seen.lock().unwrap().push(seen);
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(Ok(Frame::data(Bytes::from_static(
                b"id: 7\nretry: 0\ndata: \n\n",
            ))));
            sse(rx, None)
        }
        () => {
            // The standalone stream: a comment, then open until Sluice or the test ends it; what
            // the test sends with `notify` goes on it.
            let (tx, rx) = tokio::sync::mpsc::channel(8);
            rec.gets.lock().unwrap().push(tx.clone());
            rec.get_opened.notify_waiters();
            tokio::spawn(async move {
                let _ = tx
                    .send(Ok(Frame::data(Bytes::from_static(b": open\n\n"))))
                    .await;
                tokio::select! { _ = tx.closed() => {}, _ = stop.cancelled() => {} }
            });
            sse(rx, None)
        }
    }
}

/// A POST: a response to one of the mock's asks (recorded), a notification, or a request.
async fn post(
    headers: http::HeaderMap,
    body: hyper::body::Incoming,
    rec: &Arc<Record>,
    tools: &Value,
    script: &Script,
    stop: CancellationToken,
) -> http::Response<Body> {
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let seen = Seen {
        method: msg["method"].as_str().unwrap_or("").to_owned(),
        id: msg.get("id").cloned().unwrap_or(Value::Null),
        params: msg.get("params").cloned().unwrap_or(Value::Null),
        body: String::from_utf8_lossy(&body).into_owned(),
        headers,
    };
    rec.seen.lock().unwrap().push(seen.clone());
    if msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some()) {
        rec.replies.lock().unwrap().push(msg);
        rec.replied.notify_waiters();
        return reply(202, "application/json", Bytes::new());
    }
    if msg.get("id").is_none() {
        return reply(202, "application/json", Bytes::new());
    }
    answer(&seen, rec, tools, script, stop)
}

/// The answer to a request.
fn answer(
    seen: &Seen,
    rec: &Arc<Record>,
    tools: &Value,
    script: &Script,
    stop: CancellationToken,
) -> http::Response<Body> {
    let id = seen.id.to_string();
    let id = id.as_str();
    match seen.method.as_str() {
        // A handshake-era server knows no server/discover and has no session for it.
        "server/discover" => reply(
            400,
            "application/json",
            r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: No valid session ID provided"}}"#,
        ),
        "initialize" => {
            rec.initializes
                .lock()
                .unwrap()
                .push(seen.params["capabilities"].clone());
            let n = rec.sessions.fetch_add(1, Ordering::Relaxed);
            let r = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "hostile-legacy", "version": "1.0.0"}});
            let mut resp = ok(id, &r);
            resp.headers_mut().insert(
                "mcp-session-id",
                http::HeaderValue::from_str(&format!("legacy-session-{n}")).expect("a session id"),
            );
            resp
        }
        "ping" => ok(id, &json!({})),
        "tools/list" => ok(id, &json!({"tools": tools})),
        "resources/list" => ok(id, &json!({"resources": []})),
        "resources/templates/list" => ok(id, &json!({"resourceTemplates": []})),
        "prompts/list" => ok(id, &json!({"prompts": []})),
        "tools/call" => {
            let steps = script(seen);
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            let (rec, id) = (rec.clone(), id.to_owned());
            tokio::spawn(async move { run(steps, &id, &tx, &rec, stop).await });
            sse(rx, None)
        }
        _ => reply(
            404,
            "application/json",
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"method not found"}}}}"#
            ),
        ),
    }
}

async fn run(steps: Vec<Step>, id: &str, tx: &Sender, rec: &Record, stop: CancellationToken) {
    for step in steps {
        match step {
            Step::Send(raw) => {
                let data = format!("data: {}\n\n", raw.replace("{id}", id));
                if tx.send(Ok(Frame::data(Bytes::from(data)))).await.is_err() {
                    return;
                }
            }
            Step::Primed(n) => {
                if tx
                    .send(Ok(Frame::data(Bytes::from(format!(
                        "id: {n}\nretry: 0\ndata: \n\n"
                    )))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Step::Await(ids) => loop {
                let notified = rec.replied.notified();
                let answered = {
                    let replies = rec.replies.lock().unwrap();
                    ids.iter().all(|want| {
                        replies.iter().any(|r| {
                            r.get("id").map(Value::to_string).as_deref() == Some(want.as_str())
                        })
                    })
                };
                if answered {
                    break;
                }
                tokio::select! {
                    _ = notified => {}
                    _ = tx.closed() => return,
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(20)) => return,
                }
            },
        }
    }
    // The stream ends once the last step was sent.
}
