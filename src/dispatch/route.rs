//! Routing a call: `tools/call` and `prompts/get` by public name, `resources/read` by URI,
//! `completion/complete` by its ref; then the forward with the upstream's own name.
//!
//! Takes the envelope; gives the [`Target`] (upstream, its own name, the tool's header
//! annotations). Refuses a name or URI no upstream serves with `-32602` that names only what
//! the client asked for, and a call to a down upstream with an error naming it.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::forward::{forward as send, Call, MakeSeal};
use crate::auth::Principal;
pub use crate::ctx::target::Target;
use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::mcp::jsonrpc::Envelope;
use crate::mcp::method::Method;
use crate::policy::visibility::{Listed, Viewer};
use crate::respond::Reply;
use crate::route::table::{ListKind, ToolHints};
use crate::route::uri;
use crate::upstream::Upstream;

fn unknown(kind: &str, name: &str) -> GatewayError {
    GatewayError::UnknownTarget(
        format!("unknown {kind}: {name:?}; list them with {kind}s/list"),
        None,
    )
}

/// Resolves the target of a routed method; `Ok(None)` for methods that are not routed.
///
/// While a reload's replaced generation drains, a round's retry that this config would route
/// nowhere, or to another upstream than its round's, is routed as that generation would have,
/// when its `requestState` opens (the MAC and every binding checked here, before anything else
/// looks at the request) as the round of an upstream's call (not an approval round: no call
/// starts on a removed upstream) and leads to the upstream the reload retired. Everything else
/// is routed by this generation only.
pub async fn resolve(
    gw: &Arc<Generation>,
    env: &Envelope,
    principal: &Principal,
) -> Result<Option<Target>, GatewayError> {
    let current = resolve_in(gw, env, principal).await;
    if !gw.rt.live.draining() || env.param("requestState").is_none() {
        return current;
    }
    let Some(upstream) = (match &current {
        Err(GatewayError::UnknownTarget(..)) => continuing(gw, env, principal),
        Ok(Some(t)) => continuing(gw, env, principal).filter(|u| *u != t.up.name),
        _ => None,
    }) else {
        return current;
    };
    match Box::pin(on_retired(gw, env, principal, &upstream)).await {
        Some(t) => {
            // The call it goes on with may take the longest a request may: its upstream stays.
            t.up.hold_until(crate::state::now_ms() + gw.cfg.timeouts.request.as_millis() as u64);
            Ok(Some(t))
        }
        None => current,
    }
}

/// The upstream a continuation round state names, when the request carries one that opens.
fn continuing(gw: &Generation, env: &Envelope, principal: &Principal) -> Option<String> {
    let token = env.param_str("requestState")?.ok()?;
    let digest = crate::state::params_digest(env.members());
    let name = super::govern::bound_name(env);
    let sealed = gw
        .bridge
        .keys
        .open(
            &token,
            principal.id(),
            env.method.as_str(),
            &name,
            &digest,
            crate::state::now_ms(),
        )
        .ok()?;
    matches!(
        sealed.kind,
        crate::state::Kind::Bridge | crate::state::Kind::Modern
    )
    .then_some(sealed.upstream)
}

/// The request routed by a draining generation to `upstream`, retired by a reload.
async fn on_retired(
    gw: &Generation,
    env: &Envelope,
    principal: &Principal,
    upstream: &str,
) -> Option<Target> {
    for old in gw.rt.live.retired() {
        if let Ok(Some(t)) = resolve_in(&old, env, principal).await {
            if t.up.name == upstream && t.up.retired.is_cancelled() {
                return Some(t);
            }
        }
    }
    None
}

