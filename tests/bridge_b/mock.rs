//! A small 2026-07-28 upstream over real HTTP (hyper, 127.0.0.1 port 0) for the wire-level and
//! governance tests: it answers `server/discover` and `tools/list`, and three tools:
//!
//! - `echo(text)`: completes at once with the text (and a `resultType` Sluice must strip for a
//!   legacy client).
//! - `forever(topic)`: always answers `input_required` with one sampling request (input key
//!   `llm`), whatever the retry carries: a loop bomb only the round cap ends.
//! - `hang(tag)`: opens an SSE answer and never finishes it; notes `start <tag>` and, when
//!   Sluice drops the connection (the request was cancelled), `closed <tag>`.
//!
//! Every event is appended to a list the test reads (`events`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// A running mock upstream.
pub(crate) struct Mock {
    addr: SocketAddr,
    events: Arc<Mutex<Vec<String>>>,
    stop: tokio_util::sync::CancellationToken,
}

impl Mock {
    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// What it saw so far.
    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// How many events equal `event`.
    pub(crate) fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| *e == event).count()
    }

    /// Waits (at most 2 s) until it saw `event`; fails the test otherwise.
    pub(crate) async fn wait_event(&self, event: &str) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.count(event) == 0 {
            assert!(Instant::now() < deadline, "the mock upstream did not see {event:?} within 2 s; it saw {:?}", self.events());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts the mock on 127.0.0.1 port 0.
pub(crate) async fn start() -> Mock {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("bind the mock upstream");
    let addr = listener.local_addr().expect("mock address");
    let events = Arc::new(Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let (ev, st) = (events.clone(), stop.clone());
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = st.cancelled() => return,
                a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
            };
            let ev = ev.clone();
            let st = st.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| handle(req, ev.clone()));
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                tokio::select! { _ = conn => {}, _ = st.cancelled() => {} }
            });
        }
    });
    Mock { addr, events, stop }
}

fn json_reply(status: u16, body: Value) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("mock response")
}

fn ok(id: &Value, result: Value) -> hyper::Response<Body> {
    json_reply(200, json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn server_meta() -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": "bridge-b-mock", "version": "1.0.0"}})
}

fn tool(name: &str, arg: &str) -> Value {
    json!({"name": name, "description": format!("the {name} tool"),
        "inputSchema": {"type": "object", "properties": {arg: {"type": "string"}}}})
}

/// Notes `closed <tag>` when Sluice drops the stream it was given.
struct OnDrop(Arc<Mutex<Vec<String>>>, String);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Ok(mut e) = self.0.lock() {
            e.push(format!("closed {}", self.1));
        }
    }
}

async fn handle(req: hyper::Request<hyper::body::Incoming>, events: Arc<Mutex<Vec<String>>>) -> Result<hyper::Response<Body>, Infallible> {
    if req.method() != hyper::Method::POST {
        return Ok(hyper::Response::builder().status(405).body(Full::new(Bytes::new()).boxed()).expect("405"));
    }
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = msg["id"].clone();
    let p = &msg["params"];
    let note = |e: String| events.lock().unwrap().push(e);
    let method = msg["method"].as_str().unwrap_or("").to_owned();
    note(format!("{method} {}", p["name"].as_str().unwrap_or("")).trim_end().to_owned());
    let reply = match method.as_str() {
        "server/discover" => ok(
            &id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "bridge-b-mock", "version": "1.0.0"}, "ttlMs": 60000, "cacheScope": "public", "_meta": server_meta()}),
        ),
        "tools/list" => ok(
            &id,
            json!({"tools": [tool("echo", "text"), tool("forever", "topic"), tool("hang", "tag")],
                "resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "_meta": server_meta()}),
        ),
        "tools/call" => match p["name"].as_str() {
            Some("echo") => ok(
                &id,
                json!({"resultType": "complete", "content": [{"type": "text", "text": p["arguments"]["text"]}], "_meta": server_meta()}),
            ),
            Some("forever") => {
                let answered = p["inputResponses"].as_object().map_or(0, |r| r.len());
                note(format!("forever answered {answered}"));
                ok(
                    &id,
                    json!({"resultType": "input_required", "requestState": "mock-state",
                        "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {
                            "messages": [{"role": "user", "content": {"type": "text", "text": format!("one more idea about {}", p["arguments"]["topic"].as_str().unwrap_or("?"))}}],
                            "maxTokens": 16}}},
                        "_meta": server_meta()}),
                )
            }
            Some("hang") => {
                let tag = p["arguments"]["tag"].as_str().unwrap_or("").to_owned();
                note(format!("start {tag}"));
                let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
                let guard = OnDrop(events.clone(), tag);
                // Hold the sender until the receiver (the response body) is dropped.
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(Bytes::from_static(b": working\n\n")))).await;
                    tx.closed().await;
                    drop(guard);
                });
                let stream = tokio_stream_from(rx);
                hyper::Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream")
                    .body(BodyExt::boxed(StreamBody::new(stream)))
                    .expect("sse response")
            }
            _ => json_reply(200, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool"}})),
        },
        _ => json_reply(404, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})),
    };
    Ok(reply)
}

/// An mpsc receiver as a stream of body frames.
fn tokio_stream_from(
    mut rx: mpsc::Receiver<Result<Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
