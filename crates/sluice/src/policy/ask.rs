//! Judging one ask an upstream makes of the client (sampling, elicitation, roots): size, rules,
//! `maxTokens` cap, and the principal's sampling and token budgets.
//!
//! Takes the ask's method and params (the params may be changed: `maxTokens` clamped) and who
//! asks for whom; gives [`AskVerdict`]: allow, deny (this ask only), refuse (the whole call),
//! or approve first.

use serde_json::Value;

use super::rules::{Effect, Subject};
use super::shape::AskShape;
use super::Refusal;
use crate::config::MaxTokensAction;
use crate::mcp::method::Method;

/// Who asks what for whom.
#[derive(Debug, Clone, Default)]
pub struct AskCtx {
    /// The principal.
    pub principal: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// The upstream asking.
    pub upstream: String,
    /// The tool (upstream's own name) whose call the ask belongs to.
    pub tool: Option<String>,
}

/// What happens to one ask.
#[derive(Debug, Clone, PartialEq)]
pub enum AskVerdict {
    /// It goes to the client.
    Allow,
    /// This ask is refused; a legacy upstream's call goes on.
    Deny(Refusal),
    /// The whole call is refused.
    Refuse(Refusal),
    /// An approval round comes first (the rule's name).
    Approve(String),
    /// The ask breaks its schema where it decides something (`maxTokens` not a non-negative
    /// integer, an unknown `includeContext`…): the upstream's protocol error (the reason).
    Malformed(String),
}

/// Judges an ask (`raw`: its params as received; `params`: the same, parsed, rewritten when
/// the ask goes on: `maxTokens` written as the exact integer judged, or clamped). Charges the
/// budgets when it may go on, and notes a deny or approval in the audit record.
pub async fn judge(
    gov: &super::Governor,
    ctx: &AskCtx,
    method: &Method,
    raw: Option<&str>,
    params: &mut Value,
) -> AskVerdict {
    let limits = gov.budgets.limits(&ctx.upstream, &ctx.groups);
    let shape = match AskShape::read(method, raw) {
        Ok(s) => s,
        Err(why) => return AskVerdict::Malformed(why),
    };
    if shape.bytes > limits.max_input_request_bytes {
        return AskVerdict::Refuse(Refusal::TooLarge(format!(
            "the upstream's {method} is {} bytes, over budget.max_input_request_bytes ({})",
            shape.bytes, limits.max_input_request_bytes
        )));
    }
    let rules = gov.rules();
    let decision = rules.judge(&Subject {
        principal: &ctx.principal,
        groups: &ctx.groups,
        upstream: &ctx.upstream,
        method: method.as_str(),
        tool: ctx.tool.as_deref(),
        ask: Some(&shape),
        ..Default::default()
    });
    let rule = decision.rule.clone().unwrap_or_default();
    match decision.effect {
        Effect::Deny => {
            let reason = decision.reason.unwrap_or_else(|| "not allowed".into());
            tracing::info!(principal = ?ctx.principal, upstream = %ctx.upstream, method = method.as_str(), rule = %rule, "ask denied by policy");
            note(Some(&rule), "deny");
            return AskVerdict::Deny(Refusal::Denied { rule, reason });
        }
        Effect::Approve | Effect::Allow | Effect::Hide | Effect::Show => {}
    }
    if *method == Method::SamplingCreateMessage {
        let mut max = shape.max_tokens;
        if max > limits.max_tokens_per_ask {
            match limits.max_tokens_action {
                MaxTokensAction::Deny => {
                    note(None, "deny");
                    return AskVerdict::Deny(Refusal::TooLarge(format!(
                        "the upstream asked for maxTokens {max}, over budget.max_tokens_per_ask ({})",
                        limits.max_tokens_per_ask
                    )));
                }
                MaxTokensAction::Clamp => max = limits.max_tokens_per_ask,
            }
        }
        // What the client is shown is exactly what was judged and charged.
        if let Some(p) = params.as_object_mut() {
            p.insert("maxTokens".into(), max.into());
        }
        let charged = gov.charge_sampling(ctx, max).await;
        if let Err(r) = charged {
            tracing::info!(principal = ?ctx.principal, upstream = %ctx.upstream, "sampling budget refused an ask");
            return AskVerdict::Refuse(match r {
                super::budget::Refusal::Sampling(d) => Refusal::Sampling {
                    retry_after_ms: d.as_millis().max(1) as u64,
                },
                super::budget::Refusal::Tokens(d) => Refusal::Tokens {
                    retry_after_ms: d.as_millis().max(1) as u64,
                },
                super::budget::Refusal::TokensNever(n) => Refusal::TokensNever(n),
                super::budget::Refusal::Unavailable => Refusal::SharedState,
            });
        }
    }
    if decision.effect == Effect::Approve {
        note(Some(&rule), "approve");
        return AskVerdict::Approve(rule);
    }
    AskVerdict::Allow
}

/// Records an ask's decision: a deny or an approval outranks the call's own `allow`.
fn note(rule: Option<&str>, decision: &'static str) {
    crate::audit::note(|r| {
        if r.decision != Some("deny") {
            r.decision = Some(decision);
            if let Some(rule) = rule {
                r.policy_rule = Some(rule.to_owned());
            }
        }
    });
}
