//! A small 2026-07-28 MCP server over real HTTP, for the demo, the tests and the benchmark.
//!
//! Takes stateless MCP POSTs; gives `server/discover`, tools (`echo`, `add`, `ask` with an
//! `input_required` round, `progress` streaming progress over SSE, `locate` with an
//! `x-mcp-header` argument, and `delete_branch`, annotated `destructiveHint`, over a small
//! in-memory list of branches), a prompt, a resource and a template, and `subscriptions/listen`.
//! Answers from memory. Refuses requests without the `_meta` envelope (`-32602`) and unknown
//! methods (`-32601`, 404), like a real modern server; `delete_branch` of a branch it lacks is a
//! tool error. Every demo upstream keeps a tally of what it saw ([`Seen`]) for the walkthrough.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};

use crate::Body;
use sluice_mcp::method::Method;

/// The branches `delete_branch` can delete, at start.
pub const BRANCHES: &[&str] = &["main", "release-0.3", "old-parser"];

/// What a demo upstream saw, counted by event (`call delete_branch`, `ask loop_forever`,
/// `cancelled loop_forever`, …), so that the walkthrough can check what reached it.
#[derive(Debug, Default)]
pub struct Seen {
    counts: Mutex<HashMap<String, usize>>,
}

impl Seen {
    /// Counts one `event`.
    pub fn note(&self, event: &str) {
        if let Ok(mut m) = self.counts.lock() {
            *m.entry(event.to_owned()).or_default() += 1;
        }
    }

    /// How many times `event` was seen.
    pub fn count(&self, event: &str) -> usize {
        self.counts
            .lock()
            .map(|m| m.get(event).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

/// A running demo upstream.
pub struct DemoUpstream {
    /// Its address.
    pub addr: SocketAddr,
    /// What it saw.
    pub seen: Arc<Seen>,
    stop: tokio_util::sync::CancellationToken,
}

impl DemoUpstream {
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops accepting and closes its connections.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for DemoUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts a demo upstream named `name` on `addr` (port 0 for any).
pub async fn start(name: &'static str, addr: SocketAddr) -> std::io::Result<DemoUpstream> {
    let seen = Arc::<Seen>::default();
    let demo = Arc::new(Demo {
        name,
        seen: seen.clone(),
        branches: Mutex::new(BRANCHES.iter().map(|b| (*b).to_owned()).collect()),
    });
    serve(addr, seen, move |req| handle(demo.clone(), req)).await
}

/// One modern demo upstream's state.
struct Demo {
    name: &'static str,
    seen: Arc<Seen>,
    branches: Mutex<Vec<String>>,
}

/// Serves `handler` over HTTP/1.1 and HTTP/2 on `addr` until the returned upstream is stopped;
/// `seen` is the tally the handler keeps.
pub(super) async fn serve<F, Fut>(
    addr: SocketAddr,
    seen: Arc<Seen>,
    handler: F,
) -> std::io::Result<DemoUpstream>
where
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
            };
            let _ = stream.set_nodelay(true);
            let (token, handler) = (token.clone(), handler.clone());
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handler));
                tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
            });
        }
    });
    Ok(DemoUpstream { addr, seen, stop })
}

fn tools() -> Value {
    json!([
        {"name": "echo", "description": "Echo the text back", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Add two integers", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
        {"name": "ask", "description": "Ask the user a question (one input_required round)", "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
        {"name": "progress", "description": "Report progress three times, then finish", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "locate", "description": "Answer with the region (mirrored in Mcp-Param-Region)", "inputSchema": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}},
        {"name": "delete_branch", "description": "Delete a branch (it cannot be undone)", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
         "annotations": {"destructiveHint": true}},
    ])
}

pub(super) fn json_reply(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_default()
}

fn result(id: &Value, name: &str, mut r: Value) -> Response<Body> {
    r["resultType"] = r
        .get("resultType")
        .cloned()
        .unwrap_or_else(|| "complete".into());
    r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": name, "version": "1.0.0"}});
    json_reply(
        StatusCode::OK,
        json!({"jsonrpc": "2.0", "id": id, "result": r}),
    )
}

fn error(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<Body> {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json_reply(status, json!({"jsonrpc": "2.0", "id": id, "error": e}))
}

async fn handle(
    demo: Arc<Demo>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    if req.method() != http::Method::POST {
        return Ok(Response::builder()
            .status(405)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap_or_default());
    }
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32700,
            "parse error",
            None,
        ));
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &id,
            -32600,
            "invalid request",
            None,
        ));
    };
    if id.is_null() {
        return Ok(Response::builder()
            .status(202)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap_or_default());
    }
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    if params
        .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_none()
    {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &id,
            -32602,
            "missing _meta",
            None,
        ));
    }
    Ok(match Method::parse(method) {
        Method::ToolsCall => call(&demo, &id, &params).await,
        Method::SubscriptionsListen => listen(&id, &params),
        m => answer(demo.name, &id, &m, &params),
    })
}

