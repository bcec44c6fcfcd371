//! A mock 2026-07-28 upstream over real HTTP for the audit, hardening and canary tests: answers
//! `server/discover` and the lists from what it is given, and every other request through a
//! per-test handler (a JSON answer, raw bytes, or a hang).

#![allow(dead_code)] // each test binary uses part of it

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// A request the mock received.
pub(crate) struct Req {
    pub(crate) method: String,
    pub(crate) id: Value,
    pub(crate) params: Value,
    pub(crate) headers: http::HeaderMap,
}

/// What the handler answers.
pub(crate) enum Answer {
    /// A JSON-RPC result for the request's id.
    Result(Value),
    /// A JSON-RPC error for the request's id, with an HTTP status.
    Error(u16, i64, &'static str),
    /// Raw bytes with an HTTP status and content type.
    Raw(u16, &'static str, Bytes),
    /// Never answers (until the mock stops).
    Hang,
    /// The result after a pause.
    After(std::time::Duration, Value),
    /// The result once the gate reads `true`.
    Gate(tokio::sync::watch::Receiver<bool>, Value),
    /// An SSE stream of JSON-RPC messages, each after its pause (the request's id is not
    /// filled in: write it into the messages).
    Stream(Vec<(std::time::Duration, Value)>),
}

type Handler = Arc<dyn Fn(&Req) -> Answer + Send + Sync>;

/// A running mock upstream; stops when dropped.
pub(crate) struct Mock {
    pub(crate) addr: SocketAddr,
    stop: CancellationToken,
}

impl Mock {
    /// Its MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts a mock named `server` listing `tools`, `resources` (descriptors) and answering the
/// rest with `handler`.
pub(crate) async fn start(server: &str, tools: Value, resources: Value, handler: impl Fn(&Req) -> Answer + Send + Sync + 'static) -> Mock {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the mock upstream");
    let addr = listener.local_addr().expect("mock address");
    let stop = CancellationToken::new();
    let token = stop.clone();
    let handler: Handler = Arc::new(handler);
    let server = server.to_owned();
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
            };
            let (token, handler, server, tools, resources) =
                (token.clone(), handler.clone(), server.clone(), tools.clone(), resources.clone());
            tokio::spawn(async move {
                let conn_token = token.clone();
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (handler, server, tools, resources, token) =
                        (handler.clone(), server.clone(), tools.clone(), resources.clone(), token.clone());
                    async move { Ok::<_, Infallible>(serve(req, &server, &tools, &resources, &handler, token).await) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                tokio::select! { _ = conn => {}, _ = conn_token.cancelled() => {} }
            });
        }
    });
    Mock { addr, stop }
}

fn reply(status: u16, content_type: &'static str, body: Bytes) -> http::Response<Body> {
    http::Response::builder().status(status).header("content-type", content_type).body(Full::new(body).boxed()).expect("a response")
}

async fn serve(
    req: http::Request<hyper::body::Incoming>,
    server: &str,
    tools: &Value,
    resources: &Value,
    handler: &Handler,
    stop: CancellationToken,
) -> http::Response<Body> {
    let (parts, body) = req.into_parts();
    if parts.method != http::Method::POST {
        return reply(405, "text/plain", Bytes::new());
    }
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_owned();
    if id.is_null() {
        return reply(202, "application/json", Bytes::new());
    }
    let ok = |result: Value| {
        let mut r = result;
        r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": server, "version": "1.0.0"}});
        reply(200, "application/json", Bytes::from(json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string()))
    };
    match method.as_str() {
        "server/discover" => {
            return ok(json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "resources": {}}, "ttlMs": 60000, "cacheScope": "public"}))
        }
        "tools/list" => return ok(json!({"resultType": "complete", "tools": tools, "ttlMs": 60000, "cacheScope": "public"})),
        "resources/list" => return ok(json!({"resultType": "complete", "resources": resources, "ttlMs": 60000, "cacheScope": "public"})),
        "prompts/list" => return ok(json!({"resultType": "complete", "prompts": [], "ttlMs": 60000, "cacheScope": "public"})),
        "resources/templates/list" => {
            return ok(json!({"resultType": "complete", "resourceTemplates": [], "ttlMs": 60000, "cacheScope": "public"}))
        }
        _ => {}
    }
    let r = Req { method, id: id.clone(), params: msg.get("params").cloned().unwrap_or(Value::Null), headers: parts.headers };
    match handler(&r) {
        Answer::Result(mut res) => {
            if res.get("resultType").is_none() {
                res["resultType"] = json!("complete");
            }
            ok(res)
        }
        Answer::Error(status, code, message) => reply(
            status,
            "application/json",
            Bytes::from(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()),
        ),
        Answer::Raw(status, ct, bytes) => reply(status, ct, bytes),
        Answer::Hang => {
            stop.cancelled().await;
            reply(503, "text/plain", Bytes::new())
        }
        Answer::After(pause, mut res) => {
            tokio::time::sleep(pause).await;
            if res.get("resultType").is_none() {
                res["resultType"] = json!("complete");
            }
            ok(res)
        }
        Answer::Gate(mut gate, mut res) => {
            let _ = gate.wait_for(|open| *open).await;
            if res.get("resultType").is_none() {
                res["resultType"] = json!("complete");
            }
            ok(res)
        }
        Answer::Stream(events) => {
            let frames = futures_util::stream::unfold(events.into_iter(), |mut it| async move {
                let (pause, msg) = it.next()?;
                tokio::time::sleep(pause).await;
                Some((Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(format!("data: {msg}\n\n")))), it))
            });
            http::Response::builder()
                .header("content-type", "text/event-stream")
                .body(http_body_util::StreamBody::new(frames).boxed())
                .expect("a response")
        }
    }
}

/// A tool descriptor with a string-argument schema.
pub(crate) fn tool(name: &str, args: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = args.iter().map(|a| ((*a).to_owned(), json!({"type": "string"}))).collect();
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object", "properties": props}})
}
