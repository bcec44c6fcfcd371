//! The official Rust SDK (`rmcp` 3.11) as a 2026-07-28 client (`ClientLifecycleMode::Discover`),
//! in-process, with real handlers: sampling answers `ECHO-RS[<prompt>]` from `fake-llm-rs`,
//! elicitation accepts every form with `{"answer": "yes-from-rust"}`, roots lists
//! `file:///work/rs-root`. Each records what it was asked.
#![allow(deprecated)] // sampling and roots are deprecated by SEP-2577 but still carried by input_required rounds

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ListRootsResult, ProtocolVersion, Root, SamplingMessage,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{json, Map, Value};

/// What the handlers were asked, in order ("sampling: <prompt>", "elicitation: <message>", "roots").
#[derive(Clone, Default)]
pub(crate) struct Asked(pub(crate) Arc<Mutex<Vec<String>>>);

impl Asked {
    /// Everything asked so far, emptied.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// The prompts of the sampling requests so far, in order.
    pub(crate) fn sampled(&self) -> Vec<String> {
        self.of("sampling: ")
    }

    /// The messages of the elicitation requests so far, in order.
    pub(crate) fn elicited(&self) -> Vec<String> {
        self.of("elicitation: ")
    }

    fn of(&self, kind: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|a| a.strip_prefix(kind))
            .map(str::to_owned)
            .collect()
    }
}

/// The handler; `roots` says whether it declares the roots capability.
#[derive(Clone)]
pub(crate) struct Handler {
    asked: Asked,
    roots: bool,
}

impl ClientHandler for Handler {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let prompt = params
            .messages
            .first()
            .and_then(|m| m.content.iter().next())
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default();
        self.asked
            .0
            .lock()
            .unwrap()
            .push(format!("sampling: {prompt}"));
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("ECHO-RS[{prompt}]")),
            "fake-llm-rs".into(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            #[allow(unreachable_patterns)]
            _ => String::new(),
        };
        self.asked
            .0
            .lock()
            .unwrap()
            .push(format!("elicitation: {message}"));
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"answer": "yes-from-rust"})))
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.asked.0.lock().unwrap().push("roots".into());
        let mut root = Root::new("file:///work/rs-root");
        root.name = Some("rs".into());
        Ok(ListRootsResult::new(vec![root]))
    }

    fn get_info(&self) -> ClientConfig {
        let caps = if self.roots {
            ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .enable_elicitation()
                .build()
        } else {
            ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build()
        };
        ClientConfig::new(
            caps,
            Implementation::new("sluice-tests-rmcp-client", "1.0.0"),
        )
    }
}

/// Connects to `url` in Discover mode (2026-07-28 only), declaring roots when `roots`.
pub(crate) async fn connect(
    url: &str,
    asked: Asked,
    roots: bool,
) -> RunningService<RoleClient, Handler> {
    connect_with(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
        asked,
        roots,
    )
    .await
}

/// The same with `Authorization: Bearer <key>` on every request.
pub(crate) async fn connect_as(
    url: &str,
    key: &str,
    asked: Asked,
) -> RunningService<RoleClient, Handler> {
    connect_with(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(key),
        asked,
        false,
    )
    .await
}

async fn connect_with(
    config: StreamableHttpClientTransportConfig,
    asked: Asked,
    roots: bool,
) -> RunningService<RoleClient, Handler> {
    let url = config.uri.clone();
    let transport = StreamableHttpClientTransport::from_config(config);
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Handler { asked, roots }
        .serve_with_lifecycle(transport, mode)
        .await
        .unwrap_or_else(|e| panic!("rmcp client could not connect to {url}: {e}"))
}

/// Calls a tool (rmcp drives the input_required rounds); returns its text and `isError`.
pub(crate) async fn call(
    client: &RunningService<RoleClient, Handler>,
    name: &str,
    args: Value,
) -> (String, bool) {
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), client.call_tool(params))
        .await
        .unwrap_or_else(|_| {
            panic!("rmcp tools/call {name} through sluice did not finish within 20 s")
        })
        .unwrap_or_else(|e| panic!("rmcp tools/call {name} through sluice: {e}"));
    let text: Vec<String> = r
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect();
    (text.join(" | "), r.is_error.unwrap_or(false))
}

/// The names `tools/list` gives, in order.
pub(crate) async fn tool_names(client: &RunningService<RoleClient, Handler>) -> Vec<String> {
    let listed = client
        .list_tools(None)
        .await
        .unwrap_or_else(|e| panic!("rmcp tools/list through sluice: {e}"));
    listed.tools.iter().map(|t| t.name.to_string()).collect()
}
