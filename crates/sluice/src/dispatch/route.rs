//! Routing a call: `tools/call` and `prompts/get` by public name, `resources/read` by URI,
//! `completion/complete` by its ref; then the forward with the upstream's own name.
//!
//! Takes the envelope; gives the [`Target`] (upstream, its own name, the tool's header
//! annotations). Refuses a name or URI no upstream serves with `-32602` that names only what
//! the client asked for, and a call to a down upstream with an error naming it.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::govern::Policy;
use crate::auth::Principal;
use crate::catalog::Reach;
pub use crate::ctx::target::Target;
use crate::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::forward::rounds::Retry;
use crate::forward::Forwarder;
use crate::forward::{forward as send, Call, MakeSeal};
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

/// What routing takes besides this generation's [`Reach`] while a reload's replaced
/// generations drain: their reaches, the keys that open a round state, and how long a call that
/// goes on with a retired upstream may hold it.
pub struct Retired<'a> {
    /// The draining generations' reaches, newest first.
    pub reaches: Vec<Arc<Reach>>,
    /// The keys round states are opened with.
    pub keys: &'a crate::state::Keys,
    /// `timeouts.request_ms`.
    pub hold: std::time::Duration,
}

/// Resolves the target of a routed method; `Ok(None)` for methods that are not routed.
///
/// While a reload's replaced generation drains (`retired`), a round's retry that this config
/// would route nowhere, or to another upstream than its round's, is routed as that generation
/// would have, when its `requestState` opens (the MAC and every binding checked here, before
/// anything else looks at the request) as the round of an upstream's call (not an approval
/// round: no call starts on a removed upstream) and leads to the upstream the reload retired.
/// Everything else is routed by this generation only.
pub async fn resolve(
    reach: &Reach,
    retired: Option<Retired<'_>>,
    env: &Envelope,
    principal: &Principal,
) -> Result<Option<Target>, GatewayError> {
    let current = resolve_in(reach, env, principal).await;
    let Some(retired) = retired.filter(|_| env.param("requestState").is_some()) else {
        return current;
    };
    let keys = retired.keys;
    let Some(upstream) = (match &current {
        Err(GatewayError::UnknownTarget(..)) => continuing(keys, env, principal),
        Ok(Some(t)) => continuing(keys, env, principal).filter(|u| *u != t.up.name),
        _ => None,
    }) else {
        return current;
    };
    match Box::pin(on_retired(&retired.reaches, env, principal, &upstream)).await {
        Some(t) => {
            // The call it goes on with may take the longest a request may: its upstream stays.
            t.up.hold_until(crate::state::now_ms() + retired.hold.as_millis() as u64);
            Ok(Some(t))
        }
        None => current,
    }
}

/// The upstream a continuation round state names, when the request carries one that opens.
fn continuing(keys: &crate::state::Keys, env: &Envelope, principal: &Principal) -> Option<String> {
    let token = env.param_str("requestState")?.ok()?;
    let digest = crate::state::params_digest(env.members());
    let name = super::govern::bound_name(env);
    let sealed = keys
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
    reaches: &[Arc<Reach>],
    env: &Envelope,
    principal: &Principal,
    upstream: &str,
) -> Option<Target> {
    for old in reaches {
        if let Ok(Some(t)) = resolve_in(old, env, principal).await {
            if t.up.name == upstream && t.up.retired.is_cancelled() {
                return Some(t);
            }
        }
    }
    None
}

