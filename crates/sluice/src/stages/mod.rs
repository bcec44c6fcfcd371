//! The stages after the front door, in order, for a parsed request of either era (a
//! 2026-07-28 client's, or one bridge B built for a 2025-11-25 client):
//!
//! ```text
//! validate  _meta (-32602) → headers vs body (-32020, client requests only)
//! route     the target (errors held) → Mcp-Param-* vs arguments (-32020)
//!           → version (-32022) → method (-32601/404) → the route's own errors → scopes (403)
//! policy    the rules on a tool call (deny -31014, approval round, -32021 without elicitation,
//!           or held for an operator: `held.rs`)
//! dispatch  discover, lists, listen, or the forward to the target's upstream
//! ```
//!
//! Takes the envelope, the client's headers (none for a request Sluice built) and the
//! principal; gives the reply, or the stage error, which [`error_reply`] turns into the
//! client's answer (the same for both eras).

use std::borrow::Cow;
use std::sync::Arc;

use crate::auth::Principal;
use crate::ctx::RequestCtx;
use crate::dispatch::{self, consent, govern, route};
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::mcp::jsonrpc::Envelope;
use crate::mcp::method::Method;
use crate::quiet::{Repeats, Tell};
use crate::respond::Reply;
use crate::route::xheader;
use crate::telemetry::trace;
use crate::validate;

mod held;

/// Refusals logged: one line per kind per [`REFUSED_WINDOW`], the rest counted.
static REFUSED: Repeats = Repeats::new(REFUSED_WINDOW);

