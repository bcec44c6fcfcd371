//! A small handshake-era (2025-11-25) MCP server over real HTTP, for the demo and the tests.
//!
//! Takes the 2025-11-25 streamable HTTP wire: `initialize` (answered with an `Mcp-Session-Id`),
//! notifications (202), `ping`, `tools/list`, `tools/call` (answered as an SSE stream that
//! carries its `sampling/createMessage` asks, then the result), the client's responses to those
//! asks POSTed on the session (202), a GET stream per session (kept open and quiet) and DELETE
//! (200, ends the session), and `notifications/cancelled` (which stops the call it names). Gives
//! two tools. `summarize_repo(audience)`, over a small built-in fake repository: it asks the
//! model to pick three representative files (input key `pick_files`, a JSON array), then to
//! summarize them for the audience (`summarize`), and answers with the files and the summary.
//! `loop_forever(topic)`, a loop bomb: it asks the model for one more idea (input key `next`)
//! after every answer, forever, until the call is cancelled or its stream closed. Every ask sent
//! and every call cancelled is counted in the upstream's [`Seen`]. Refuses like the legacy SDKs do: a POST without a
//! session that is not `initialize` (so a modern `server/discover` probe) and a GET or DELETE
//! without one get 400 `-32600`; an unknown session 404; an unsupported
//! `MCP-Protocol-Version` 400. A round-1 answer that is not a JSON array of three known file
//! names, or a refused ask, ends the call with a tool error (`isError: true`). Like the Python
//! SDK it asks without checking the capabilities the client declared.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::upstream::{json_reply, serve, DemoUpstream, Seen};
use crate::Body;
use sluice_mcp::method::Method;
use tools::{loop_forever, summarize, tool_error};

mod tools;

/// The fake repository the tool summarizes: file names and contents.
pub const FILES: &[(&str, &str)] = &[
    ("README.md", "# tinykv\nA tiny in-memory key-value store served over a line-based TCP protocol, with snapshots to disk."),
    ("Cargo.toml", "[package]\nname = \"tinykv\"\nversion = \"0.3.1\"\n[dependencies]\ntokio = \"1\""),
    ("src/main.rs", "fn main() { tinykv::server::run(\"127.0.0.1:7070\") }"),
    ("src/server.rs", "pub async fn run(addr: &str) { /* accept loop; one command per line: GET k, SET k v, DEL k */ }"),
    ("src/store.rs", "pub struct Store { map: HashMap<String, Vec<u8>> } // get, set, del, snapshot(path), restore(path)"),
    ("tests/smoke.rs", "#[test] fn set_then_get() { /* SET a 1, then GET a answers 1 */ }"),
    ("LICENSE", "MIT License, Copyright (c) the tinykv authors"),
];

const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

struct Session {
    /// Our asks waiting for the client's response, by JSON id.
    pending: HashMap<String, oneshot::Sender<Value>>,
    next_ask: u64,
    end: CancellationToken,
    /// Running tool calls by JSON id: the tool and what stops it.
    calls: HashMap<String, (&'static str, CancellationToken)>,
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

/// Starts the legacy demo upstream on `addr` (port 0 for any).
pub async fn start(addr: SocketAddr) -> std::io::Result<DemoUpstream> {
    let sessions: Sessions = Arc::default();
    let seen = Arc::<Seen>::default();
    let tally = seen.clone();
    serve(addr, seen, move |req| {
        handle(sessions.clone(), tally.clone(), req)
    })
    .await
}

fn error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response<Body> {
    json_reply(
        status,
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

fn status(status: StatusCode) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Full::new(Bytes::new()).boxed())
        .unwrap_or_default()
}

fn sse(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(Frame::data(b)), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(frames).boxed())
        .unwrap_or_default()
}

fn event(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

async fn handle(
    sessions: Sessions,
    seen: Arc<Seen>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let sid = header("mcp-session-id");
    if req.method() != http::Method::POST {
        tracing::debug!(session = sid.as_deref().unwrap_or("-"), method = ?req.method(), "repo demo upstream");
    }
    let end = sid
        .as_ref()
        .and_then(|s| sessions.lock().ok()?.get(s).map(|s| s.end.clone()));
    if sid.is_some() && end.is_none() {
        return Ok(error(
            StatusCode::NOT_FOUND,
            &Value::Null,
            -32001,
            "Session not found",
        ));
    }
    if header("mcp-protocol-version").is_some_and(|v| !VERSIONS.contains(&v.as_str())) {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32600,
            "Bad Request: Unsupported protocol version",
        ));
    }
    if let Some(resp) = without_body(&sessions, req.method(), sid.as_deref(), end) {
        return Ok(resp);
    }
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    tracing::debug!(
        session = sid.as_deref().unwrap_or("-"),
        bytes = body.len(),
        "repo demo upstream: POST"
    );
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32700,
            "Parse error",
        ));
    };
    Ok(message(&sessions, seen, sid, msg))
}

