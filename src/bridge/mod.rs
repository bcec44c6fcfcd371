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
mod round;
pub mod shared;
mod sweep;

use round::{park, reply_from, url_elicitations};
pub use shared::Bridge;
pub use sweep::{shutdown, sweep_parked, sweep_sessions};

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::auth::Principal;
use crate::ctx::RequestCtx;
use crate::dispatch::target::Target;
use crate::error::GatewayError;
use crate::mcp::jsonrpc::{self, Envelope};
use crate::mcp::method::Method;
use crate::respond::Reply;
use crate::state::{self, Sealed, StateError};
use crate::telemetry::trace::Carrier;
use crate::upstream::client::UpstreamError;
use crate::upstream::legacy::{self, session::ListChanged};
use crate::upstream::Upstream;
use crate::validate::Meta;
use exchange::{CallInfo, Event, Live, Outcome};
use park::Parked;

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
    let member = env.method.name_member();
    let name = member
        .and_then(|m| env.param_str(m))
        .and_then(Result::ok)
        .unwrap_or_default();
    let info = CallInfo {
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
    };
    let supplied: Map<String, Value> = match env.param("inputResponses") {
        None => Map::new(),
        Some(raw) => serde_json::from_str(raw).map_err(|_| {
            GatewayError::InvalidParams(
                "inputResponses must be an object keyed by input key".into(),
                None,
            )
        })?,
    };
    let id = env.id_json().to_owned();
    let (tx, rx) = mpsc::channel(64);
    match env.param_str("requestState") {
        Some(Err(())) => return Err(state_error(StateError::Tampered)),
        Some(Ok(token)) => {
            let sealed = br
                .keys
                .open(
                    &token,
                    &info.principal,
                    info.method.as_str(),
                    &info.name,
                    &info.digest,
                    state::now_ms(),
                )
                .and_then(|s| {
                    if s.upstream == t.up.name {
                        Ok(s)
                    } else {
                        Err(StateError::RequestChanged)
                    }
                })
                .map_err(state_error)?;
            let handle = sealed
                .handle
                .clone()
                .filter(|_| sealed.kind == state::Kind::Bridge)
                .ok_or_else(|| state_error(StateError::Tampered))?;
            crate::audit::note(|r| r.round = Some(sealed.round));
            if let Some(elsewhere) = to_owner(br, ctx, &sealed).await {
                return elsewhere;
            }
            let limits = br
                .governor
                .budgets
                .limits(&t.up.name, &principal.groups)
                .clone();
            // The round cap: the retry that answers the last allowed round is refused and the
            // upstream's call cancelled, so a server cannot loop on the user's model.
            if sealed.round >= limits.max_rounds {
                br.release(&principal.id, &handle);
                if let Some(mut l) = br.parked.take(&handle).and_then(|p| p.live) {
                    l.cancel(br, "the request reached the gateway's round cap")
                        .await;
                }
                return Err(GatewayError::Refused(crate::policy::Refusal::RoundCap(
                    limits.max_rounds,
                )));
            }
            let checked = br
                .parked
                .peek(&handle, |p| {
                    check_answers(p, &sealed, &supplied, limits.max_input_response_bytes)
                })
                .ok_or_else(|| state_error(StateError::UnknownExchange))?;
            let retry = checked?;
            let parked = br
                .parked
                .take(&handle)
                .ok_or_else(|| state_error(StateError::UnknownExchange))?;
            br.release(&parked.info.principal, &handle);
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
    let f = crate::cluster::forward::Forward {
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

type Answered = Vec<(String, String)>;

/// What a retry brings.
enum Retry {
    /// Answers to asks (upstream id, result JSON) and the asks still unanswered.
    Answers(Answered, Vec<asks::Ask>),
    /// The approval round was granted: show the asks now.
    Approved,
    /// The approval round was declined (the rule).
    Declined(String),
}

fn check_answers(
    p: &Parked,
    sealed: &Sealed,
    supplied: &Map<String, Value>,
    max_bytes: usize,
) -> Result<Retry, GatewayError> {
    let bad = |m: String| GatewayError::InvalidParams(m, None);
    if p.round != sealed.round || p.info.principal != sealed.principal {
        return Err(bad(
            "requestState does not match the exchange's current round; use the latest requestState"
                .into(),
        ));
    }
    if p.approving {
        let rule = p
            .asks
            .iter()
            .find_map(|a| a.approval.clone())
            .unwrap_or_default();
        return Ok(
            match crate::policy::approval::granted(supplied.get(crate::policy::approval::KEY)) {
                None => Retry::Answers(Vec::new(), p.asks.clone()),
                Some(true) => Retry::Approved,
                Some(false) => Retry::Declined(rule),
            },
        );
    }
    let mut answered = Vec::new();
    let mut missing = Vec::new();
    for a in &p.asks {
        match supplied.get(&a.key) {
            Some(v) => {
                let size = v.to_string().len();
                if size > max_bytes {
                    return Err(GatewayError::Refused(crate::policy::Refusal::TooLarge(format!(
                        "inputResponses[{:?}] is {size} bytes, over budget.max_input_response_bytes ({max_bytes})",
                        a.key
                    ))));
                }
                answered.push((
                    a.id.clone(),
                    asks::validate(&a.method, v)
                        .map_err(|why| bad(format!("inputResponses[{:?}]: {why}", a.key)))?,
                ))
            }
            None => missing.push(a.clone()),
        }
    }
    Ok(Retry::Answers(answered, missing))
}

async fn resume(
    br: Arc<Bridge>,
    mut live: Live,
    round: u32,
    asked: Vec<asks::Ask>,
    retry: Retry,
    tx: mpsc::Sender<Event>,
    id: String,
    on: On,
) {
    let up = &on.up;
    live.round = round;
    let (answered, missing) = match retry {
        Retry::Answers(a, m) => (a, m),
        Retry::Approved => {
            live.asks = asked
                .into_iter()
                .map(|a| asks::Ask {
                    approval: None,
                    ..a
                })
                .collect();
            return conclude(&br, live, Outcome::Asks, &tx, &id, up).await;
        }
        Retry::Declined(rule) => {
            for a in asked.iter().filter(|a| a.approval.is_some()) {
                live.lease
                    .session
                    .reply(
                        &br.client,
                        &a.id,
                        Err((-1, "User rejected the request (approval declined)")),
                    )
                    .await;
            }
            live.cancel(&br, "the user declined the approval").await;
            let _ = tx
                .send(Event::Reply(Reply::refusal(
                    &id,
                    &crate::policy::Refusal::Declined { rule },
                )))
                .await;
            return;
        }
    };
    for (ask_id, result) in &answered {
        live.lease
            .session
            .reply(&br.client, ask_id, Ok(result))
            .await;
    }
    if !missing.is_empty() {
        live.asks = missing;
        return conclude(&br, live, Outcome::Asks, &tx, &id, up).await;
    }
    run(br, live, Map::new(), tx, id, on).await
}

/// The upstream an exchange runs on, and what its new sessions do with list changes.
struct On {
    up: Arc<Upstream>,
    hook: ListChanged,
}

async fn run(
    br: Arc<Bridge>,
    mut live: Live,
    mut supplied: Map<String, Value>,
    tx: mpsc::Sender<Event>,
    id: String,
    on: On,
) {
    let up = &on.up;
    let mut outcome = live.drive(&br, &tx, &mut supplied).await;
    // A new session on 404, once, when nothing of the call has reached the client yet.
    if matches!(outcome, Outcome::Failed(UpstreamError::SessionGone(_)))
        && live.round == 0
        && live.asks.is_empty()
    {
        let caps = legacy::legacy_capabilities(&live.info.caps);
        let principal = live.info.principal.clone();
        if let Ok(lease) = br.pool.lease(up, &principal, &caps, on.hook.clone()).await {
            live = live.restart(&br, lease);
            outcome = live.drive(&br, &tx, &mut supplied).await;
        }
    }
    conclude(&br, live, outcome, &tx, &id, up).await
}

async fn conclude(
    br: &Arc<Bridge>,
    mut live: Live,
    outcome: Outcome,
    tx: &mpsc::Sender<Event>,
    id: &str,
    up: &Arc<Upstream>,
) {
    let error = |status: StatusCode, e: &GatewayError| {
        let (_, code, data) = e.classify();
        Event::Final(
            status,
            jsonrpc::error_body(id, code, &e.to_string(), data.as_ref()),
        )
    };
    let outcome = match outcome {
        // A -32042 answer is a round of URL elicitations, judged like any other asks.
        Outcome::Final(data) => match url_elicitations(br, &live, &data).await {
            Some(Ok(asks)) => {
                live.asks = asks;
                live.finished = true;
                let ev = park(br, live, true, id, up).await;
                let _ = tx.send(ev).await;
                return;
            }
            Some(Err(refused)) => refused,
            None => Outcome::Final(data),
        },
        other => other,
    };
    let event = match outcome {
        Outcome::Final(data) => {
            let info = &live.info;
            let (s, b) = crate::respond::finish(
                id,
                &info.method,
                &up.name,
                StatusCode::OK,
                &data,
                info.uri.as_deref(),
                &br.server_info_json,
            );
            Event::Final(s, b)
        }
        Outcome::Asks
            if live.asks.iter().any(|a| a.approval.is_some())
                && !live.info.caps.contains_key("elicitation") =>
        {
            live.cancel(
                br,
                "approval needs elicitation, which the client did not declare",
            )
            .await;
            let msg = "a gateway policy needs your approval (an elicitation) before this goes on; declare the elicitation capability";
            Event::Final(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_body(
                    id,
                    jsonrpc::MISSING_CAPABILITY,
                    msg,
                    Some(&json!({"requiredCapabilities": {"elicitation": {}}})),
                ),
            )
        }
        Outcome::Asks => park(br, live, false, id, up).await,
        Outcome::Refused(r) => {
            live.cancel(br, "refused by the gateway").await;
            Event::Reply(Reply::refusal(id, &r))
        }
        Outcome::MissingCapability(needed) => {
            live.cancel(br, "the client lacks a capability the request needs")
                .await;
            let msg = "the upstream asked for something the client did not declare the capability for; declare it in clientCapabilities and retry";
            Event::Final(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_body(
                    id,
                    jsonrpc::MISSING_CAPABILITY,
                    msg,
                    Some(&json!({"requiredCapabilities": needed})),
                ),
            )
        }
        Outcome::BadAnswer(why) => {
            live.cancel(br, "malformed input response").await;
            error(
                StatusCode::BAD_REQUEST,
                &GatewayError::InvalidParams(why, None),
            )
        }
        Outcome::Failed(e) => {
            tracing::debug!(upstream = %up.name, error = %crate::escape::Escaped(&e), round = live.round, "legacy exchange failed");
            live.lease
                .session
                .broken
                .store(true, std::sync::atomic::Ordering::Release);
            let e = GatewayError::from(e);
            error(e.classify().0, &e)
        }
        Outcome::ClientGone => {
            live.cancel(br, "the client disconnected").await;
            return;
        }
    };
    let _ = tx.send(event).await;
}