/// How often the same refusal is logged at most (with the count held back since).
pub const REFUSED_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a request Sluice built itself (bridge B's translation of a legacy request): every
/// stage but the header checks, which have no client headers to compare.
pub async fn run_internal(gw: &Arc<Generation>, env: Envelope, principal: &Principal) -> Reply {
    let (id, method) = (env.id_json().to_owned(), env.method.clone());
    match run(gw, env, None, principal).await {
        Ok(reply) => reply,
        Err(e) => error_reply(gw, &id, &method, e),
    }
}

/// Validate, route, policy, dispatch.
pub async fn run(
    gw: &Arc<Generation>,
    env: Envelope,
    client_headers: Option<&http::HeaderMap>,
    principal: &Principal,
) -> Result<Reply, GatewayError> {
    // Validate. _meta before headers: the conformance suite expects -32602 for a missing
    // envelope even when the headers are right; headers before the route, so a request whose
    // headers disagree with its body costs no lookup (URI templates included).
    let meta = trace::stage("validate").in_scope(|| {
        let meta = validate::meta::read(&env)?;
        if let Some(h) = client_headers {
            validate::headers::check(h, &env, &meta)?;
        }
        Ok::<_, GatewayError>(meta)
    })?;
    // Route. Looked up now because Mcp-Param-* checks need the tool's annotations; its own
    // errors (unknown name) wait until version and method have been checked.
    // Only a round's retry may be routed by a generation a reload retired.
    let retired = env.param("requestState").and_then(|_| gw.retired());
    // The principal's own upstreams in place of the `oauth` ones they signed in to.
    let reach = gw.reach.for_principal(principal).await;
    let target = trace::traced!(
        trace::stage("route"),
        route::resolve(&reach, retired, &env, principal)
    );
    if let (Ok(Some(t)), Some(h)) = (&target, client_headers) {
        // The arguments are looked at only when the tool has annotated ones.
        if env.method == Method::ToolsCall && !t.headers.is_empty() {
            xheader::check(h, env.param("arguments"), &t.headers)
                .map_err(|m| validate::ValidateError::Headers(format!("Header mismatch: {m}")))?;
        }
    }
    validate::check_version(&meta)?;
    // Method existence is global: a call to an upstream the principal lacks the scope for gets
    // 403 with the scope to ask for (OAuth step-up), not -32601.
    // A round's retry may be for an upstream a reload retired (routing decides; see route.rs).
    let retired_serves = |cap: &str| {
        gw.rt.live.draining()
            && env.param("requestState").is_some()
            && gw.rt.live.retired().iter().any(|g| g.catalog.serves(cap))
    };
    // A family only down upstreams serve: 503 naming them (probed first), not -32601.
    dispatch::available::check(&reach.catalog, &env.method, retired_serves).await?;
    let target = target?;
    if let Some(t) = &target {
        served(gw, &env, t, principal)?;
    }
    // A request Sluice built itself mirrors its annotated arguments into Mcp-Param-* headers.
    let headers = match (&target, client_headers) {
        (_, Some(h)) => Cow::Borrowed(h),
        (Some(t), None) if env.method == Method::ToolsCall && !t.headers.is_empty() => {
            Cow::Owned(xheader::mirror(env.param("arguments"), &t.headers))
        }
        _ => Cow::Owned(http::HeaderMap::new()),
    };
    // Only bridge B runs the stages without a client's headers: for a 2025-11-25 client.
    let legacy_client = client_headers.is_none();
    let mut ctx = RequestCtx {
        principal,
        env,
        meta,
        target,
        headers,
        legacy_client,
        way: None,
        retry: None,
    };
    // Policy: only for a routed request.
    if ctx.target.is_some() {
        match trace::traced!(trace::stage("policy"), policy(gw, &mut ctx))? {
            Stop::Go => {}
            Stop::Reply(reply) => return Ok(reply),
            Stop::Hold(by, rule) => return held::hold(gw, ctx, &by, &rule),
        }
    }
    // Dispatch.
    let reply = dispatch::dispatch(&gw.dispatcher(&reach), &ctx).await;
    sign_in_again(gw, &ctx, reply).await
}

/// What the policy stage decided.
enum Stop {
    /// Go on to dispatch.
    Go,
    /// Answered here.
    Reply(Reply),
    /// Held for an operator's approval (`held.rs`).
    Hold(crate::policy::ByOperator, String),
}

/// `reply`, unless the upstream refused the principal's token during this call (401, or 403
/// asking for more scope): then this call asks them to sign in again.
async fn sign_in_again(
    gw: &Generation,
    ctx: &RequestCtx<'_>,
    reply: Result<Reply, GatewayError>,
) -> Result<Reply, GatewayError> {
    let Some(template) = ctx
        .target
        .as_ref()
        .and_then(|t| signed_out(gw, t, ctx.principal))
    else {
        return reply;
    };
    let (pol, http) = (gw.policy(), &gw.catalog.link.client);
    match consent::gate(&pol, http, &ctx.env, &ctx.meta, &template, ctx.principal).await? {
        consent::Consent::Answer(round) => Ok(round),
        _ => reply,
    }
}

/// When `t` is a principal's own upstream whose token its upstream refused (it is gone now),
/// the target of the same call on the `oauth` upstream's placeholder.
fn signed_out(
    gw: &Generation,
    t: &crate::ctx::target::Target,
    principal: &Principal,
) -> Option<crate::ctx::target::Target> {
    let (users, p) = t.up.signed_in.as_ref()?;
    if p != principal.id() || users.has(p) {
        return None;
    }
    let template = gw.reach.upstream(&t.up.name)?.clone();
    template.per_user.as_ref()?;
    Some(crate::ctx::target::Target {
        up: template,
        own: t.own.clone(),
        renamed: t.renamed,
        headers: Vec::new(),
        uri: false,
    })
}

/// The policy stage, entered once: the rules on a tool call (a denied or not-yet-approved call
/// never reaches the upstream); then the way the target's era takes the call, and for one
/// forwarded to a 2026-07-28 upstream its round state opened, the answers' sizes and the round
/// cap checked (`govern::modern_retry`). Bridge A checks its own rounds' cap when it resumes a
/// parked exchange. `Some(reply)`: answered here (a refusal, an approval round, or the held
/// asks of an approved round).
async fn policy(gw: &Generation, ctx: &mut RequestCtx<'_>) -> Result<Stop, GatewayError> {
    let Some(t) = &ctx.target else {
        return Ok(Stop::Go);
    };
    let pol = gw.policy();
    let http = &gw.catalog.link.client;
    match consent::gate(&pol, http, &ctx.env, &ctx.meta, t, ctx.principal).await? {
        consent::Consent::Go => {}
        consent::Consent::Fresh(fresh) => ctx.env = fresh,
        consent::Consent::Answer(reply) => return Ok(Stop::Reply(reply)),
    }
    match govern::gate(&pol, &ctx.env, &ctx.meta, t, ctx.principal).await? {
        govern::Gate::Go => {}
        govern::Gate::Approved(fresh) => ctx.env = fresh,
        govern::Gate::Answer(reply) => return Ok(Stop::Reply(reply)),
        govern::Gate::Hold(by, rule) => return Ok(Stop::Hold(by, rule)),
    }
    Ok(match way(gw, ctx).await? {
        Some(reply) => Stop::Reply(reply),
        None => Stop::Go,
    })
}

/// The way the target's era takes the call; for one forwarded to a 2026-07-28 upstream, its
/// round state opened and the round cap checked. `Some(reply)`: answered here.
async fn way(gw: &Generation, ctx: &mut RequestCtx<'_>) -> Result<Option<Reply>, GatewayError> {
    let Some(t) = &ctx.target else {
        return Ok(None);
    };
    let pol = gw.policy();
    let way = gw
        .catalog
        .link
        .way(&t.up, &t.up.status(), ctx.legacy_client);
    if matches!(way, crate::link::Way::Forward) {
        match govern::modern_retry(&pol, &ctx.env, t, ctx.principal).await? {
            Ok(retry) => ctx.retry = Some(retry),
            Err(reply) => return Ok(Some(reply)),
        }
    }
    ctx.way = Some(way);
    Ok(None)
}

/// A target that is served: what the client named recorded (only now that it names something
/// served) in the span and the audit record, and the principal's scope for its upstream checked.
fn served(
    gw: &Generation,
    env: &Envelope,
    t: &crate::ctx::target::Target,
    principal: &Principal,
) -> Result<(), GatewayError> {
    let named = env
        .method
        .name_member()
        .and_then(|m| env.param_str(m))
        .and_then(Result::ok);
    if let Some(n) = &named {
        trace::named(&tracing::Span::current(), &env.method, n, t.uri);
    }
    crate::audit::note(|r| {
        r.upstream = Some(t.up.name.clone());
        r.upstream_era = Some(t.up.status().wire.name());
        r.upstream_auth = t.up.auth_mode();
        if r.full {
            r.name = named;
        }
    });
    gw.auth.authorize_upstream(principal, &t.up.name)?;
    Ok(())
}

/// The client's answer for a stage error: a challenge for authentication, a refusal (noted in
/// the audit record) for governance, the mapped error otherwise.
pub fn error_reply(gw: &Generation, id: &str, method: &Method, e: GatewayError) -> Reply {
    match e {
        GatewayError::Auth(e) => challenge(gw, id, e),
        GatewayError::Refused(r) => {
            // A policy rule's deny stays `deny` (with its rule), a call quota `quota`, the
            // identical-call breaker `repeated`; budgets and caps are `refused`.
            crate::audit::note(|a| {
                if !matches!(a.decision, Some("deny" | "quota" | "repeated" | "sign_in")) {
                    a.decision = Some("refused");
                }
            });
            let (label, code) = (method.known().unwrap_or("other"), r.classify().1);
            // The same refusal again and again (a client retrying) is one line and a count.
            match REFUSED.note(&format!("{label} {code}")) {
                Tell::Quiet => {}
                Tell::First => {
                    tracing::info!(method = label, code, "request refused by governance")
                }
                Tell::Again(n) => tracing::info!(
                    method = label,
                    code,
                    more = n,
                    "request refused by governance (again, and `more` times since the last line)"
                ),
            }
            Reply::refusal(id, &r)
        }
        e => {
            tracing::debug!(
                method = method.known().unwrap_or("other"),
                code = e.classify().1,
                "request refused"
            );
            Reply::error(id, &e)
        }
    }
}

/// A 401 or 403 with its `WWW-Authenticate` challenge (RFC 9728 resource metadata).
pub fn challenge(gw: &Generation, id: &str, e: crate::auth::AuthError) -> Reply {
    let header = gw.auth.challenge(&e);
    match REFUSED.note(&e.to_string()) {
        Tell::Quiet => {}
        Tell::First => tracing::info!(reason = %e, "request not authenticated or not authorized"),
        Tell::Again(n) => {
            tracing::info!(reason = %e, more = n, "request not authenticated or not authorized (again, and `more` times since the last line)")
        }
    }
    match Reply::error(id, &GatewayError::Auth(e)) {
        Reply::Json(status, body) => Reply::Challenge(status, header, body),
        other => other,
    }
}
