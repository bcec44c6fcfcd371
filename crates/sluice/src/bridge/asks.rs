//! A legacy upstream's asks (server→client requests) as `input_required` input requests, and
//! the client's answers as responses to them.
//!
//! Takes an upstream request (`sampling/createMessage`, `elicitation/create`, `roots/list`);
//! gives its input key (the `dev.sluice/inputKey` hint, else `<method>-<n>`), its params as the
//! modern client sees them (hint and URL-mode `elicitationId` stripped), and the client
//! capability it needs. Refuses a client's answer whose shape is not the method's result
//! (`CreateMessageResult`, `ElicitResult`, `ListRootsResult`); never checks elicitation content
//! against `requestedSchema`.

use serde_json::{json, Map, Value};

use crate::mcp::method::Method;

/// The `_meta` key a legacy server may set on an ask to name its input key.
pub const INPUT_KEY_HINT: &str = "dev.sluice/inputKey";

/// One pending ask of a legacy upstream.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The input key the modern client answers under.
    pub key: String,
    /// The upstream's request id (JSON text).
    pub id: String,
    /// The method (an ask: sampling, elicitation or roots).
    pub method: Method,
    /// Params as the modern client sees them.
    pub params: Value,
    /// URL-mode elicitation id (2025-11-25 only), kept here and hidden from the client.
    pub elicitation_id: Option<String>,
    /// The policy rule that wants the user's approval before this ask reaches the client.
    pub approval: Option<String>,
}

/// Builds an [`Ask`]; `taken` holds keys already used in this round.
pub fn ask(id: &str, method: &Method, params: Option<&str>, taken: &[String]) -> Ask {
    let mut params: Value = params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    let mut hint = None;
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        hint = meta
            .remove(INPUT_KEY_HINT)
            .and_then(|v| v.as_str().map(str::to_owned));
        if meta.is_empty() {
            params.as_object_mut().map(|p| p.remove("_meta"));
        }
    }
    let mut elicitation_id = None;
    if *method == Method::ElicitationCreate
        && params.get("mode").and_then(Value::as_str) == Some("url")
    {
        elicitation_id = params
            .as_object_mut()
            .and_then(|p| p.remove("elicitationId"))
            .and_then(|v| v.as_str().map(str::to_owned));
    }
    if *method == Method::SamplingCreateMessage {
        params.as_object_mut().map(|p| p.remove("task"));
    }
    let key = match hint {
        Some(h) if !h.is_empty() && !taken.contains(&h) => h,
        _ => (1..)
            .map(|n| format!("{method}-{n}"))
            .find(|k| !taken.contains(k))
            .unwrap_or_default(),
    };
    Ask {
        key,
        id: id.to_owned(),
        method: method.clone(),
        params,
        elicitation_id,
        approval: None,
    }
}

/// The client capability an ask needs, as a `ClientCapabilities` object, when `declared`
/// lacks it.
pub fn missing_capability(a: &Ask, declared: &Map<String, Value>) -> Option<Value> {
    match a.method {
        Method::SamplingCreateMessage => {
            let wants_tools = a.params.get("tools").is_some_and(|t| !t.is_null());
            match declared.get("sampling") {
                None => Some(if wants_tools {
                    json!({"sampling": {"tools": {}}})
                } else {
                    json!({"sampling": {}})
                }),
                Some(s) if wants_tools && s.get("tools").is_none() => {
                    Some(json!({"sampling": {"tools": {}}}))
                }
                _ => None,
            }
        }
        Method::ElicitationCreate => {
            let url = a.params.get("mode").and_then(Value::as_str) == Some("url");
            let e = declared.get("elicitation");
            let ok = match e {
                None => false,
                Some(e) if url => e.get("url").is_some(),
                Some(e) => e.get("form").is_some() || e.get("url").is_none(),
            };
            (!ok).then(|| {
                if url {
                    json!({"elicitation": {"url": {}}})
                } else {
                    json!({"elicitation": {"form": {}}})
                }
            })
        }
        Method::RootsList => declared
            .get("roots")
            .is_none()
            .then(|| json!({"roots": {}})),
        _ => None,
    }
}

