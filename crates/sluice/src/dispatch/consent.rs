//! Stage 5 for upstreams each user reaches as themselves (`[upstream.auth] mode = "oauth"`):
//! a call from a principal who has not signed in is answered with where to sign in, and its
//! retry, once they did, goes on to their own upstream.
//!
//! Takes a routed request, its `_meta`, its target and principal; gives whether it goes on
//! (as it is, or without the sign-in round's members), or the answer: a sign-in round (an
//! `input_required` result whose one input request is a URL-mode `elicitation/create`), for a
//! client that declared `elicitation.url`. Refuses: a client that declared no URL elicitation
//! (`-31040`, 403, the URL in the message and `data.url`); a sign-in declined or cancelled, or
//! not done after [`MAX_ROUNDS`] rounds (`-31041`); a round state that does not open
//! (`-32602`, as every round's); an authorization server Sluice cannot use (the upstream
//! error, naming the step); a call to a `token_exchange` upstream from a caller without a JWT
//! (`-31042`, 403).

use serde_json::{json, Map, Value};

use super::govern::{bound, consume, open_state, Policy};
use crate::auth::Principal;
use crate::ctx::target::Target;
use crate::error::GatewayError;
use crate::mcp::jsonrpc::{self, Envelope};
use crate::mcp::method::Method;
use crate::policy::Refusal;
use crate::respond::Reply;
use crate::route::table::ListKind;
use crate::state::{self, Kind, Sealed};
use crate::upstream::client::HttpClient;
use crate::upstream::per_user::SIGN_IN;
use crate::validate::Meta;

/// The key of the sign-in round's one input request.
pub const KEY: &str = "sluice_sign_in";
/// Sign-in rounds one call may take before it is refused.
pub const MAX_ROUNDS: u32 = 3;

/// What the gate decided.
pub enum Consent {
    /// Go on with the request as it is.
    Go,
    /// Go on with this request instead (the retry after a sign-in, without its round).
    Fresh(Envelope),
    /// Answer with this.
    Answer(Reply),
}

/// Judges a routed request whose target is reached as each user.
pub async fn gate(
    pol: &Policy<'_>,
    http: &HttpClient,
    env: &Envelope,
    meta: &Meta,
    t: &Target,
    principal: &Principal,
) -> Result<Consent, GatewayError> {
    if t.up.signed_in.is_some() {
        return after_sign_in(pol, env, t, principal).await;
    }
    if t.up.exchange.is_some() {
        // A `token_exchange` upstream's placeholder: only a caller without a JWT stands here.
        let upstream = t.up.name.clone();
        return Err(GatewayError::Refused(Refusal::IdpTokenNeeded { upstream }));
    }
    let Some(per_user) = &t.up.per_user else {
        return Ok(Consent::Go);
    };
    let mut round = 1;
    if let Some(sealed) = open_state(pol, env, t, principal)?.filter(|s| s.kind == Kind::Consent) {
        consume(pol, &sealed).await?;
        let upstream = t.up.name.clone();
        if !accepted(env) {
            return Err(GatewayError::Refused(Refusal::SignInDeclined {
                upstream,
                rounds: None,
            }));
        }
        if sealed.round >= MAX_ROUNDS {
            return Err(GatewayError::Refused(Refusal::SignInDeclined {
                upstream,
                rounds: Some(MAX_ROUNDS),
            }));
        }
        round = sealed.round + 1;
    }
    crate::audit::note(|r| r.decision = Some("sign_in"));
    let url = per_user
        .users
        .consent(http, principal.id(), &t.up.modern_base)
        .await?;
    if !asks_urls(meta) {
        return Err(GatewayError::Refused(Refusal::SignIn {
            upstream: t.up.name.clone(),
            url,
        }));
    }
    Ok(Consent::Answer(round_reply(
        pol, env, t, principal, &url, round,
    )))
}

/// The retry of a sign-in round, now routed to the principal's own upstream: the round's
/// members go, and a call to the sign-in tool itself is answered here.
async fn after_sign_in(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
) -> Result<Consent, GatewayError> {
    let Some(sealed) = open_state(pol, env, t, principal)?.filter(|s| s.kind == Kind::Consent)
    else {
        return Ok(Consent::Go);
    };
    consume(pol, &sealed).await?;
    if env.method == Method::ToolsCall
        && t.own == SIGN_IN
        && t.up.list(ListKind::Tools).by_key(SIGN_IN).is_none()
    {
        let text = format!(
            "Signed in to {}: list the tools again to see its own.",
            t.up.name
        );
        let result = json!({"resultType": "complete", "content": [{"type": "text", "text": text}],
            "_meta": {crate::mcp::META_SERVER_INFO: pol.server_info}});
        return Ok(Consent::Answer(Reply::Json(
            http::StatusCode::OK,
            jsonrpc::result_body(env.id_json(), &result.to_string()),
        )));
    }
    let fresh =
        env.rewrite_params(|k, _| matches!(k, "requestState" | "inputResponses").then_some(None));
    Ok(Consent::Fresh(
        Envelope::parse(fresh).map_err(GatewayError::from)?,
    ))
}

/// Whether the request's client declared URL-mode elicitation.
fn asks_urls(meta: &Meta) -> bool {
    meta.capabilities
        .get("elicitation")
        .and_then(|e| e.get("url"))
        .is_some_and(Value::is_object)
}

/// Whether the retry's answer to the sign-in round is `accept`.
fn accepted(env: &Envelope) -> bool {
    let responses: Map<String, Value> = env
        .param("inputResponses")
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    responses
        .get(KEY)
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        == Some("accept")
}

fn round_reply(
    pol: &Policy<'_>,
    env: &Envelope,
    t: &Target,
    principal: &Principal,
    url: &str,
    round: u32,
) -> Reply {
    let bound = bound(env, t, principal, state::params_digest(env.members()));
    let expires = state::now_ms() + pol.park.as_millis() as u64;
    let sealed = Sealed::issue(Kind::Consent, bound, round, expires, pol.replica);
    let message = format!(
        "Sign in to {} so that Sluice reaches it as you; then this call goes on.",
        t.up.name
    );
    let ask = json!({"method": Method::ElicitationCreate.as_str(),
        "params": {"mode": "url", "message": message, "url": url}});
    let result = json!({"resultType": "input_required", "inputRequests": {KEY: ask},
        "requestState": pol.keys.seal(&sealed), "_meta": {crate::mcp::META_SERVER_INFO: pol.server_info}});
    Reply::Json(
        http::StatusCode::OK,
        jsonrpc::result_body(env.id_json(), &result.to_string()),
    )
}
