//! The official Rust SDK (`rmcp` 3.11) as a 2026-07-28 client (`ClientLifecycleMode::Discover`),
//! in-process, with a sampling handler (`ECHO-RS[<prompt>]`) and an elicitation handler that
//! accepts every form with `{"answer": "yes-from-rust"}`. Both record what they were asked.
#![allow(deprecated)] // sampling is deprecated by SEP-2577 but still carried by input_required rounds

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, ProtocolVersion, SamplingMessage,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{json, Map, Value};

/// What the handlers were asked.
#[derive(Clone, Default)]
pub(crate) struct Asked {
    pub(crate) sampled: Arc<Mutex<Vec<String>>>,
    pub(crate) elicited: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
pub(crate) struct Handler(pub(crate) Asked);

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
        self.0.sampled.lock().unwrap().push(prompt.clone());
        Ok(CreateMessageResult::new(SamplingMessage::assistant_text(format!("ECHO-RS[{prompt}]")), "fake-llm-rs".into()))
    }

    async fn create_elicitation(&self, request: ElicitRequestParams, _: RequestContext<RoleClient>) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } | ElicitRequestParams::UrlElicitationParams { message, .. } => {
                message.clone()
            }
            #[allow(unreachable_patterns)]
            _ => String::new(),
        };
        self.0.elicited.lock().unwrap().push(message);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes-from-rust"})))
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_sampling().enable_elicitation().build(),
            Implementation::new("interop-rmcp-client", "1.0.0"),
        )
    }
}

/// Connects to `url` in Discover mode (2026-07-28 only).
pub(crate) async fn connect(url: &str, asked: Asked) -> RunningService<RoleClient, Handler> {
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url.to_owned()));
    let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    Handler(asked).serve_with_lifecycle(transport, mode).await.unwrap_or_else(|e| panic!("rmcp client could not connect to {url}: {e}"))
}

/// The names `tools/list` gives, in order.
pub(crate) async fn tool_names(client: &RunningService<RoleClient, Handler>) -> Vec<String> {
    let listed = client.list_tools(None).await.unwrap_or_else(|e| panic!("rmcp tools/list through sluice: {e}"));
    listed.tools.iter().map(|t| t.name.to_string()).collect()
}

/// Calls a tool (driving any input_required rounds); returns its text and `isError`.
pub(crate) async fn call(client: &RunningService<RoleClient, Handler>, name: &str, args: Value) -> (String, bool) {
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
    let r = client.call_tool(params).await.unwrap_or_else(|e| panic!("rmcp tools/call {name} through sluice: {e}"));
    let text: Vec<String> = r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    (text.join(" | "), r.is_error.unwrap_or(false))
}
