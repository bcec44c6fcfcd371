//! Bridge A: a modern client calling a legacy (2025-11-25) upstream that asks things mid-call.
//!
//! Takes a routed `tools/call`, `prompts/get`, `resources/read` or `completion/complete` for a
//! legacy upstream; gives the final result, or an `input_required` round with one input request
//! per upstream ask and a sealed `requestState` naming the parked exchange. On the retry it
//! opens the state, checks the answers' shapes, posts them upstream as the responses to its asks
//! and reads on. Refuses with `-32602` and `data.reason` a state that is tampered, expired,
//! another principal's, for another request, or for an exchange that is gone; with `-32021` an
//! ask the client has no capability for.

pub mod asks;
pub mod exchange;
pub mod park;
mod post;
mod retry;
mod round;
mod run;
pub mod shared;
mod sweep;

use retry::{open_state, resume, take_checked};
use round::reply_from;
use run::{run, On};
pub use shared::Bridge;
pub use sweep::{shutdown, sweep_parked, sweep_sessions};

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::auth::Principal;
use crate::ctx::target::Target;
use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::mcp::jsonrpc::Envelope;
use crate::mcp::method::Method;
use crate::respond::Reply;
use crate::state::{self, Sealed, StateError};
use crate::telemetry::trace::Carrier;
use crate::upstream::client::UpstreamError;
use crate::upstream::legacy::{self, session::ListChanged};
use crate::upstream::Upstream;
use crate::validate::Meta;
use exchange::{CallInfo, Live};

fn state_error(e: StateError) -> GatewayError {
    GatewayError::InvalidParams(e.to_string(), Some(json!({"reason": e.reason()})))
}

/// The legacy request for a modern one: the upstream's own name, no modern `_meta` keys (the
/// progress token and foreign keys stay), no `inputResponses` or `requestState`.
fn legacy_body(env: &Envelope, t: &Target, id: u64, trace: Option<&Carrier>) -> Bytes {
    let own = Value::String(t.own.clone()).to_string();
    env.rewrite(Some(&id.to_string()), |k, raw| match k {
        "inputResponses" | "requestState" => Some(None),
        "name" if t.renamed => Some(Some(own.clone())),
        "_meta" => {
            let mut meta: Map<String, Value> = serde_json::from_str(raw).unwrap_or_default();
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
            if let Some(c) = trace {
                c.put_map(&mut meta); // the round's span, in place of the client's
            }
            Some((!meta.is_empty()).then(|| Value::Object(meta).to_string()))
        }
        _ => None,
    })
}

/// Serves a routed request on a legacy upstream. `hook` is what a new session of the
/// upstream's does with a list-changed notification on its GET stream (the catalog's).
pub async fn call(
    br: &Arc<Bridge>,
    ctx: &RequestCtx<'_>,
    t: &Target,
    hook: ListChanged,
) -> Result<Reply, GatewayError> {
    let (env, meta, principal) = (&ctx.env, &ctx.meta, ctx.principal);
    let info = call_info(ctx, t);
    let supplied = supplied_answers(env)?;
    let id = env.id_json().to_owned();
    let (tx, rx) = mpsc::channel(64);
    match env.param_str("requestState") {
        Some(Err(())) => return Err(state_error(StateError::Tampered)),
        Some(Ok(token)) => {
            let (sealed, handle) = open_state(br, &info, t, &token)?;
            crate::audit::note(|r| r.round = Some(sealed.round));
            if let Some(elsewhere) = to_owner(br, ctx, &sealed).await {
                return elsewhere;
            }
            let (parked, retry) =
                take_checked(br, principal, t, &sealed, &handle, &supplied).await?;
            let span = crate::telemetry::trace::round(&t.up.name, parked.round);
            let live = match parked.live {
                Some(live) => live,
                None => {
                    start(br, env, meta, t, principal, info, hook.clone())
                        .instrument(span.clone())
                        .await?
                }
            };
            // Boxed: a finished task's cell outlives it while the parked exchange's channels hold
            // its wakers, and a boxed future is freed as soon as it completes.
            crate::audit::spawn(Box::pin(
                resume(
                    br.clone(),
                    live,
                    parked.round,
                    parked.asks,
                    retry,
                    tx,
                    id,
                    On {
                        up: t.up.clone(),
                        hook,
                    },
                )
                .instrument(span),
            ));
        }
        None => {
            let span = crate::telemetry::trace::round(&t.up.name, 0);
            let live = start(br, env, meta, t, principal, info, hook.clone())
                .instrument(span.clone())
                .await?;
            crate::audit::spawn(Box::pin(
                run(
                    br.clone(),
                    live,
                    supplied,
                    tx,
                    id,
                    On {
                        up: t.up.clone(),
                        hook,
                    },
                )
                .instrument(span),
            ));
        }
    }
    Ok(reply_from(rx, env.id_json(), &t.up.name).await)
}