/// Checks a client's answer to an ask; gives the result JSON to send upstream.
pub fn validate(method: &Method, answer: &Value) -> Result<String, String> {
    let obj = answer
        .as_object()
        .ok_or("an input response must be an object")?;
    let (ok, shape) = match method {
        Method::SamplingCreateMessage => (
            matches!(
                obj.get("role").and_then(Value::as_str),
                Some("user" | "assistant")
            ) && obj
                .get("content")
                .is_some_and(|c| c.is_object() || c.is_array())
                && obj.get("model").is_some_and(Value::is_string),
            "a CreateMessageResult {role, content, model}",
        ),
        Method::ElicitationCreate => (
            matches!(
                obj.get("action").and_then(Value::as_str),
                Some("accept" | "decline" | "cancel")
            ) && obj
                .get("content")
                .is_none_or(|c| c.is_object() || c.is_null()),
            "an ElicitResult {action: accept|decline|cancel, content?}",
        ),
        Method::RootsList => (
            obj.get("roots")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().all(|x| x.get("uri").is_some_and(Value::is_string))),
            "a ListRootsResult {roots: [{uri}]}",
        ),
        _ => (false, "the result of an ask"),
    };
    if !ok {
        return Err(format!("the input response to {method} must be {shape}"));
    }
    let mut clean = obj.clone();
    clean.remove("resultType");
    Ok(Value::Object(clean).to_string())
}

/// The modern `inputRequests` object for a round.
pub fn input_requests(asks: &[Ask]) -> Value {
    let mut m = Map::new();
    for a in asks {
        m.insert(
            a.key.clone(),
            json!({"method": a.method.as_str(), "params": a.params}),
        );
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_key_hint_is_used_once_and_stripped() {
        let a = ask(
            "5",
            &Method::SamplingCreateMessage,
            Some(r#"{"messages":[],"maxTokens":5,"_meta":{"dev.sluice/inputKey":"llm"}}"#),
            &[],
        );
        assert_eq!(a.key, "llm");
        assert!(a.params.get("_meta").is_none());
        let b = ask(
            "6",
            &Method::SamplingCreateMessage,
            Some(r#"{"_meta":{"dev.sluice/inputKey":"llm"}}"#),
            &["llm".into()],
        );
        assert_eq!(b.key, "sampling/createMessage-1");
    }

    #[test]
    fn asks_need_the_capabilities_they_use() {
        let caps: Map<String, Value> =
            serde_json::from_value(json!({"sampling": {}, "elicitation": {}})).unwrap();
        let tools = ask(
            "1",
            &Method::SamplingCreateMessage,
            Some(r#"{"tools":[{"name":"t"}]}"#),
            &[],
        );
        assert_eq!(
            missing_capability(&tools, &caps),
            Some(json!({"sampling": {"tools": {}}}))
        );
        let url = ask(
            "2",
            &Method::ElicitationCreate,
            Some(r#"{"mode":"url","url":"https://x","elicitationId":"e"}"#),
            &[],
        );
        assert_eq!(url.elicitation_id.as_deref(), Some("e"));
        assert_eq!(
            missing_capability(&url, &caps),
            Some(json!({"elicitation": {"url": {}}}))
        );
        let form = ask(
            "3",
            &Method::ElicitationCreate,
            Some(r#"{"message":"m"}"#),
            &[],
        );
        assert_eq!(missing_capability(&form, &caps), None);
        assert_eq!(
            missing_capability(&ask("4", &Method::RootsList, None, &[]), &caps),
            Some(json!({"roots": {}}))
        );
    }

    #[test]
    fn answers_are_checked_for_shape_only() {
        assert!(validate(
            &Method::SamplingCreateMessage,
            &json!({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"})
        )
        .is_ok());
        assert!(validate(
            &Method::SamplingCreateMessage,
            &json!({"role": "assistant"})
        )
        .is_err());
        assert!(validate(
            &Method::ElicitationCreate,
            &json!({"action": "accept", "content": {"anything": [1]}})
        )
        .is_ok());
        assert!(validate(&Method::ElicitationCreate, &json!({"action": "maybe"})).is_err());
        assert!(validate(
            &Method::RootsList,
            &json!({"roots": [{"uri": "file:///x"}]})
        )
        .is_ok());
        assert!(validate(&Method::RootsList, &json!({"roots": [{}]})).is_err());
    }
}