async fn resolve_in(
    gw: &Arc<Generation>,
    env: &Envelope,
    principal: &Principal,
) -> Result<Option<Target>, GatewayError> {
    let bad = |m: &str| GatewayError::InvalidParams(m.to_owned(), None);
    match env.method {
        Method::ToolsCall => {
            let name = env
                .param_text("name")
                .and_then(Result::ok)
                .ok_or_else(|| bad("params.name must be the tool's name (a string)"))?;
            named(gw, ListKind::Tools, &name, principal).await.map(Some)
        }
        Method::PromptsGet => {
            let name = env
                .param_text("name")
                .and_then(Result::ok)
                .ok_or_else(|| bad("params.name must be the prompt's name (a string)"))?;
            named(gw, ListKind::Prompts, &name, principal)
                .await
                .map(Some)
        }
        Method::ResourcesRead => {
            let u = env
                .param_str("uri")
                .and_then(Result::ok)
                .ok_or_else(|| bad("params.uri must be the resource's URI (a string)"))?;
            by_uri(gw, &u, principal).await.map(Some)
        }
        Method::CompletionComplete => {
            let r: Value = env
                .param("ref")
                .and_then(|r| serde_json::from_str(r).ok())
                .ok_or_else(|| bad("params.ref must be a ref/prompt or ref/resource object"))?;
            match (r.get("type").and_then(Value::as_str), r.get("name").and_then(Value::as_str), r.get("uri").and_then(Value::as_str)) {
                (Some("ref/prompt"), Some(n), _) => named(gw, ListKind::Prompts, n, principal).await.map(Some),
                (Some("ref/resource"), _, Some(u)) => by_uri(gw, u, principal).await.map(Some),
                _ => Err(bad("params.ref must be {type: \"ref/prompt\", name} or {type: \"ref/resource\", uri}")),
            }
        }
        _ => Ok(None),
    }
}

/// Whether `principal` sees the `kind` item `key` of `up` (`hide` and `show` rules): a hidden
/// one is answered as an unknown one, so its existence does not leak.
fn shown(
    gw: &Generation,
    principal: &Principal,
    up: &Upstream,
    kind: ListKind,
    key: &str,
    hints: ToolHints,
) -> bool {
    gw.governor.shows(
        &Viewer::of(principal),
        &up.name,
        &Listed { kind, key, hints },
    )
}

/// `Ok` when `up` is up (probed now when it is down: `available::up_now`), else 503.
async fn healthy(gw: &Generation, up: &Upstream, kind: ListKind) -> Result<(), GatewayError> {
    let what = match kind {
        ListKind::Tools => Method::ToolsCall,
        ListKind::Prompts => Method::PromptsGet,
        ListKind::Resources | ListKind::Templates => Method::ResourcesRead,
    };
    super::available::up_now(gw, up, what.as_str()).await
}

/// Refuses a name or URI longer than a request head could mirror in `Mcp-Name`.
fn mirrorable(gw: &Generation, member: &str, text: &str) -> Result<(), GatewayError> {
    let max = gw.cfg.limits.max_header_bytes;
    if text.len() > max {
        return Err(GatewayError::InvalidParams(
            format!("{member} is longer than {max} bytes (limits.max_header_bytes)"),
            None,
        ));
    }
    Ok(())
}

/// A prefixed name's target: the upstream its prefix names, if the principal may reach it and
/// sees the item there.
async fn prefixed(
    gw: &Arc<Generation>,
    kind: ListKind,
    public: &str,
    principal: &Principal,
    what: &str,
) -> Result<Target, GatewayError> {
    let (prefix, own) = gw.names.split(public);
    let up = prefix
        .and_then(|p| gw.upstream(p))
        .ok_or_else(|| unknown(what, public))?;
    // The scope first: a principal without it learns the same of a name that exists and
    // of one that does not.
    gw.auth.authorize_upstream(principal, &up.name)?;
    healthy(gw, up, kind).await?;
    let mut table = up.list(kind);
    // A hidden name takes the unknown name's path, refresh included.
    let seen = |t: &crate::route::table::ListTable| {
        t.by_key(own)
            .filter(|i| shown(gw, principal, up, kind, own, i.hints))
            .cloned()
    };
    if seen(&table).is_none() {
        table = Box::pin(gw.refresh_missed(up, kind)).await;
    }
    let item = seen(&table).ok_or_else(|| unknown(what, public))?;
    Ok(Target {
        up: up.clone(),
        own: own.to_owned(),
        renamed: true,
        headers: item.headers.clone(),
        uri: false,
    })
}

