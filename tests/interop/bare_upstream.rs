//! A spec-breaking modern upstream: it answers 2026-07-28 requests but leaves out what the spec
//! requires of every result: no `resultType`, no `ttlMs` / `cacheScope` on `server/discover` and
//! `tools/list`, no `serverInfo` in `_meta`.
//!
//! Tools: `shout(text)` (upper-cases) and `count(text)` (characters). Anything else, including
//! `subscriptions/listen`, gets `-32601` with HTTP 404, as a modern server would answer.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// The tools it lists, in order.
pub(crate) const TOOLS: [&str; 2] = ["shout", "count"];

/// A running bare upstream; stops when dropped.
pub(crate) struct BareUpstream {
    pub(crate) addr: SocketAddr,
    stop: CancellationToken,
}

impl BareUpstream {
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for BareUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder().status(status).header("content-type", "application/json").body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    if id.is_null() {
        return Ok(Response::builder().status(202).body(Full::new(Bytes::new())).unwrap());
    }
    let ok = |result: Value| reply(StatusCode::OK, json!({"jsonrpc": "2.0", "id": id, "result": result}));
    let arg = msg.pointer("/params/arguments/text").and_then(Value::as_str).unwrap_or("").to_owned();
    let text = |t: String| ok(json!({"content": [{"type": "text", "text": t}]}));
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    Ok(match msg.get("method").and_then(Value::as_str).unwrap_or("") {
        "server/discover" => ok(json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}})),
        "tools/list" => ok(json!({"tools": [
            {"name": "shout", "description": "Upper-case the text", "inputSchema": schema},
            {"name": "count", "description": "Count the characters", "inputSchema": schema},
        ]})),
        "tools/call" => match msg.pointer("/params/name").and_then(Value::as_str) {
            Some("shout") => text(arg.to_uppercase()),
            Some("count") => text(arg.chars().count().to_string()),
            _ => reply(StatusCode::OK, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool"}})),
        },
        _ => reply(StatusCode::NOT_FOUND, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})),
    })
}

/// Starts it on 127.0.0.1, port 0.
pub(crate) async fn start() -> BareUpstream {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("bare upstream: bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("bare upstream: local address");
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
            };
            let token = token.clone();
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handle));
                tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
            });
        }
    });
    BareUpstream { addr, stop }
}
