//! Stage 5 for routed calls: approval rules on tool calls, and the round bookkeeping of modern
//! upstreams (their `requestState` under Sluice's seal).
//!
//! Takes a routed request and its principal; gives whether it goes on (possibly as a fresh
//! request once an approval was granted), an approval round to answer with, a hold for an
//! operator's approval (`approvals/`), or a refusal:
//! denied by a rule, approval declined, round cap reached, or a state that does not open.

use serde_json::{json, Map, Value};

use crate::auth::Principal;
use crate::ctx::target::Target;
use crate::error::GatewayError;
use crate::forward::rounds::Retry;
use crate::mcp::jsonrpc::{self, Envelope};
use crate::mcp::method::Method;
use crate::policy::{approval, Effect, Refusal, Subject};
use crate::respond::Reply;
use crate::route::table::ListKind;
use crate::state::{self, Bound, Kind, Sealed, StateError};
use crate::validate::Meta;

/// What the policy stage takes: the governor (rules, quotas, budgets, single use), the keys
/// that seal round states, and a round's timings.
pub struct Policy<'a> {
    /// Rules, quotas, budgets and consumed states.
    pub governor: &'a crate::policy::Governor,
    /// The keys round states are sealed and opened with.
    pub keys: &'a crate::state::Keys,
    /// `bridge.park_ms`: how long a round state stays good.
    pub park: std::time::Duration,
    /// This replica's id, the owner every state it seals names.
    pub replica: &'a str,
    /// Sluice's `serverInfo`, in the `_meta` of the rounds it answers itself.
    pub server_info: &'a Value,
}

/// What the gate decided.
pub enum Gate {
    /// Go on with the request as it is.
    Go,
    /// Go on with this request instead (an approved call, without the approval round's members).
    Approved(Envelope),
    /// Answer with this (the approval round).
    Answer(Reply),
    /// Hold the call for an operator's approval (`approver = "operator"`; `approvals/`): who
    /// decides and what they see, and the rule's name.
    Hold(crate::policy::ByOperator, String),
}

fn state_error(e: StateError) -> GatewayError {
    GatewayError::InvalidParams(e.to_string(), Some(json!({"reason": e.reason()})))
}

