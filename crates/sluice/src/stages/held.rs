//! A tool call an `approver = "operator"` rule holds: registered (`approvals`), answered on
//! SSE while it waits, and once approved run on from where the policy stage left it (the way
//! its target's era takes it, then dispatch), exactly as a call approved by its user goes on.
//!
//! Takes the request's context after the gates; gives the held call's SSE reply. Refuses a call
//! past `[approvals]`' caps (`-31053`).

use std::sync::Arc;

use super::{dispatch, error_reply, sign_in_again, way, RequestCtx};
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::policy::{ByOperator, Refusal};
use crate::respond::Reply;

/// Holds the call for an operator; its stream answers.
pub(super) fn hold(
    gw: &Arc<Generation>,
    ctx: RequestCtx<'_>,
    by: &ByOperator,
    rule: &str,
) -> Result<Reply, GatewayError> {
    let t = ctx
        .target
        .clone()
        .ok_or_else(|| GatewayError::Refused(Refusal::Declined { rule: rule.into() }))?;
    let cfg = &gw.cfg.approvals;
    let held = crate::approvals::hold::describe(
        &ctx.env,
        &t,
        ctx.principal,
        by,
        rule,
        cfg,
        &gw.cfg.state.replica,
    );
    let limits = crate::approvals::Limits {
        total: cfg.max_held,
        per_principal: cfg.max_held_per_principal,
    };
    let ticket = gw
        .rt
        .approvals
        .hold(held, limits)
        .map_err(GatewayError::Refused)?;
    let id_json = ctx.env.id_json().to_owned();
    let token = crate::approvals::hold::progress_token(&ctx.env);
    let webhook = cfg
        .webhook
        .as_ref()
        .and_then(|w| crate::approvals::webhook::Sender::new(w, gw.rt.client.clone()));
    let owned = Owned {
        gw: gw.clone(),
        principal: ctx.principal.clone(),
        env: ctx.env,
        meta: ctx.meta,
        target: t,
        headers: ctx.headers.into_owned(),
        legacy_client: ctx.legacy_client,
    };
    let then: crate::approvals::hold::Then = Box::new(move || Box::pin(owned.resume()));
    Ok(crate::approvals::hold::stream(
        ticket, cfg, id_json, token, webhook, then,
    ))
}

/// What the approved call needs to go on, owned by its stream's task.
struct Owned {
    gw: Arc<Generation>,
    principal: crate::auth::Principal,
    env: crate::mcp::jsonrpc::Envelope,
    meta: crate::validate::Meta,
    target: crate::ctx::target::Target,
    headers: http::HeaderMap,
    legacy_client: bool,
}

impl Owned {
    /// The approved call, from the way its target's era takes it to its answer.
    async fn resume(self) -> Reply {
        let Owned {
            gw,
            principal,
            env,
            meta,
            target,
            headers,
            legacy_client,
        } = self;
        let (id, method) = (env.id_json().to_owned(), env.method.clone());
        let mut ctx = RequestCtx {
            principal: &principal,
            env,
            meta,
            target: Some(target),
            headers: std::borrow::Cow::Owned(headers),
            legacy_client,
            way: None,
            retry: None,
        };
        let out = async {
            if let Some(reply) = way(&gw, &mut ctx).await? {
                return Ok(reply);
            }
            let reach = gw.reach.for_principal(&principal).await;
            let reply = dispatch::dispatch(&gw.dispatcher(&reach), &ctx).await;
            sign_in_again(&gw, &ctx, reply).await
        }
        .await;
        match out {
            Ok(reply) => reply,
            Err(e) => error_reply(&gw, &id, &method, e),
        }
    }
}