async fn resolve_in(
    reach: &Reach,
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
            named(reach, ListKind::Tools, &name, principal)
                .await
                .map(Some)
        }
        Method::PromptsGet => {
            let name = env
                .param_text("name")
                .and_then(Result::ok)
                .ok_or_else(|| bad("params.name must be the prompt's name (a string)"))?;
            named(reach, ListKind::Prompts, &name, principal)
                .await
                .map(Some)
        }
        Method::ResourcesRead => {
            let u = env
                .param_str("uri")
                .and_then(Result::ok)
                .ok_or_else(|| bad("params.uri must be the resource's URI (a string)"))?;
            by_uri(reach, &u, principal).await.map(Some)
        }
        Method::CompletionComplete => {
            let r: Value = env
                .param("ref")
                .and_then(|r| serde_json::from_str(r).ok())
                .ok_or_else(|| bad("params.ref must be a ref/prompt or ref/resource object"))?;
            match (r.get("type").and_then(Value::as_str), r.get("name").and_then(Value::as_str), r.get("uri").and_then(Value::as_str)) {
                (Some("ref/prompt"), Some(n), _) => named(reach, ListKind::Prompts, n, principal).await.map(Some),
                (Some("ref/resource"), _, Some(u)) => by_uri(reach, u, principal).await.map(Some),
                _ => Err(bad("params.ref must be {type: \"ref/prompt\", name} or {type: \"ref/resource\", uri}")),
            }
        }
        _ => Ok(None),
    }
}

/// Whether `principal` sees the `kind` item `key` of `up` (`hide` and `show` rules): a hidden
/// one is answered as an unknown one, so its existence does not leak.
fn shown(
    reach: &Reach,
    principal: &Principal,
    up: &Upstream,
    kind: ListKind,
    key: &str,
    hints: ToolHints,
) -> bool {
    reach.governor.shows(
        &Viewer::of(principal),
        &up.name,
        &Listed { kind, key, hints },
    )
}

/// `Ok` when `up` is up (probed now when it is down: `available::up_now`), else 503.
async fn healthy(reach: &Reach, up: &Upstream, kind: ListKind) -> Result<(), GatewayError> {
    let what = match kind {
        ListKind::Tools => Method::ToolsCall,
        ListKind::Prompts => Method::PromptsGet,
        ListKind::Resources | ListKind::Templates => Method::ResourcesRead,
    };
    super::available::up_now(&reach.catalog, up, what.as_str()).await
}

