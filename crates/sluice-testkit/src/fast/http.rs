//! The benchmark's fast mock upstreams, each in a process of its own.
//!
//! Modern (2026-07-28): answers `server/discover` (and `initialize`, for a peer gateway that
//! opens a 2025-11-25 session first), `tools/list` and `tools/call` of `echo` from
//! precomputed bodies, splicing in only the request id (one borrowed parse of the envelope).
//! Legacy (2025-11-25): `initialize` with a session id, a standalone GET stream that stays open,
//! and a `sample` tool whose call streams one `sampling/createMessage` ask, waits for the
//! client's answer (POSTed on the session) and then streams the result.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

type Body = BoxBody<Bytes, Infallible>;

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

fn full(status: StatusCode, ctype: Option<&'static str>, body: Bytes) -> Response<Body> {
    let mut b = Response::builder().status(status);
    if let Some(c) = ctype {
        b = b.header(http::header::CONTENT_TYPE, c);
    }
    b.body(Full::new(body).boxed()).unwrap_or_default()
}

fn rpc(status: StatusCode, id: &str, member: &str, value: &str) -> Response<Body> {
    let mut s = String::with_capacity(40 + id.len() + value.len());
    s.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    s.push_str(id);
    s.push_str(",\"");
    s.push_str(member);
    s.push_str("\":");
    s.push_str(value);
    s.push('}');
    full(status, Some("application/json"), Bytes::from(s))
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

/// Serves HTTP/1.1 (or HTTP/2 only, with no limit on concurrent streams) on `listener` with
/// `handle` until the process ends.
fn serve<F, Fut>(listener: tokio::net::TcpListener, http2: bool, handle: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let handle = handle.clone();
            tokio::spawn(async move {
                let io = TokioIo::new(stream);
                if http2 {
                    let mut b = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    b.max_concurrent_streams(None);
                    let _ = b.serve_connection(io, service_fn(handle)).await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service_fn(handle))
                        .await;
                }
            });
        }
    });
}

// === modern ===

struct Modern {
    discover: String,
    /// For a peer gateway whose client opens a 2025-11-25 session first (`mcp-proxy`).
    initialize: String,
    tools: String,
    echo: String,
}

