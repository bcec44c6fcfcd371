//! Every `input_required` round of a modern upstream under Sluice's seal.
//!
//! Takes the members of an upstream result whose decoded `resultType` is `input_required`
//! (whatever its spelling); gives the result the client sees: Sluice's sealed `requestState` in
//! place of the upstream's (the seal carries it byte for byte, with the round number, the
//! principal and a single-use nonce), and each input request judged by policy and budgets: a
//! denied elicitation is removed and answered `decline` by Sluice on the retry; a denied
//! sampling or roots ask, or a spent budget, refuses the call. Refuses as the upstream's
//! protocol error a round that breaks the schema where it decides something (`inputRequests`
//! not an object, a repeated key, a method other than the three asks, a malformed ask), and
//! with `-31016` a round of more than `budget.max_asks_per_round` asks.

use serde_json::{Map, Value};

use crate::mcp::jsonrpc::{push_json_str, RawObject};
use crate::mcp::method::Method;
use crate::policy::ask::{judge, AskCtx, AskVerdict};
use crate::policy::Governor;
use crate::policy::Refusal;
use crate::state::Keys;
use crate::state::Sealed;

/// A modern upstream's retry, as the policy stage opened it: the round it answers, the
/// upstream's own state to restore, and input keys Sluice answers itself.
#[derive(Clone, Debug, Default)]
pub struct Retry {
    /// The round the client answers (0: a fresh request).
    pub round: u32,
    /// The upstream's `requestState` as raw JSON, when it gave one.
    pub restore: Option<String>,
    /// Whether the retry carried Sluice's state (its `requestState` must be replaced).
    pub had_state: bool,
    /// Keys to answer `{"action": "decline"}`.
    pub declined: Vec<String>,
}

/// What sealing a modern round needs: the state template (with the next round number and a
/// fresh nonce) and who asks for whom.
#[derive(Clone)]
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

/// Why a round cannot go to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundError {
    /// Governance refuses the call.
    Refused(Refusal),
    /// The upstream broke the protocol (what, content-free).
    Protocol(String),
}

impl From<Refusal> for RoundError {
    fn from(r: Refusal) -> Self {
        RoundError::Refused(r)
    }
}

fn text(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    serde_json::from_str(raw).ok()
}

/// The result the client sees for an upstream's `input_required` result (its members).
pub async fn wrap(
    keys: &Keys,
    gov: &Governor,
    seal: &RoundSeal,
    result: &RawObject<'_>,
) -> Result<String, RoundError> {
    let mut sealed = seal.template.clone();
    if sealed.digest.is_empty() {
        // Most calls never ask: the digest of the params is paid for only by those that do.
        let env = crate::mcp::jsonrpc::Envelope::parse(seal.request.clone())
            .map_err(|_| RoundError::Protocol("the request could not be read again".into()))?;
        sealed.digest = crate::state::params_digest(env.members());
    }
    sealed.extra = result.get("requestState").map(str::to_owned);
    let shown = match result.get("inputRequests") {
        None => None,
        Some(raw) => Some(judge_requests(gov, seal, &mut sealed, raw).await?),
    };
    let token = keys.seal(&sealed);
    let mut out = String::with_capacity(256 + token.len() + shown.as_ref().map_or(0, String::len));
    out.push('{');
    for (k, v) in &result.0 {
        if matches!(k.as_ref(), "resultType" | "inputRequests" | "requestState") {
            continue;
        }
        push_json_str(&mut out, k);
        out.push(':');
        out.push_str(v.get());
        out.push(',');
    }
    out.push_str("\"resultType\":\"input_required\",");
    if let Some(shown) = shown {
        out.push_str("\"inputRequests\":");
        out.push_str(&shown);
        out.push(',');
    }
    out.push_str("\"requestState\":");
    push_json_str(&mut out, &token);
    out.push('}');
    Ok(out)
}

/// One input request's method (an ask's) and params, as written and decoded.
fn read_ask<'a>(req: &RawObject<'a>) -> Result<(Method, Option<&'a str>, Value), RoundError> {
    let protocol = |m: &str| RoundError::Protocol(m.to_owned());
    let method = req
        .get("method")
        .and_then(text)
        .map(|m| Method::parse(&m))
        .ok_or_else(|| protocol("an input request has no method"))?;
    if !method.is_ask() {
        return Err(protocol("an input request names a method other than sampling/createMessage, elicitation/create or roots/list"));
    }
    let raw_params = req.get("params");
    let params: Value = match raw_params {
        Some(p) => serde_json::from_str(p)
            .map_err(|_| protocol("an input request's params are not JSON"))?,
        None => Value::Object(Map::new()),
    };
    Ok((method, raw_params, params))
}

/// Judges each input request; gives the `inputRequests` the client is shown (an approval round
/// instead when a rule wants one, the asks then held in the seal).
async fn judge_requests(
    gov: &Governor,
    seal: &RoundSeal,
    sealed: &mut Sealed,
    raw: &str,
) -> Result<String, RoundError> {
    let protocol = |m: &str| RoundError::Protocol(m.to_owned());
    let requests: RawObject<'_> =
        serde_json::from_str(raw).map_err(|_| protocol("inputRequests is not an object"))?;
    if requests.has_repeats() {
        return Err(protocol("inputRequests repeats an input key"));
    }
    let limit = gov
        .budgets
        .limits(&seal.ctx.upstream, &seal.ctx.groups)
        .max_asks_per_round;
    if requests.0.len() > limit {
        return Err(Refusal::TooManyAsks(limit).into());
    }
    let mut kept = Map::new();
    let mut approval: Option<(String, String)> = None;
    for (key, req) in &requests.0 {
        let req: RawObject<'_> = serde_json::from_str(req.get())
            .map_err(|_| protocol("an input request is not an object"))?;
        let (method, raw_params, mut params) = read_ask(&req)?;
        let keep = |params: Value| {
            let mut r = Map::new();
            r.insert("method".into(), Value::String(method.as_str().to_owned()));
            if raw_params.is_some() || method == Method::SamplingCreateMessage {
                r.insert("params".into(), params);
            }
            Value::Object(r)
        };
        match judge(gov, &seal.ctx, &method, raw_params, &mut params).await {
            AskVerdict::Malformed(why) => return Err(RoundError::Protocol(why)),
            AskVerdict::Approve(rule) => {
                if approval.is_none() {
                    let shape = crate::policy::shape::AskShape::read(&method, raw_params)
                        .unwrap_or_default();
                    let msg = crate::policy::approval::for_ask(
                        &seal.ctx.upstream,
                        seal.ctx.tool.as_deref(),
                        &method,
                        &shape,
                        &rule,
                    );
                    approval = Some((rule, msg));
                }
                kept.insert(key.to_string(), keep(params));
            }
            AskVerdict::Allow => {
                kept.insert(key.to_string(), keep(params));
            }
            AskVerdict::Deny(_) if method == Method::ElicitationCreate => {
                sealed.declined.push(key.to_string())
            }
            AskVerdict::Deny(r) | AskVerdict::Refuse(r) => return Err(r.into()),
        }
    }
    // An approval round comes first: the asks are held in the seal until the user approves.
    Ok(match approval {
        Some((rule, _)) if !seal.elicitation => return Err(Refusal::NeedsElicitation(rule).into()),
        Some((rule, message)) => {
            sealed.pending = Some((Value::Object(kept).to_string(), rule));
            serde_json::json!({crate::policy::approval::KEY: crate::policy::approval::request(&message)}).to_string()
        }
        None => Value::Object(kept).to_string(),
    })
}