/// 400 `-32600` for a request that needs a session and has none.
fn missing() -> Response<Body> {
    error(
        StatusCode::BAD_REQUEST,
        &Value::Null,
        -32600,
        "Bad Request: Missing session ID",
    )
}

/// The answer to a request other than a POST (a GET stream, a DELETE, or a refusal); `None` for
/// a POST, whose body is read next. `end` is the session's token, when it has one.
fn without_body(
    sessions: &Sessions,
    method: &http::Method,
    sid: Option<&str>,
    end: Option<CancellationToken>,
) -> Option<Response<Body>> {
    match (method.clone(), end) {
        (http::Method::GET, Some(end)) => {
            // The standalone stream: this server never sends anything on it, it only ends with the session.
            let (tx, rx) = mpsc::channel(1);
            tokio::spawn(async move {
                tokio::select! { _ = end.cancelled() => {}, _ = tx.closed() => {} }
            });
            Some(sse(rx))
        }
        (http::Method::DELETE, Some(end)) => {
            sid.and_then(|s| sessions.lock().ok()?.remove(s));
            end.cancel();
            Some(status(StatusCode::OK))
        }
        (http::Method::GET | http::Method::DELETE, None) => Some(missing()),
        (http::Method::POST, _) => None,
        _ => Some(status(StatusCode::METHOD_NOT_ALLOWED)),
    }
}

/// A JSON-RPC result answering `id`.
fn reply(id: &Option<Value>, r: Value) -> Response<Body> {
    json_reply(
        StatusCode::OK,
        json!({"jsonrpc": "2.0", "id": id, "result": r}),
    )
}

/// The answer to one POSTed message, on session `sid` when it names one.
fn message(
    sessions: &Sessions,
    seen: Arc<Seen>,
    sid: Option<String>,
    msg: Value,
) -> Response<Body> {
    let id = msg.get("id").cloned();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match (
        sid,
        msg.get("method").and_then(Value::as_str).map(Method::parse),
    ) {
        (None, Some(Method::Initialize)) => initialize(sessions, &id, &params),
        (None, _) => missing(),
        (Some(sid), None) => {
            // A response to one of our asks.
            let waiting = id.and_then(|i| {
                sessions
                    .lock()
                    .ok()?
                    .get_mut(&sid)?
                    .pending
                    .remove(&i.to_string())
            });
            if let Some(tx) = waiting {
                let _ = tx.send(msg);
            }
            status(StatusCode::ACCEPTED)
        }
        (Some(sid), Some(Method::Cancelled)) if id.is_none() => {
            let call = params.get("requestId").and_then(|r| {
                sessions
                    .lock()
                    .ok()?
                    .get_mut(&sid)?
                    .calls
                    .remove(&r.to_string())
            });
            if let Some((tool, stop)) = call {
                seen.note(&format!("cancelled {tool}"));
                stop.cancel();
            }
            status(StatusCode::ACCEPTED)
        }
        (Some(_), Some(_)) if id.is_none() => status(StatusCode::ACCEPTED),
        (Some(_), Some(Method::Ping)) => reply(&id, json!({})),
        (Some(_), Some(Method::ToolsList)) => reply(&id, tools()),
        (Some(sid), Some(Method::ToolsCall)) => call(sessions, seen, &sid, &id, &params),
        (Some(_), Some(_)) => error(
            StatusCode::OK,
            &id.unwrap_or(Value::Null),
            -32601,
            "Method not found",
        ),
    }
}

