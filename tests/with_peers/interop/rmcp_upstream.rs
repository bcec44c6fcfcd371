//! A modern upstream on the official Rust SDK (`rmcp` 3.11), in-process over real HTTP.
//!
//! rmcp's `StreamableHttpService` with legacy sessions off serves every 2026-07-28 request
//! statelessly (per-request `_meta`, `server/discover`, `resultType`, cache hints filled by the
//! SDK). Tools: `reverse(text)`, `multiply(a, b)`, and `confirm(question)`, which answers
//! `input_required` with one form elicitation (key `answer`, `requestState` [`CONFIRM_STATE`])
//! and completes on the retry that echoes the state and carries the accepted answer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, Implementation, InputRequest, InputRequests, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

/// The `requestState` of `confirm`'s first round; the retry must echo it byte for byte.
pub(crate) const CONFIRM_STATE: &str = "rs-confirm-round-1";

/// The tools this upstream lists, in its own order.
pub(crate) const TOOLS: [&str; 3] = ["reverse", "multiply", "confirm"];

/// A running rmcp upstream; stops when dropped.
pub(crate) struct RmcpUpstream {
    pub(crate) addr: SocketAddr,
    /// TCP connections it accepted.
    pub(crate) accepted: Arc<std::sync::atomic::AtomicUsize>,
    stop: CancellationToken,
}

impl RmcpUpstream {
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for RmcpUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Clone)]
struct Upstream;

fn schema(v: Value) -> Arc<Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn text(t: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(t)]).into()
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("interop-rmcp-upstream", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let string_arg = |name: &str| {
            schema(
                json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}),
            )
        };
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("reverse", "Reverse the text", string_arg("text")),
            Tool::new(
                "multiply",
                "Multiply two integers",
                schema(
                    json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
                ),
            ),
            Tool::new(
                "confirm",
                "Ask the user to confirm (one input_required round)",
                string_arg("question"),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = req.arguments.clone().unwrap_or_default();
        let int = |k: &str| {
            args.get(k)
                .and_then(Value::as_i64)
                .ok_or_else(|| ErrorData::invalid_params(format!("{k} must be an integer"), None))
        };
        let string = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match req.name.as_ref() {
            "reverse" => Ok(text(string("text").chars().rev().collect())),
            "multiply" => Ok(text((int("a")? * int("b")?).to_string())),
            "confirm" => confirm(&req, &string("question")),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

fn confirm(req: &CallToolRequestParams, question: &str) -> Result<CallToolResponse, ErrorData> {
    let Some(responses) = &req.input_responses else {
        let schema =
            serde_json::from_value(json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let ask = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question.to_owned(),
            requested_schema: schema,
        });
        let mut requests = InputRequests::new();
        requests.insert("answer".into(), InputRequest::Elicitation(ask));
        return Ok(InputRequiredResult::new(Some(requests), Some(CONFIRM_STATE.into())).into());
    };
    if req.request_state.as_deref() != Some(CONFIRM_STATE) {
        return Err(ErrorData::invalid_params(
            format!("requestState not echoed: {:?}", req.request_state),
            None,
        ));
    }
    let reply = responses
        .get("answer")
        .ok_or_else(|| ErrorData::invalid_params("inputResponses.answer is missing", None))?;
    let answer = reply.pointer("/content/answer").and_then(Value::as_str);
    match (reply.get("action").and_then(Value::as_str), answer) {
        (Some("accept"), Some(a)) => Ok(text(format!("confirmed: {a} (asked: {question})"))),
        _ => Ok(
            CallToolResult::error(vec![ContentBlock::text(format!("not confirmed: {reply}"))])
                .into(),
        ),
    }
}

/// Starts the upstream on 127.0.0.1, port 0 (HTTP/1.1 and HTTP/2 with prior knowledge).
pub(crate) async fn start() -> RmcpUpstream {
    serve(false).await
}

/// The same upstream speaking HTTP/2 only (prior knowledge): an HTTP/1.1 request fails.
pub(crate) async fn start_h2_only() -> RmcpUpstream {
    serve(true).await
}

async fn serve(h2_only: bool) -> RmcpUpstream {
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_cancellation_token(stop.child_token());
    let service: StreamableHttpService<Upstream, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Upstream), Default::default(), config);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("rmcp upstream: bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("rmcp upstream: local address");
    let token = stop.clone();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = token.cancelled() => return,
                a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
            };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let service = service.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let mut service = service.clone();
                    async move {
                        Ok::<_, Infallible>(
                            tower::Service::call(&mut service, req)
                                .await
                                .unwrap_or_else(|e| match e {}),
                        )
                    }
                });
                let mut builder =
                    hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                if h2_only {
                    builder = builder.http2_only();
                }
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                tokio::select! { _ = conn => {}, _ = token.cancelled() => {} }
            });
        }
    });
    RmcpUpstream {
        addr,
        accepted,
        stop,
    }
}