/// Refuses a name or URI longer than a request head could mirror in `Mcp-Name`.
fn mirrorable(reach: &Reach, member: &str, text: &str) -> Result<(), GatewayError> {
    let max = reach.catalog.limits.max_header_bytes;
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
    reach: &Reach,
    kind: ListKind,
    public: &str,
    principal: &Principal,
    what: &str,
) -> Result<Target, GatewayError> {
    let (prefix, own) = reach.catalog.names.split(public);
    let up = prefix
        .and_then(|p| reach.upstream(p))
        .ok_or_else(|| unknown(what, public))?;
    // The scope first: a principal without it learns the same of a name that exists and
    // of one that does not.
    reach.auth.authorize_upstream(principal, &up.name)?;
    // Reached as each user, and this principal has not signed in (their own upstream would
    // stand here) or came without a JWT to exchange; or the sign-in tool's retry after they
    // did: the policy stage answers (dispatch/consent.rs).
    let sign_in = own == crate::upstream::per_user::SIGN_IN;
    if up.per_user.is_some()
        || up.exchange.is_some()
        || (up.signed_in.is_some() && sign_in && up.list(kind).by_key(own).is_none())
    {
        return Ok(Target {
            up: up.clone(),
            own: own.to_owned(),
            renamed: true,
            headers: Vec::new(),
            uri: false,
        });
    }
    healthy(reach, up, kind).await?;
    let mut table = up.list(kind);
    // A hidden name takes the unknown name's path, refresh included.
    let seen = |t: &crate::route::table::ListTable| {
        t.by_key(own)
            .filter(|i| shown(reach, principal, up, kind, own, i.hints))
            .cloned()
    };
    if seen(&table).is_none() {
        table = Box::pin(reach.catalog.refresh_missed(up, kind)).await;
    }
    let refused =
        || super::withheld::refusal(reach, principal, up, kind, own, unknown(what, public));
    let item = seen(&table).ok_or_else(refused)?;
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
    reach: &Reach,
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
    mirrorable(reach, "params.name", public)?;
    if reach.catalog.names.prefixed() {
        return prefixed(reach, kind, public, principal, what).await;
    }
    // Unprefixed: only the upstreams the principal may reach are searched.
    let reachable: Vec<&Arc<Upstream>> = reach.reachable(principal).collect();
    let mut hidden = false;
    for pass in 0..2 {
        for up in &reachable {
            let table = if pass == 0 {
                up.list(kind)
            } else {
                Box::pin(reach.catalog.refresh_missed(up, kind)).await
            };
            if let Some(item) = table.by_key(public) {
                if !shown(reach, principal, up, kind, public, item.hints) {
                    hidden = true;
                    continue; // another upstream's item of that name may be the one it sees
                }
                healthy(reach, up, kind).await?;
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
    super::withheld::none_of(reach, principal, &reachable, kind, public)?; // -31050, not unknown
    match reach.catalog.upstreams.as_slice() {
        // One unprefixed upstream: it may serve names it does not list; let it answer. Not once
        // visibility rules are loaded: a hidden name would then be told from an unknown one.
        [only] if !hidden && !reach.governor.has_visibility() => {
            reach.auth.authorize_upstream(principal, &only.name)?;
            healthy(reach, only, kind).await?;
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
fn find_uri(reach: &Reach, u: &str, principal: &Principal) -> Option<Arc<Upstream>> {
    let seen = |up: &Upstream, kind, key: &str| {
        shown(reach, principal, up, kind, key, ToolHints::default())
    };
    let exact = reach.reachable(principal).find(|up| {
        up.list(ListKind::Resources).by_key(u).is_some() && seen(up, ListKind::Resources, u)
    });
    exact
        .or_else(|| {
            reach.reachable(principal).find(|up| {
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

async fn by_uri(reach: &Reach, u: &str, principal: &Principal) -> Result<Target, GatewayError> {
    // A URI longer than a request head could mirror in Mcp-Name is not one any client can send
    // on the modern wire; refusing it bounds template matching on every path.
    mirrorable(reach, "params.uri", u)?;
    let mut found = find_uri(reach, u, principal);
    if found.is_none() {
        for up in reach.reachable(principal) {
            Box::pin(reach.catalog.refresh_missed(up, ListKind::Resources)).await;
            Box::pin(reach.catalog.refresh_missed(up, ListKind::Templates)).await;
        }
        found = find_uri(reach, u, principal);
    }
    let up = found.ok_or_else(|| {
        GatewayError::UnknownTarget(
            "resource not found: no upstream lists this URI; list them with resources/list".into(),
            Some(json!({"uri": u})),
        )
    })?;
    healthy(reach, &up, ListKind::Resources).await?;
    Ok(Target {
        up,
        own: u.to_owned(),
        renamed: false,
        headers: Vec::new(),
        uri: true,
    })
}

/// Forwards a routed request to a modern upstream with the upstream's own name (the era
/// switch is `link::Link::way`'s).
pub async fn forward(
    pol: &Policy<'_>,
    forwarder: &Arc<Forwarder>,
    ctx: &RequestCtx<'_>,
    t: &Target,
) -> Result<Reply, GatewayError> {
    let (env, meta, headers, principal) =
        (&ctx.env, &ctx.meta, ctx.headers.as_ref(), ctx.principal);
    // Opened, and its round cap checked, by the policy stage.
    let fresh = Retry::default();
    let retry = ctx.retry.as_ref().unwrap_or(&fresh);
    let elicitation = meta.capabilities.contains_key("elicitation");
    let make_seal = || super::govern::next_seal(pol, env, t, principal, retry.round, elicitation);
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
    let body = upstream_body(env, t, retry, trace.as_ref());
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
            forwarder,
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
    retry: &Retry,
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
