//! Stage 6, dispatch: local answers (discovery, federated lists, listen) or a forward.
//!
//! Takes a validated request and its resolved target; gives the [`Reply`]. Refuses a list
//! cursor Sluice did not issue and a routed request whose name or URI no upstream serves
//! (`-32602`), and reports a down upstream by name.

pub mod available;
pub mod discover;
pub mod forward;
pub mod govern;
pub mod lists;
pub mod rounds;
pub mod route;

use std::sync::Arc;

use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::listen::{client_listen, Filter};
use crate::mcp::method::Method;
use crate::respond::Reply;
use crate::route::table::ListKind;

pub use crate::ctx::target::Target;

/// Answers a validated request.
pub async fn dispatch(gw: &Arc<Generation>, ctx: &RequestCtx<'_>) -> Result<Reply, GatewayError> {
    let (env, principal) = (&ctx.env, ctx.principal);
    let id = env.id_json();
    match &env.method {
        Method::ServerDiscover => {
            discover::first_probes(gw, principal).await;
            Ok(Reply::Json(
                http::StatusCode::OK,
                crate::mcp::jsonrpc::result_body(id, &discover::result(gw, principal)),
            ))
        }
        Method::SubscriptionsListen => {
            let asked = Filter::parse(
                env.param("notifications"),
                gw.cfg.limits.max_resource_subscriptions,
            )
            .map_err(|m| GatewayError::InvalidParams(m, None))?;
            let honoured = Filter {
                tools: asked.tools && gw.serves_for(principal, "tools"),
                prompts: asked.prompts && gw.serves_for(principal, "prompts"),
                resources: asked.resources && gw.serves_for(principal, "resources"),
                uris: if gw.serves_for(principal, "resources") {
                    asked.uris
                } else {
                    Vec::new()
                },
            };
            Ok(Reply::Sse(
                client_listen(gw.clone(), id.to_owned(), honoured, principal.clone()).into(),
            ))
        }
        m => match ListKind::from_method(m) {
            Some(kind) => Box::pin(lists::serve(gw, env, kind, principal)).await,
            None => {
                let target = ctx.target.as_ref().ok_or_else(|| {
                    GatewayError::from(crate::validate::ValidateError::Method(m.to_string()))
                })?;
                crate::link::call(gw, ctx, target).await
            }
        },
    }
}