/// `initialize`: a new session, its id in `Mcp-Session-Id`.
fn initialize(sessions: &Sessions, id: &Option<Value>, params: &Value) -> Response<Body> {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = if VERSIONS.contains(&asked) {
        asked
    } else {
        VERSIONS[0]
    };
    let sid = format!("{:032x}", rand::random::<u128>());
    let s = Session {
        pending: HashMap::new(),
        next_ask: 0,
        end: CancellationToken::new(),
        calls: HashMap::new(),
    };
    if let Ok(mut m) = sessions.lock() {
        m.insert(sid.clone(), s);
    }
    let mut resp = reply(
        id,
        json!({"protocolVersion": version, "capabilities": {"tools": {}},
        "serverInfo": {"name": "repo", "version": "1.0.0"},
        "instructions": "The repo demo server (2025-11-25): summarize_repo asks your model twice; loop_forever never stops asking."}),
    );
    resp.headers_mut().insert(
        "mcp-session-id",
        http::HeaderValue::from_str(&sid).unwrap_or(http::HeaderValue::from_static("x")),
    );
    resp
}

/// The `tools/list` result: the two tools.
fn tools() -> Value {
    json!({"tools": [{"name": "summarize_repo",
        "description": "Summarize this repository for an audience: asks the model to pick three representative files, then to summarize them",
        "inputSchema": {"type": "object", "properties": {"audience": {"type": "string", "description": "who the summary is for"}}, "required": ["audience"]},
        "outputSchema": {"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}, "summary": {"type": "string"}},
                         "required": ["files", "summary"]}},
        {"name": "loop_forever",
        "description": "Brainstorm on a topic: asks the model for one more idea after every answer, forever (a loop bomb)",
        "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}}]})
}

/// `tools/call`: a tool's call streamed on its own SSE answer, or a tool error.
fn call(
    sessions: &Sessions,
    seen: Arc<Seen>,
    sid: &str,
    rid: &Option<Value>,
    params: &Value,
) -> Response<Body> {
    let arg = |k: &str| {
        params
            .pointer(&format!("/arguments/{k}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let id = rid.clone().unwrap_or(Value::Null);
    match (
        params.get("name").and_then(Value::as_str),
        arg("audience"),
        arg("topic"),
    ) {
        (Some("summarize_repo"), Some(audience), _) => {
            let (tx, rx) = mpsc::channel(8);
            let task = summarize(sessions.clone(), sid.to_owned(), id.clone(), audience, tx);
            spawn_call(sessions, sid, &id, "summarize_repo", task);
            sse(rx)
        }
        (Some("summarize_repo"), None, _) => reply(
            rid,
            tool_error("the argument `audience` (a string) is required"),
        ),
        (Some("loop_forever"), _, Some(topic)) => {
            let (tx, rx) = mpsc::channel(8);
            let task = loop_forever(
                sessions.clone(),
                sid.to_owned(),
                id.clone(),
                topic,
                tx,
                seen,
            );
            spawn_call(sessions, sid, &id, "loop_forever", task);
            sse(rx)
        }
        (Some("loop_forever"), _, None) => reply(
            rid,
            tool_error("the argument `topic` (a string) is required"),
        ),
        _ => error(StatusCode::OK, &id, -32602, "Unknown tool"),
    }
}

/// Runs a tool call until it ends or a `notifications/cancelled` names it.
fn spawn_call(
    sessions: &Sessions,
    sid: &str,
    id: &Value,
    tool: &'static str,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let stop = CancellationToken::new();
    let key = id.to_string();
    if let Some(s) = sessions.lock().ok().as_mut().and_then(|m| m.get_mut(sid)) {
        s.calls.insert(key.clone(), (tool, stop.clone()));
    }
    let (sessions, sid) = (sessions.clone(), sid.to_owned());
    tokio::spawn(async move {
        tokio::select! { _ = task => {}, _ = stop.cancelled() => {} }
        if let Some(s) = sessions.lock().ok().as_mut().and_then(|m| m.get_mut(&sid)) {
            s.calls.remove(&key);
        }
    });
}
