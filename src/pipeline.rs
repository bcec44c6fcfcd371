//! The one place that orders the stages of a request to the MCP endpoint.
//!
//! ```text
//! edge (Origin/Host 403, POST 405, Accept 406, body 413)
//!  → parse once (-32700 / -32600)          → notifications: 202
//!  → _meta (-32602) → route lookup (errors held) → headers vs body (-32020)
//!  → version (-32022) → method (-32601/404) → dispatch → respond
//! ```
//!
//! Takes the request head and body; gives the [`Reply`]. Every refusal carries the request's
//! id once it could be read.

use std::sync::Arc;

use http::request::Parts;

use crate::dispatch::{self, route};
use crate::edge;
use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::mcp::jsonrpc::Envelope;
use crate::respond::Reply;
use crate::route::xheader;
use crate::validate;

/// Runs one request through the pipeline.
pub async fn run(gw: &Arc<Gateway>, parts: Parts, body: hyper::body::Incoming) -> Reply {
    // Edge first: nothing about the body matters if the caller may not talk to us.
    if let Err(r) = edge::check_origin(&parts.headers, gw.cfg.listen.ip().is_loopback(), &gw.cfg.allowed_origins) {
        return r;
    }
    if let Err(r) = edge::check_method(&parts.method).and_then(|_| edge::check_accept(&parts.headers)) {
        return r;
    }
    // Authenticate before reading the body: an unknown caller costs no more than its headers.
    let principal = match gw.auth.authenticate(&parts.headers) {
        Ok(p) => p,
        Err(e) => return challenge(gw, "null", e),
    };
    let bytes = match edge::read_body(&parts.headers, body, gw.cfg.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // Parse once: every later stage reads from this envelope.
    let bytes_for_id = bytes.clone();
    let env = match Envelope::parse(bytes) {
        Ok(e) => e,
        Err(e) => return Reply::error(&readable_id(&bytes_for_id), &GatewayError::from(e)),
    };
    // A notification needs no answer and 2026-07-28 defines none client→server over HTTP.
    if env.is_notification() {
        return Reply::Accepted;
    }
    let id = env.id_json().to_owned();
    crate::audit::note(|r| {
        r.principal = Some(principal.id.clone());
        r.method = Some(env.method.clone());
        r.name = crate::validate::headers::name_member(&env.method).and_then(|m| env.param_str(m)).and_then(Result::ok);
    });
    match validated(gw, &env, &parts.headers, &principal).await {
        Ok(reply) => reply,
        Err(GatewayError::Auth(e)) => challenge(gw, &id, e),
        Err(GatewayError::Refused(r)) => {
            crate::audit::note(|a| a.decision = Some("refused"));
            tracing::info!(method = %env.method, code = r.classify().1, "request refused by governance");
            Reply::refusal(&id, &r)
        }
        Err(e) => {
            tracing::debug!(method = %env.method, code = e.classify().1, "request refused");
            Reply::error(&id, &e)
        }
    }
}

async fn validated(
    gw: &Arc<Gateway>,
    env: &Envelope,
    headers: &http::HeaderMap,
    principal: &crate::auth::Principal,
) -> Result<Reply, GatewayError> {
    // _meta before headers: the conformance suite expects -32602 for a missing envelope even
    // when the headers are right.
    let meta = validate::meta::read(env)?;
    // The route is looked up now because Mcp-Param-* checks need the tool's annotations; its
    // own errors (unknown name) wait until version and method have been checked.
    let target = route::resolve(gw, env).await;
    validate::headers::check(headers, env, &meta)?;
    if let Ok(Some(t)) = &target {
        if env.method == "tools/call" {
            xheader::check(headers, env.param("arguments"), &t.headers)
                .map_err(|m| GatewayError::HeaderMismatch(format!("Header mismatch: {m}")))?;
        }
    }
    validate::check_version(&meta)?;
    validate::check_method(&env.method, |cap| gw.serves(cap))?;
    let target = target?;
    if let Some(t) = &target {
        crate::audit::note(|r| {
            r.upstream = Some(t.up.name.clone());
            r.upstream_era = Some(if t.up.status().legacy { "legacy" } else { "modern" });
        });
        gw.auth.authorize_upstream(principal, &t.up.name)?;
    }
    dispatch::dispatch(gw, env, &meta, target, headers, principal).await
}

/// A 401 or 403 with its `WWW-Authenticate` challenge (RFC 9728 resource metadata).
fn challenge(gw: &Gateway, id: &str, e: crate::auth::AuthError) -> Reply {
    let header = gw.auth.challenge(&e);
    tracing::info!(reason = %e, "request not authenticated or not authorized");
    match Reply::error(id, &GatewayError::Auth(e)) {
        Reply::Json(status, body) => Reply::Challenge(status, header, body),
        other => other,
    }
}

/// The id of a body that is JSON but not a valid request, when it can be read (else `null`).
fn readable_id(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    match serde_json::from_slice::<IdOnly<'_>>(body) {
        Ok(IdOnly { id: Some(id) }) if matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')) => id.get().to_owned(),
        _ => "null".to_owned(),
    }
}