/// The target of a tool or prompt name, as the principal sees it.
async fn named(
    gw: &Arc<Generation>,
    kind: ListKind,
    public: &str,
    principal: &Principal,
) -> Result<Target, GatewayError> {
    let what = if kind == ListKind::Tools {
        "tool"
    } else {
        "prompt"
    };
    // A name longer than a request head could mirror in Mcp-Name is not one a modern client
    // can send; refused before any table, rule or quota looks at it (bridge B's requests carry
    // no Mcp-Name), which bounds the globs' work on every path.
    mirrorable(gw, "params.name", public)?;
    if gw.names.prefixed() {
        return prefixed(gw, kind, public, principal, what).await;
    }
    // Unprefixed: only the upstreams the principal may reach are searched.
    let reachable: Vec<&Arc<Upstream>> = gw.reachable(principal).collect();
    let mut hidden = false;
    for pass in 0..2 {
        for up in &reachable {
            let table = if pass == 0 {
                up.list(kind)
            } else {
                Box::pin(gw.refresh_missed(up, kind)).await
            };
            if let Some(item) = table.by_key(public) {
                if !shown(gw, principal, up, kind, public, item.hints) {
                    hidden = true;
                    continue; // another upstream's item of that name may be the one it sees
                }
                healthy(gw, up, kind).await?;
                return Ok(Target {
                    up: (*up).clone(),
                    own: public.to_owned(),
                    renamed: false,
                    headers: item.headers.clone(),
                    uri: false,
                });
            }
        }
    }
    match gw.upstreams.as_slice() {
        // One unprefixed upstream: it may serve names it does not list; let it answer. Not once
        // visibility rules are loaded: a hidden name would then be told from an unknown one.
        [only] if !hidden && !gw.governor.has_visibility() => {
            gw.auth.authorize_upstream(principal, &only.name)?;
            healthy(gw, only, kind).await?;
            Ok(Target {
                up: only.clone(),
                own: public.to_owned(),
                renamed: false,
                headers: Vec::new(),
                uri: false,
            })
        }
        _ => Err(unknown(what, public)),
    }
}

/// The upstream that lists `u` (or a template matching it) as the principal sees it: a
/// hidden resource, or a URI of a hidden template or one a `hide` rule names, is not found.
fn find_uri(gw: &Generation, u: &str, principal: &Principal) -> Option<Arc<Upstream>> {
    let seen =
        |up: &Upstream, kind, key: &str| shown(gw, principal, up, kind, key, ToolHints::default());
    let exact = gw.reachable(principal).find(|up| {
        up.list(ListKind::Resources).by_key(u).is_some() && seen(up, ListKind::Resources, u)
    });
    exact
        .or_else(|| {
            gw.reachable(principal).find(|up| {
                seen(up, ListKind::Resources, u)
                    && up
                        .list(ListKind::Templates)
                        .items
                        .iter()
                        .any(|t| uri::matches(&t.key, u) && seen(up, ListKind::Templates, &t.key))
            })
        })
        .cloned()
}

async fn by_uri(
    gw: &Arc<Generation>,
    u: &str,
    principal: &Principal,
) -> Result<Target, GatewayError> {
    // A URI longer than a request head could mirror in Mcp-Name is not one any client can send
    // on the modern wire; refusing it bounds template matching on every path.
    mirrorable(gw, "params.uri", u)?;
    let mut found = find_uri(gw, u, principal);
    if found.is_none() {
        for up in gw.reachable(principal) {
            Box::pin(gw.refresh_missed(up, ListKind::Resources)).await;
            Box::pin(gw.refresh_missed(up, ListKind::Templates)).await;
        }
        found = find_uri(gw, u, principal);
    }
    let up = found.ok_or_else(|| {
        GatewayError::UnknownTarget(
            "resource not found: no upstream lists this URI; list them with resources/list".into(),
            Some(json!({"uri": u})),
        )
    })?;
    healthy(gw, &up, ListKind::Resources).await?;
    Ok(Target {
        up,
        own: u.to_owned(),
        renamed: false,
        headers: Vec::new(),
        uri: true,
    })
}

