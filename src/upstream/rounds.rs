//! Every `input_required` round of a modern upstream under Sluice's seal.
//!
//! Takes an upstream's final message; when it is an `input_required` result, gives it back with
//! Sluice's sealed `requestState` in place of the upstream's (which the seal carries byte for
//! byte, with the round number and the principal), and each input request judged by policy and
//! budgets: a denied elicitation is removed and answered `decline` by Sluice on the retry; a
//! denied sampling or roots ask, or a spent budget, refuses the call.

use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::gateway::Gateway;
use crate::policy::ask::{judge, AskCtx, AskVerdict};
use crate::policy::Refusal;
use crate::state::Sealed;

/// What sealing a modern round needs: the state template (with the next round number) and who
/// asks for whom.
pub struct RoundSeal {
    /// The sealed state, `round` already the number of the round being answered to the client.
    pub template: Sealed,
    /// For policies and budgets.
    pub ctx: AskCtx,
    /// Whether the client declared elicitation (approval rounds need it).
    pub elicitation: bool,
    /// The client's request, for the params digest (computed only when a round is sealed).
    pub request: bytes::Bytes,
}

/// Rewrites `data` when it is an `input_required` result; `Ok(None)` when it is not.
pub fn wrap(gw: &Gateway, seal: &RoundSeal, data: &str) -> Result<Option<String>, Refusal> {
    let Ok(mut msg) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(data) else { return Ok(None) };
    let Some(result) = msg.get("result") else { return Ok(None) };
    let Ok(mut result) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(result.get()) else { return Ok(None) };
    if result.get("resultType").map(|r| r.get()) != Some("\"input_required\"") {
        return Ok(None);
    }
    let mut sealed = seal.template.clone();
    if sealed.digest.is_empty() {
        // Most calls never ask: the digest of the params is paid for only by those that do.
        let env = crate::mcp::jsonrpc::Envelope::parse(seal.request.clone()).map_err(|_| Refusal::TooLarge("bad request".into()))?;
        sealed.digest = crate::state::params_digest(env.members());
    }
    sealed.extra = result.get("requestState").map(|r| r.get().to_owned());
    if let Some(raw) = result.get("inputRequests") {
        let mut requests: Map<String, Value> = serde_json::from_str(raw.get()).unwrap_or_default();
        let mut kept = Map::new();
        let mut approval: Option<(String, String)> = None;
        for (key, mut req) in std::mem::take(&mut requests) {
            let method = req.get("method").and_then(Value::as_str).unwrap_or("").to_owned();
            let had_params = req.get("params").is_some();
            let mut params = req.get("params").cloned().unwrap_or_else(|| Value::Object(Map::new()));
            match judge(gw, &seal.ctx, &method, &mut params) {
                AskVerdict::Approve(rule) => {
                    if had_params {
                        req["params"] = params.clone();
                    }
                    if approval.is_none() {
                        let msg = crate::policy::approval::for_ask(&seal.ctx.upstream, seal.ctx.tool.as_deref(), &method, &params, &rule);
                        approval = Some((rule, msg));
                    }
                    kept.insert(key, req);
                }
                AskVerdict::Allow => {
                    if had_params {
                        req["params"] = params; // maxTokens may have been clamped
                    }
                    kept.insert(key, req);
                }
                AskVerdict::Deny(_) if method == "elicitation/create" => sealed.declined.push(key),
                AskVerdict::Deny(r) | AskVerdict::Refuse(r) => return Err(r),
            }
        }
        // An approval round comes first: the asks are held in the seal until the user approves.
        let shown = match approval {
            Some((rule, _)) if !seal.elicitation => return Err(Refusal::NeedsElicitation(rule)),
            Some((rule, message)) => {
                sealed.pending = Some((Value::Object(kept).to_string(), rule));
                serde_json::json!({crate::policy::approval::KEY: crate::policy::approval::request(&message)})
            }
            None => Value::Object(kept),
        };
        result.insert(
            "inputRequests".into(),
            RawValue::from_string(shown.to_string()).map_err(|_| Refusal::TooLarge("bad input requests".into()))?,
        );
    }
    let token = gw.bridge.keys.seal(&sealed);
    result.insert(
        "requestState".into(),
        RawValue::from_string(Value::String(token).to_string()).map_err(|_| Refusal::TooLarge("bad state".into()))?,
    );
    let result = serde_json::to_string(&result).map_err(|_| Refusal::TooLarge("bad result".into()))?;
    msg.insert("result".into(), RawValue::from_string(result).map_err(|_| Refusal::TooLarge("bad result".into()))?);
    serde_json::to_string(&msg).map(Some).map_err(|_| Refusal::TooLarge("bad result".into()))
}
