//! Approval rounds: a Sluice-originated `elicitation/create` (form mode, one boolean field)
//! that the user answers before a call or an ask goes on.
//!
//! Takes what needs approval (upstream, tool, and the ask's shape: method, `maxTokens`, whether
//! a system prompt or tools are present, model hints; never its content); gives the input
//! request, and reads the answer (granted only on `accept` with `approve: true`).

use serde_json::{json, Value};

use crate::mcp::method::Method;

/// The input key of an approval round.
pub const KEY: &str = "sluice_approval";

/// The approval input request.
pub fn request(message: &str) -> Value {
    json!({"method": Method::ElicitationCreate.as_str(), "params": {"mode": "form", "message": message, "requestedSchema": {
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "Allow this to go on"}},
        "required": ["approve"]}}})
}

/// Whether an answer grants approval.
pub fn granted(answer: Option<&Value>) -> Option<bool> {
    let a = answer?;
    Some(
        a.get("action").and_then(Value::as_str) == Some("accept")
            && a.pointer("/content/approve").and_then(Value::as_bool) == Some(true),
    )
}

/// The message for a tool call.
pub fn for_call(upstream: &str, tool: &str, rule: &str) -> String {
    format!("Sluice policy {rule:?}: allow the tool {tool:?} of server {upstream:?} to run?")
}

/// The message for an upstream's ask: names the upstream, the tool and the shape of the ask.
pub fn for_ask(
    upstream: &str,
    tool: Option<&str>,
    method: &Method,
    shape: &super::shape::AskShape,
    rule: &str,
) -> String {
    let mut what = vec![method.to_string()];
    if *method == Method::SamplingCreateMessage {
        what.push(format!("maxTokens {}", shape.max_tokens));
    }
    if shape.system_prompt_present {
        what.push("with a system prompt".into());
    }
    if shape.tools_present {
        what.push(format!("offering {} tool(s)", shape.tools_offered));
    }
    if !shape.model_hints.is_empty() {
        what.push(format!("model hints {}", shape.model_hints.join(", ")));
    }
    if let Some(host) = &shape.url_host {
        what.push(format!("opening a page on {host}"));
    }
    let during = tool
        .map(|t| format!(" during tool {t:?}"))
        .unwrap_or_default();
    format!(
        "Sluice policy {rule:?}: server {upstream:?}{during} asks: {}. Allow?",
        what.join(", ")
    )
}
