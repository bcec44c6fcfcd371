//! Stage 6, dispatch: local answers (discovery, federated lists, listen) or a forward.
//!
//! Takes a validated request and its resolved target; gives the [`Reply`]. Refuses a list
//! cursor Sluice did not issue and a routed request whose name or URI no upstream serves
//! (`-32602`), and reports a down upstream by name.

pub mod available;
pub mod consent;
pub mod discover;
pub mod govern;
pub mod lists;
pub mod route;
mod withheld;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::catalog::Reach;
use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::forward::Forwarder;
use crate::link::Way;
use crate::listen::{client_listen, Filter, Opened};
use crate::mcp::method::Method;
use crate::respond::Reply;
use crate::route::table::ListKind;

pub use crate::ctx::target::Target;
pub use govern::Policy;

/// What dispatch takes of the generation serving the request (the root builds it: dispatch
/// names no generation).
pub struct Dispatcher<'a> {
    /// The catalog under the generation's scopes and visibility rules.
    pub reach: &'a Arc<Reach>,
    /// The policy stage's handles (a modern call's rounds are judged and sealed there).
    pub policy: Policy<'a>,
    /// Forwarding to 2026-07-28 upstreams.
    pub forwarder: &'a Arc<Forwarder>,
    /// Bridge A, for calls on 2025-11-25 sessions.
    pub bridge: &'a Arc<crate::bridge::Bridge>,
    /// Cancelled when a reload changes who may authenticate: listen streams end with it.
    pub revoked: &'a CancellationToken,
}

/// Answers a validated request.
pub async fn dispatch(d: &Dispatcher<'_>, ctx: &RequestCtx<'_>) -> Result<Reply, GatewayError> {
    let (env, principal) = (&ctx.env, ctx.principal);
    let id = env.id_json();
    match &env.method {
        Method::ServerDiscover => {
            discover::first_probes(d.reach, principal).await;
            Ok(Reply::Json(
                http::StatusCode::OK,
                crate::mcp::jsonrpc::result_body(
                    id,
                    &discover::result(d.reach, d.policy.server_info, principal),
                ),
            ))
        }
        Method::SubscriptionsListen => {
            let asked = Filter::parse(
                env.param("notifications"),
                d.reach.catalog.limits.max_resource_subscriptions,
            )
            .map_err(|m| GatewayError::InvalidParams(m, None))?;
            let honoured = Filter {
                tools: asked.tools && d.reach.serves_for(principal, "tools"),
                prompts: asked.prompts && d.reach.serves_for(principal, "prompts"),
                resources: asked.resources && d.reach.serves_for(principal, "resources"),
                uris: if d.reach.serves_for(principal, "resources") {
                    asked.uris
                } else {
                    Vec::new()
                },
            };
            Ok(Reply::Sse(
                client_listen(
                    d.reach.clone(),
                    Opened {
                        revoked: d.revoked.clone(),
                        server_info: d.policy.server_info.clone(),
                    },
                    id.to_owned(),
                    honoured,
                    principal.clone(),
                )
                .into(),
            ))
        }
        m => match ListKind::from_method(m) {
            Some(kind) => {
                Box::pin(lists::serve(
                    d.reach,
                    d.policy.server_info,
                    env,
                    kind,
                    principal,
                ))
                .await
            }
            None => {
                let target = ctx.target.as_ref().ok_or_else(|| {
                    GatewayError::from(crate::validate::ValidateError::Method(m.to_string()))
                })?;
                call(d, ctx, target).await
            }
        },
    }
}

/// A client's routed call, served the way the policy stage found the target's era takes it
/// (`link/` decides).
async fn call(d: &Dispatcher<'_>, ctx: &RequestCtx<'_>, t: &Target) -> Result<Reply, GatewayError> {
    let way = ctx.way.clone();
    match way.unwrap_or_else(|| {
        d.reach
            .catalog
            .link
            .way(&t.up, &t.up.status(), ctx.legacy_client)
    }) {
        Way::Forward => route::forward(&d.policy, d.forwarder, ctx, t).await,
        Way::Sessions(changes) => Box::pin(crate::bridge::call(d.bridge, ctx, t, changes)).await,
    }
}