/// The name or URI a request is bound to in sealed state.
pub fn bound_name(env: &Envelope) -> String {
    env.method
        .name_member()
        .and_then(|m| env.param_str(m))
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// What a state issued for this request binds.
pub(super) fn bound(env: &Envelope, t: &Target, principal: &Principal, digest: String) -> Bound {
    Bound {
        principal: principal.id().to_owned(),
        method: env.method.to_string(),
        name: bound_name(env),
        digest,
        upstream: t.up.name.clone(),
    }
}

/// Opens the request's `requestState`, if it carries one.
/// The state must also name the upstream the request routes to now: a state one upstream's
/// round earned never carries its answers to another (one that started to list the same URI).
pub fn open_state(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<Option<Sealed>, GatewayError> {
    match env.param_str("requestState") {
        None => Ok(None),
        Some(Err(())) => Err(state_error(StateError::Tampered)),
        Some(Ok(token)) => {
            let digest = state::params_digest(env.members());
            pol.keys
                .open(
                    &token,
                    principal.id(),
                    env.method.as_str(),
                    &bound_name(env),
                    &digest,
                    state::now_ms(),
                )
                .and_then(|s| {
                    if s.upstream == t.up.name {
                        Ok(Some(s))
                    } else {
                        Err(StateError::RequestChanged)
                    }
                })
                .map_err(state_error)
        }
    }
}

/// Consumes a round state's nonce: the first retry that presents it goes on, any replay finds
/// its exchange gone.
pub(super) async fn consume(pol: &Policy<'_>, sealed: &Sealed) -> Result<(), GatewayError> {
    let nonce = sealed
        .handle
        .as_deref()
        .ok_or_else(|| state_error(StateError::Tampered))?;
    if pol
        .governor
        .consume_state(nonce, sealed.expires_ms)
        .await
        .map_err(GatewayError::Refused)?
    {
        Ok(())
    } else {
        Err(state_error(StateError::UnknownExchange))
    }
}

fn annotations(t: &Target) -> (bool, bool) {
    let h =
        t.up.list(ListKind::Tools)
            .by_key(&t.own)
            .map(|i| i.hints)
            .unwrap_or_default();
    (h.destructive, h.read_only)
}

/// Applies the rules to a tool call before it reaches the upstream.
pub async fn gate(
    pol: &Policy<'_>,
    env: &Envelope,
    meta: &Meta,
    t: &Target,
    principal: &Principal,
) -> Result<Gate, GatewayError> {
    if env.method != Method::ToolsCall {
        return Ok(Gate::Go);
    }
    let (destructive, read_only) = annotations(t);
    let rules = pol.governor.rules();
    let d = rules.judge(&Subject {
        principal: principal.id(),
        groups: &principal.groups,
        upstream: &t.up.name,
        method: Method::ToolsCall.as_str(),
        tool: Some(&t.own),
        destructive,
        read_only,
        ask: None,
    });
    let rule = d.rule.clone().unwrap_or_default();
    crate::audit::note(|r| {
        r.policy_rule = d.rule.clone();
        r.decision = Some(match d.effect {
            // `judge` decides calls only: a visibility effect never comes back from it.
            Effect::Allow | Effect::Hide | Effect::Show => "allow",
            Effect::Deny => "deny",
            Effect::Approve => "approve",
        });
    });
    if d.effect != Effect::Deny {
        charge_quota(pol, env, t, principal).await?;
        charge_repeat(pol, env, t, principal).await?;
    }
    match d.effect {
        Effect::Allow | Effect::Hide | Effect::Show => Ok(Gate::Go),
        Effect::Deny => Err(GatewayError::Refused(Refusal::Denied {
            rule,
            reason: d.reason.unwrap_or_else(|| "not allowed".into()),
        })),
        Effect::Approve => match d.operator {
            // No client capability needed: the call waits on an operator, not on its client.
            Some(by) => Ok(Gate::Hold(by, rule)),
            None => approve(pol, env, meta, t, principal, rule).await,
        },
    }
}

/// Counts a tool call against its `[[quota]]`, once per call: at its first request. A retry
/// that carries a `requestState` continues a call already counted (a state exists only for a
/// counted call, is bound to it and is single use; a forged one is refused further on).
async fn charge_quota(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<(), GatewayError> {
    let quotas = &pol.governor.quotas;
    if quotas.is_empty() || matches!(env.param_str("requestState"), Some(Ok(_))) {
        return Ok(());
    }
    let call = crate::policy::quota::Call {
        principal: principal.id(),
        groups: &principal.groups,
        upstream: &t.up.name,
        tool: &t.own,
    };
    pol.governor.charge_quota(&call).await.map_err(|r| {
        if matches!(r, Refusal::Quota { .. }) {
            crate::audit::note(|rec| rec.decision = Some("quota"));
        }
        GatewayError::Refused(r)
    })
}

/// Counts a tool call against the identical-call breaker (`[loop_breaker]`), once per call as
/// [`charge_quota`] does: a retry with a `requestState` continues a call already counted.
async fn charge_repeat(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<(), GatewayError> {
    if matches!(env.param_str("requestState"), Some(Ok(_))) {
        return Ok(());
    }
    let call = crate::policy::loops::Call {
        principal: principal.id(),
        groups: &principal.groups,
        upstream: &t.up.name,
        tool: &t.own,
        arguments: env.param("arguments"),
    };
    pol.governor.charge_repeat(&call).await.map_err(|r| {
        if matches!(r, Refusal::Repeated { .. }) {
            crate::audit::note(|rec| rec.decision = Some("repeated"));
        }
        GatewayError::Refused(r)
    })
}

async fn approve(
    pol: &Policy<'_>,
    env: &Envelope,
    meta: &Meta,
    t: &Target,
    principal: &Principal,
    rule: String,
) -> Result<Gate, GatewayError> {
    if let Some(sealed) = open_state(pol, env, t, principal)? {
        if sealed.kind != Kind::Approval {
            return Ok(Gate::Go); // a later round of a call that was approved before it started
        }
        consume(pol, &sealed).await?;
        let responses: Map<String, Value> = env
            .param("inputResponses")
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default();
        return match approval::granted(responses.get(approval::KEY)) {
            None => Ok(Gate::Answer(ask_approval(
                pol,
                env,
                t,
                principal,
                rule,
                sealed.round + 1,
            ))),
            Some(false) => Err(GatewayError::Refused(Refusal::Declined { rule })),
            Some(true) => {
                let fresh = env.rewrite_params(|k, _| {
                    matches!(k, "requestState" | "inputResponses").then_some(None)
                });
                Ok(Gate::Approved(
                    Envelope::parse(fresh).map_err(GatewayError::from)?,
                ))
            }
        };
    }
    if !meta.capabilities.contains_key("elicitation") {
        return Err(GatewayError::MissingCapability(
            format!("policy rule {rule:?} needs your approval (an elicitation) before this tool runs; declare the elicitation capability"),
            json!({"elicitation": {}}),
        ));
    }
    Ok(Gate::Answer(ask_approval(pol, env, t, principal, rule, 1)))
}

fn ask_approval(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
    rule: String,
    round: u32,
) -> Reply {
    let bound = bound(env, t, principal, state::params_digest(env.members()));
    let expires = state::now_ms() + pol.park.as_millis() as u64;
    let sealed = Sealed {
        extra: Some(rule.clone()),
        ..Sealed::issue(Kind::Approval, bound, round, expires, pol.replica)
    };
    let msg = approval::for_call(&t.up.name, &t.own, &rule);
    let result = json!({"resultType": "input_required", "inputRequests": {approval::KEY: approval::request(&msg)},
        "requestState": pol.keys.seal(&sealed), "_meta": {crate::mcp::META_SERVER_INFO: pol.server_info}});
    Reply::Json(
        http::StatusCode::OK,
        jsonrpc::result_body(env.id_json(), &result.to_string()),
    )
}

/// A modern retry's `inputResponses`, each within `budget.max_input_response_bytes` (as for a
/// legacy upstream: an oversized answer never goes up).
fn input_responses(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<Map<String, Value>, GatewayError> {
    let max_bytes = pol
        .governor
        .budgets
        .limits(&t.up.name, &principal.groups)
        .max_input_response_bytes;
    let responses: Map<String, Value> = env
        .param("inputResponses")
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    for (key, answer) in &responses {
        let size = answer.to_string().len();
        if size > max_bytes {
            return Err(GatewayError::Refused(Refusal::TooLarge(format!(
                "inputResponses[{key:?}] is {size} bytes, over budget.max_input_response_bytes ({max_bytes})"
            ))));
        }
    }
    Ok(responses)
}

/// Opens a modern retry's state and enforces the round cap.
pub async fn modern_retry(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<Result<Retry, Reply>, GatewayError> {
    let fresh = Retry {
        round: 0,
        restore: None,
        had_state: false,
        declined: Vec::new(),
    };
    let responses = input_responses(pol, env, t, principal)?;
    let Some(sealed) = open_state(pol, env, t, principal)? else {
        return Ok(Ok(fresh));
    };
    if sealed.kind != Kind::Modern {
        // An approval round's state (the gate made the request fresh) is not a modern round.
        return Ok(Ok(fresh));
    }
    consume(pol, &sealed).await?;
    let max = pol
        .governor
        .budgets
        .limits(&t.up.name, &principal.groups)
        .max_rounds;
    if sealed.round >= max {
        return Err(GatewayError::Refused(Refusal::RoundCap(max)));
    }
    crate::audit::note(|r| r.round = Some(sealed.round));
    if let Some((held, rule)) = sealed.pending.clone() {
        // The answer to an approval round: show the held asks, or refuse; the upstream waits.
        return match approval::granted(responses.get(approval::KEY)) {
            None => Err(GatewayError::InvalidParams(
                format!(
                    "inputResponses[{:?}] is missing: answer the approval round",
                    approval::KEY
                ),
                None,
            )),
            Some(false) => Err(GatewayError::Refused(Refusal::Declined { rule })),
            Some(true) => {
                let mut next = sealed.clone();
                next.pending = None;
                next.handle = Some(state::nonce());
                next.round = sealed.round + 1;
                next.expires_ms = state::now_ms() + pol.park.as_millis() as u64;
                let requests: Value = serde_json::from_str(&held).unwrap_or_else(|_| json!({}));
                let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": pol.keys.seal(&next),
                    "_meta": {crate::mcp::META_SERVER_INFO: pol.server_info}});
                Ok(Err(Reply::Json(
                    http::StatusCode::OK,
                    jsonrpc::result_body(env.id_json(), &result.to_string()),
                )))
            }
        };
    }
    Ok(Ok(Retry {
        round: sealed.round,
        restore: sealed.extra,
        had_state: true,
        declined: sealed.declined,
    }))
}

/// The sealing template of the next modern round.
pub fn next_seal(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
    round: u32,
    elicitation: bool,
) -> crate::forward::rounds::RoundSeal {
    crate::forward::rounds::RoundSeal {
        // The digest is computed only if the upstream asks (see rounds::wrap).
        template: Sealed::issue(
            Kind::Modern,
            bound(env, t, principal, String::new()),
            round + 1,
            state::now_ms() + pol.park.as_millis() as u64,
            pol.replica,
        ),
        ctx: crate::policy::ask::AskCtx {
            principal: principal.id().to_owned(),
            groups: principal.groups.clone(),
            upstream: t.up.name.clone(),
            tool: (env.method == Method::ToolsCall).then(|| t.own.clone()),
        },
        elicitation,
        request: env.body().clone(),
    }
}