/// What the exchange serves, as its sealed states bind it: who asks what, with which params,
/// capabilities and log level, on which upstream.
fn call_info(ctx: &RequestCtx<'_>, t: &Target) -> CallInfo {
    let (env, meta, principal) = (&ctx.env, &ctx.meta, ctx.principal);
    let member = env.method.name_member();
    let name = member
        .and_then(|m| env.param_str(m))
        .and_then(Result::ok)
        .unwrap_or_default();
    CallInfo {
        principal: principal.id().to_owned(),
        method: env.method.clone(),
        name,
        digest: state::params_digest(env.members()),
        caps: meta.capabilities.clone(),
        log_level: meta.log_level,
        uri: (env.method == Method::ResourcesRead).then(|| t.own.clone()),
        ctx: crate::policy::ask::AskCtx {
            principal: principal.id().to_owned(),
            groups: principal.groups.clone(),
            upstream: t.up.name.clone(),
            tool: (env.method == Method::ToolsCall).then(|| t.own.clone()),
        },
        legacy_client: ctx.legacy_client,
    }
}

/// The answers the request brings in `inputResponses` (none without it); refused unless an
/// object.
fn supplied_answers(env: &Envelope) -> Result<Map<String, Value>, GatewayError> {
    Ok(match env.param("inputResponses") {
        None => Map::new(),
        Some(raw) => serde_json::from_str(raw).map_err(|_| {
            GatewayError::InvalidParams(
                "inputResponses must be an object keyed by input key".into(),
                None,
            )
        })?,
    })
}

/// A retry for an exchange parked on another replica goes on to it, and its answer comes back
/// (`None`: parked here, or no `[cluster]`).
async fn to_owner(
    br: &Bridge,
    ctx: &RequestCtx<'_>,
    sealed: &Sealed,
) -> Option<Result<Reply, GatewayError>> {
    let c = br
        .governor
        .cluster
        .as_ref()
        .filter(|c| sealed.owner != c.id())?;
    crate::audit::note(|r| r.owner = Some(sealed.owner.clone()));
    let f = crate::handoff::Forward {
        owner: &sealed.owner,
        method: http::Method::POST,
        headers: &ctx.headers,
        principal: ctx.principal,
        body: ctx.env.body().clone(),
        id: ctx.env.id_json(),
    };
    Some(c.forward(&br.client, &br.keys, f).await)
}

async fn start(
    br: &Arc<Bridge>,
    env: &Envelope,
    meta: &Meta,
    t: &Target,
    principal: &Principal,
    info: CallInfo,
    hook: ListChanged,
) -> Result<Live, GatewayError> {
    let caps = legacy::legacy_capabilities(&meta.capabilities);
    let lease = match br
        .pool
        .lease(&t.up, principal.id(), &caps, hook.clone())
        .await
    {
        Err(UpstreamError::Full(full))
            if matches!(full.pool, crate::shares::Pool::Processes(_)) =>
        {
            // Every process this principal may use is held: if one is held by its own exchange
            // parked longest (its client has not come back for it), the new call goes first.
            if !make_room(br, principal.id(), &t.up).await {
                return Err(UpstreamError::Full(full).into());
            }
            br.pool.lease(&t.up, principal.id(), &caps, hook).await?
        }
        other => other?,
    };
    if let (Some(rank), true) = (meta.log_level, t.up.serves("logging")) {
        let level = [
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
        ][rank as usize];
        let id = lease.session.next_id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": Method::LoggingSetLevel.as_str(), "params": {"level": level}});
        let _ = lease
            .session
            .request(
                &br.client,
                id,
                Bytes::from(body.to_string()),
                br.limits.response,
            )
            .await;
    }
    let (env, t) = (env.detached(), t.clone()); // it outlives the request: not its read buffer
    let trace = Carrier::of(&tracing::Span::current());
    Ok(Live::start(
        br,
        lease,
        move |id| legacy_body(&env, &t, id, trace.as_ref()),
        info,
    ))
}

/// Cancels `principal`'s exchange parked longest on stdio upstream `up` (the one whose client
/// is likeliest gone), so the process it holds ends and a new call of the same principal takes
/// its place; its retry finds no exchange (`unknown_exchange`) and the client calls afresh.
/// Another principal's exchange is never taken: shares keep principals apart.
async fn make_room(br: &Arc<Bridge>, principal: &str, up: &Arc<Upstream>) -> bool {
    if up.stdio.is_none() {
        return false;
    }
    let Some((handle, parked)) = br.parked.take_oldest_of(principal, |p| {
        p.live.is_some() && p.up.instance == up.instance
    }) else {
        return false;
    };
    br.release(principal, &handle);
    if let Some(mut live) = parked.live {
        live.cancel(br, "a newer call of the same principal needed its process")
            .await;
    }
    tracing::info!(upstream = %up.name, "a parked exchange was cancelled: its principal's new call needed the stdio process it held");
    true
}