/// The answers from memory: discovery, the lists, a prompt and a resource read.
fn answer(name: &str, id: &Value, method: &Method, params: &Value) -> Response<Body> {
    let listed = |member: &str, items: Value| {
        result(
            id,
            name,
            json!({member: items, "ttlMs": 60000, "cacheScope": "public"}),
        )
    };
    match method {
        Method::ServerDiscover => result(
            id,
            name,
            json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}},
            "instructions": format!("The {name} demo server: echo, add, ask, progress, locate, delete_branch."),
            "ttlMs": 60000, "cacheScope": "public"}),
        ),
        Method::ToolsList => listed("tools", tools()),
        Method::PromptsList => listed(
            "prompts",
            json!([{"name": "greet", "description": "Greet someone", "arguments": [{"name": "who", "required": true}]}]),
        ),
        Method::PromptsGet => {
            let who = params
                .pointer("/arguments/who")
                .and_then(Value::as_str)
                .unwrap_or("you");
            result(
                id,
                name,
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {who}!")}}]}),
            )
        }
        Method::ResourcesList => listed(
            "resources",
            json!([{"uri": format!("demo://{name}/readme"), "name": "readme", "mimeType": "text/plain"}]),
        ),
        Method::ResourcesTemplatesList => listed(
            "resourceTemplates",
            json!([{"uriTemplate": format!("demo://{name}/items/{{id}}"), "name": "item"}]),
        ),
        Method::ResourcesRead => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
            if uri == format!("demo://{name}/readme")
                || uri.starts_with(&format!("demo://{name}/items/"))
            {
                result(
                    id,
                    name,
                    json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": format!("{name}: {uri}")}], "ttlMs": 1000, "cacheScope": "public"}),
                )
            } else {
                error(
                    StatusCode::OK,
                    id,
                    -32602,
                    "resource not found",
                    Some(json!({"uri": uri})),
                )
            }
        }
        _ => error(StatusCode::NOT_FOUND, id, -32601, "method not found", None),
    }
}

fn text(t: String) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

async fn call(demo: &Demo, id: &Value, params: &Value) -> Response<Body> {
    let name = demo.name;
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    let tool = params.get("name").and_then(Value::as_str).unwrap_or("");
    demo.seen.note(&format!("call {tool}"));
    match tool {
        "echo" => result(
            id,
            name,
            text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
        ),
        "add" => {
            let sum = args.get("a").and_then(Value::as_i64).unwrap_or(0)
                + args.get("b").and_then(Value::as_i64).unwrap_or(0);
            result(id, name, text(sum.to_string()))
        }
        "locate" => result(
            id,
            name,
            text(format!(
                "region={}",
                args.get("region").and_then(Value::as_str).unwrap_or("none")
            )),
        ),
        "ask" => ask(name, id, params, &args),
        "progress" => progress(id, params),
        "delete_branch" => delete_branch(demo, id, &args),
        _ => result(
            id,
            name,
            json!({"content": [{"type": "text", "text": "unknown tool"}], "isError": true}),
        ),
    }
}

/// `ask`: one `input_required` round (an elicitation), then the answer echoed.
fn ask(name: &str, id: &Value, params: &Value, args: &Value) -> Response<Body> {
    match params.pointer("/inputResponses/answer") {
        None => result(
            id,
            name,
            json!({
            "resultType": "input_required",
            "inputRequests": {"answer": {"method": Method::ElicitationCreate.as_str(), "params": {"mode": "form",
                "message": args.get("question").and_then(Value::as_str).unwrap_or("?"),
                "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}},
            "requestState": "demo-round-1"}),
        ),
        Some(resp) => {
            let state_ok =
                params.get("requestState").and_then(Value::as_str) == Some("demo-round-1");
            let answer = resp
                .pointer("/content/answer")
                .and_then(Value::as_str)
                .unwrap_or("(declined)");
            if state_ok {
                result(id, name, text(format!("you answered: {answer}")))
            } else {
                error(
                    StatusCode::BAD_REQUEST,
                    id,
                    -32602,
                    "bad requestState",
                    None,
                )
            }
        }
    }
}

/// `progress`: three progress notifications (when the call has a token), then the result, as SSE.
fn progress(id: &Value, params: &Value) -> Response<Body> {
    let token = params.pointer("/_meta/progressToken").cloned();
    let mut frames = String::new();
    if let Some(t) = token {
        for i in 1..=3 {
            let n = json!({"jsonrpc": "2.0", "method": Method::Progress.as_str(), "params": {"progressToken": t, "progress": i, "total": 3}});
            frames.push_str(&format!("id: {i}\ndata: {n}\n\n"));
        }
    }
    let done = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}});
    frames.push_str(&format!("data: {done}\n\n"));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Full::new(Bytes::from(frames)).boxed())
        .unwrap_or_default()
}

/// `delete_branch`: removes the branch, or a tool error when there is none of that name.
fn delete_branch(demo: &Demo, id: &Value, args: &Value) -> Response<Body> {
    let name = demo.name;
    let branch = args.get("name").and_then(Value::as_str).unwrap_or("");
    let Ok(mut branches) = demo.branches.lock() else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            -32603,
            "internal error",
            None,
        );
    };
    match branches.iter().position(|b| b == branch) {
        Some(i) => {
            branches.remove(i);
            result(
                id,
                name,
                text(format!(
                    "deleted branch {branch:?}; branches left: {}",
                    branches.join(", ")
                )),
            )
        }
        None => result(
            id,
            name,
            json!({"content": [{"type": "text", "text": format!("no branch {branch:?}; branches: {}", branches.join(", "))}], "isError": true}),
        ),
    }
}

fn listen(id: &Value, params: &Value) -> Response<Body> {
    let ack = json!({"jsonrpc": "2.0", "method": Method::SubscriptionsAcknowledged.as_str(),
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": params.get("notifications").cloned().unwrap_or(json!({}))}});
    let first = futures_util::stream::once(async move {
        Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(format!(
            "data: {ack}\n\n"
        ))))
    });
    let body = http_body_util::StreamBody::new(futures_util::StreamExt::chain(
        first,
        futures_util::stream::pending(),
    ));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body.boxed())
        .unwrap_or_default()
}