impl Modern {
    fn new(name: &str) -> Modern {
        let meta =
            json!({"io.modelcontextprotocol/serverInfo": {"name": name, "version": "1.0.0"}});
        let discover = json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "_meta": meta});
        let tools = json!({"tools": [{"name": "echo", "description": "Echo a text (answers a fixed ~1 KiB text)",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}],
            "resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "_meta": meta});
        let echo = json!({"content": [{"type": "text", "text": super::arg_text()}], "resultType": "complete", "_meta": meta});
        let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": name, "version": "1.0.0"}});
        Modern {
            discover: discover.to_string(),
            initialize: initialize.to_string(),
            tools: tools.to_string(),
            echo: echo.to_string(),
        }
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        let Ok(body) = req.into_body().collect().await.map(|c| c.to_bytes()) else {
            return Ok(full(StatusCode::BAD_REQUEST, None, Bytes::new()));
        };
        let Ok(w) = serde_json::from_slice::<Wire<'_>>(&body) else {
            return Ok(rpc(
                StatusCode::BAD_REQUEST,
                "null",
                "error",
                r#"{"code":-32700,"message":"parse error"}"#,
            ));
        };
        let Some(id) = w.id.map(RawValue::get) else {
            return Ok(full(StatusCode::ACCEPTED, None, Bytes::new()));
        };
        Ok(match (w.method.as_deref(), w.params.and_then(|p| p.name)) {
            (Some("tools/call"), Some(n)) if n == "echo" => {
                rpc(StatusCode::OK, id, "result", &self.echo)
            }
            (Some("tools/call"), _) => rpc(
                StatusCode::OK,
                id,
                "error",
                r#"{"code":-32602,"message":"unknown tool"}"#,
            ),
            (Some("server/discover"), _) => rpc(StatusCode::OK, id, "result", &self.discover),
            (Some("initialize"), _) => rpc(StatusCode::OK, id, "result", &self.initialize),
            // `mcp-proxy` lists these whatever the capabilities say.
            (Some("resources/list"), _) => rpc(StatusCode::OK, id, "result", r#"{"resources":[]}"#),
            (Some("resources/templates/list"), _) => {
                rpc(StatusCode::OK, id, "result", r#"{"resourceTemplates":[]}"#)
            }
            (Some("prompts/list"), _) => rpc(StatusCode::OK, id, "result", r#"{"prompts":[]}"#),
            (Some("ping"), _) => rpc(StatusCode::OK, id, "result", "{}"),
            (Some("tools/list"), _) => rpc(StatusCode::OK, id, "result", &self.tools),
            _ => rpc(
                StatusCode::NOT_FOUND,
                id,
                "error",
                r#"{"code":-32601,"message":"method not found"}"#,
            ),
        })
    }
}

/// Runs the modern mock: one listener per name; prints `LISTENING <port>...`.
pub async fn modern(names: Vec<String>) -> Result<(), String> {
    let mut ports = Vec::new();
    for name in names {
        let listener = bind(([127, 0, 0, 1], 0).into()).await?;
        ports.push(
            listener
                .local_addr()
                .map_err(|e| e.to_string())?
                .port()
                .to_string(),
        );
        let m = Arc::new(Modern::new(&name));
        serve(listener, false, move |req| m.clone().handle(req));
    }
    println!("LISTENING {}", ports.join(" "));
    std::future::pending::<()>().await;
    Ok(())
}

// === legacy ===

#[derive(Default)]
struct Legacy {
    next: AtomicU64,
    /// Asks waiting for the client's answer, by the ask's id (JSON text).
    pending: Mutex<HashMap<String, tokio::sync::oneshot::Sender<()>>>,
}

fn sse(
    stream: impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static,
) -> Response<Body> {
    Response::builder()
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        .body(StreamBody::new(stream).boxed())
        .unwrap_or_default()
}

impl Legacy {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        match *req.method() {
            http::Method::GET => return Ok(sse(futures_util::stream::pending())),
            http::Method::DELETE => return Ok(full(StatusCode::OK, None, Bytes::new())),
            _ => {}
        }
        let Ok(body) = req.into_body().collect().await.map(|c| c.to_bytes()) else {
            return Ok(full(StatusCode::BAD_REQUEST, None, Bytes::new()));
        };
        let Ok(w) = serde_json::from_slice::<Wire<'_>>(&body) else {
            return Ok(rpc(
                StatusCode::BAD_REQUEST,
                "null",
                "error",
                r#"{"code":-32700,"message":"parse error"}"#,
            ));
        };
        let (id, method) = match (w.id.map(RawValue::get), w.method.as_deref()) {
            (Some(id), None) => {
                // The client's answer to an ask.
                if let Some(tx) = self.pending.lock().ok().and_then(|mut p| p.remove(id)) {
                    let _ = tx.send(());
                }
                return Ok(full(StatusCode::ACCEPTED, None, Bytes::new()));
            }
            (None, _) => return Ok(full(StatusCode::ACCEPTED, None, Bytes::new())),
            (Some(id), Some(m)) => (id.to_owned(), m.to_owned()),
        };
        Ok(match method.as_str() {
            "initialize" => {
                let sid = self.next.fetch_add(1, Ordering::Relaxed);
                let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "legacy-mock", "version": "1.0.0"}});
                let mut r = rpc(StatusCode::OK, &id, "result", &result.to_string());
                if let Ok(v) = http::HeaderValue::from_str(&format!("bench-{sid}")) {
                    r.headers_mut().insert("mcp-session-id", v);
                }
                r
            }
            "tools/list" => {
                let tools = json!({"tools": [{"name": "sample", "description": "Asks the client to sample once, then answers",
                    "inputSchema": {"type": "object", "properties": {}}}]});
                rpc(StatusCode::OK, &id, "result", &tools.to_string())
            }
            "tools/call" if w.params.and_then(|p| p.name).as_deref() == Some("sample") => {
                self.sample(&id)
            }
            "ping" => rpc(StatusCode::OK, &id, "result", "{}"),
            _ => rpc(
                StatusCode::NOT_FOUND,
                &id,
                "error",
                r#"{"code":-32601,"message":"method not found"}"#,
            ),
        })
    }

    fn sample(&self, call_id: &str) -> Response<Body> {
        let ask_id = format!("\"s-{}\"", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(ask_id.clone(), tx);
        }
        let ask = format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":{ask_id},\"method\":\"sampling/createMessage\",\"params\":{{\"messages\":[{{\"role\":\"user\",\"content\":{{\"type\":\"text\",\"text\":\"Say hi\"}}}}],\"maxTokens\":16}}}}\n\n"
        );
        let done = format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":{call_id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"sampled\"}}]}}}}\n\n"
        );
        let first = futures_util::stream::once(async move { Ok(Frame::data(Bytes::from(ask))) });
        let last = futures_util::stream::once(async move {
            match rx.await {
                Ok(()) => Ok(Frame::data(Bytes::from(done))),
                Err(_) => Ok(Frame::data(Bytes::new())),
            }
        });
        sse(futures_util::StreamExt::chain(first, last))
    }
}

/// Runs the legacy mock; prints `LISTENING <port>`.
pub async fn legacy(http2: bool) -> Result<(), String> {
    let listener = bind(([127, 0, 0, 1], 0).into()).await?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let l = Arc::new(Legacy::default());
    serve(listener, http2, move |req| l.clone().handle(req));
    println!("LISTENING {port}");
    std::future::pending::<()>().await;
    Ok(())
}