/// Forwards a routed request to a modern upstream with the upstream's own name (the era
/// switch is `link::call`'s).
pub async fn forward(
    gw: &Arc<Generation>,
    ctx: &RequestCtx<'_>,
    t: &Target,
) -> Result<Reply, GatewayError> {
    let (env, meta, headers, principal) =
        (&ctx.env, &ctx.meta, ctx.headers.as_ref(), ctx.principal);
    let retry = match super::govern::modern_retry(gw, env, t, principal).await? {
        Ok(r) => r,
        Err(reply) => return Ok(reply), // the held asks of an approved round
    };
    let elicitation = meta.capabilities.contains_key("elicitation");
    let make_seal = || super::govern::next_seal(gw, env, t, principal, retry.round, elicitation);
    let sealable = env.method.may_ask();
    // With tracing on, the upstream is told this call's span (headers and `_meta`).
    let transport = if t.up.stdio.is_some() { "pipe" } else { "tcp" };
    let span = crate::telemetry::trace::upstream_call(
        env.method.as_str(),
        &t.own,
        t.uri,
        &t.up.name,
        transport,
    );
    let trace = crate::telemetry::trace::Carrier::of(&span);
    let body = upstream_body(env, t, &retry, trace.as_ref());
    let is_read = env.method == Method::ResourcesRead;
    // One principal holds at most its share of the upstream's max_in_flight.
    let share = t.up.balancer.share(&t.up.name, principal.id())?;
    let call = Call {
        id: env.id_json().to_owned(),
        method: env.method.clone(),
        mcp_name: env.method.name_member().map(|_| t.own.clone()),
        uri: is_read.then(|| t.own.clone()),
        body,
        log_level: meta.log_level,
        seal: None,
        trace,
        share,
    };
    crate::telemetry::trace::traced!(
        span,
        send(
            &gw.forwarder,
            &t.up,
            call,
            headers,
            sealable.then_some(&make_seal as MakeSeal<'_>)
        )
    )
}

/// The request as the upstream gets it: the client's bytes untouched when nothing must change;
/// else the name made the upstream's own, the upstream's state restored, declined asks
/// answered, the span's trace context in `_meta`.
fn upstream_body(
    env: &Envelope,
    t: &Target,
    retry: &super::govern::ModernRetry,
    trace: Option<&crate::telemetry::trace::Carrier>,
) -> bytes::Bytes {
    let restore = retry.had_state || !retry.declined.is_empty();
    match (t.renamed, &env.method) {
        (false, _) if !restore && trace.is_none() => env.body().clone(),
        (true, Method::CompletionComplete) => env.rewrite_params(|k, raw| match k {
            "ref" => {
                let mut r: Map<String, Value> = serde_json::from_str(raw).unwrap_or_default();
                r.insert("name".into(), Value::String(t.own.clone()));
                Some(Some(Value::Object(r).to_string()))
            }
            "_meta" => trace.and_then(|c| c.put_meta(Some(raw))).map(Some),
            _ => None,
        }),
        (renamed, _) => {
            let own_json = Value::String(t.own.clone()).to_string();
            let declined = &retry.declined;
            let mut out = env.rewrite_params(|k, raw| match k {
                "name" if renamed => Some(Some(own_json.clone())),
                // The upstream's own state goes back byte for byte (or none, if it gave none).
                "requestState" if retry.had_state => Some(retry.restore.clone()),
                "inputResponses" if !declined.is_empty() => {
                    let mut m: Map<String, Value> = serde_json::from_str(raw).unwrap_or_default();
                    for k in declined {
                        m.insert(k.clone(), serde_json::json!({"action": "decline"}));
                    }
                    Some(Some(Value::Object(m).to_string()))
                }
                "_meta" => trace.and_then(|c| c.put_meta(Some(raw))).map(Some),
                _ => None,
            });
            if !declined.is_empty() && env.param("inputResponses").is_none() {
                let m: Map<String, Value> = declined
                    .iter()
                    .map(|k| (k.clone(), serde_json::json!({"action": "decline"})))
                    .collect();
                out = splice_member(&out, "inputResponses", &Value::Object(m).to_string());
            }
            out
        }
    }
}

/// Adds a `params` member to a serialized request (it ends with `}}`).
fn splice_member(body: &bytes::Bytes, key: &str, raw: &str) -> bytes::Bytes {
    let text = String::from_utf8_lossy(body);
    match text.strip_suffix("}}") {
        Some(head) => {
            let sep = if head.ends_with('{') { "" } else { "," };
            bytes::Bytes::from(format!(
                "{head}{sep}{}:{raw}}}}}",
                Value::String(key.to_owned())
            ))
        }
        None => body.clone(),
    }
}
