//! `/token`: Sluice's code for tokens, and a refresh token for the next pair (rotated).
//!
//! Takes the token request's form (public clients: `client_id` in the form, no secret); gives
//! `{access_token, token_type, expires_in, refresh_token, scope}`: an access token of
//! `auth::issued` (audience Sluice, `sub` the principal, its groups) and a refresh token
//! `FAMILY.SECRET`. Refuses (RFC 6749 §5.2 JSON): an unknown, used or expired code (a code is
//! taken out of the store before it is checked, so it never works twice), another client,
//! another `redirect_uri` than the code was sent to, a `code_verifier` that does not answer the
//! challenge, a `resource` other than Sluice's; a refresh token of a revoked or expired family
//! or of another client; a refresh token that is not the family's current one, which revokes
//! the whole family (a rotated token came back: one of its holders is not the client);
//! any other grant type.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{Response, StatusCode};
use serde_json::json;

use super::checks::{secret, verifier_ok};
use super::records::{Family, Grant, Turn};
use super::store::hashed;
use super::web::{self, Body, Params};
use super::Login;
use crate::auth::issued::Claims;

fn invalid(code: &str, what: &str) -> Response<Body> {
    let status = match code {
        "invalid_client" => StatusCode::UNAUTHORIZED,
        "server_error" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    web::error(status, code, what)
}

/// `POST /token`.
pub async fn token(login: &Login, f: &Params) -> Response<Body> {
    if f.repeated("resource") || f.get("resource").is_some_and(|r| r != login.resource) {
        return invalid(
            "invalid_target",
            "resource must be this gateway's MCP endpoint URL",
        );
    }
    let Some(client_id) = f.get("client_id") else {
        return invalid(
            "invalid_client",
            "send client_id (public clients authenticate with PKCE only)",
        );
    };
    match f.get("grant_type") {
        Some("authorization_code") => code(login, client_id, f).await,
        Some("refresh_token") => refresh(login, client_id, f).await,
        _ => invalid(
            "unsupported_grant_type",
            "use authorization_code or refresh_token",
        ),
    }
}

async fn code(login: &Login, client_id: &str, f: &Params) -> Response<Body> {
    let (Some(code), Some(verifier)) = (f.get("code"), f.get("code_verifier")) else {
        return invalid("invalid_request", "send code and code_verifier");
    };
    // Taken out first: whatever comes of this request, the code is spent.
    let Some(c) = login.store.take_code(&hashed(code)).await else {
        return invalid(
            "invalid_grant",
            "the code is unknown, used or expired: sign in again",
        );
    };
    let redirect_ok = f.get("redirect_uri").is_none_or(|r| r == c.redirect_uri);
    let ours = c.grant.client_id == client_id;
    if !ours || !redirect_ok || !verifier_ok(verifier, &c.code_challenge) {
        return invalid(
            "invalid_grant",
            "the code was not issued to this client, redirect_uri and code_verifier: sign in again",
        );
    }
    let id = secret();
    let ttl = Duration::from_millis(login.cfg.refresh_token_ttl_ms);
    let refresh = format!("{id}.{}", secret());
    let family = Family {
        grant: c.grant,
        current: hashed(&refresh),
        revoked: false,
    };
    if !login
        .store
        .put_family(hashed(&id), family.clone(), ttl)
        .await
    {
        return invalid(
            "temporarily_unavailable",
            "too many sign-ins are held: try again later",
        );
    }
    answer(login, &family.grant, &refresh)
}

async fn refresh(login: &Login, client_id: &str, f: &Params) -> Response<Body> {
    let Some(token) = f.get("refresh_token") else {
        return invalid("invalid_request", "send refresh_token");
    };
    let Some((id, _)) = token.split_once('.') else {
        return invalid(
            "invalid_grant",
            "the refresh token is not one of this gateway's: sign in again",
        );
    };
    let next = format!("{id}.{}", secret());
    let (family, presented, after) = (hashed(id), hashed(token), hashed(&next));
    let turn = login.store.rotate(&family, &presented, &after, client_id);
    match turn.await {
        Turn::Rotated(grant) => answer(login, &grant, &next),
        Turn::Replayed => {
            tracing::warn!("auth.login: a rotated refresh token came back; its sign-in is revoked");
            invalid(
                "invalid_grant",
                "the refresh token was used already: this sign-in is revoked, sign in again",
            )
        }
        Turn::Revoked => invalid(
            "invalid_grant",
            "the refresh token's sign-in was revoked: sign in again",
        ),
        Turn::OtherClient => invalid(
            "invalid_grant",
            "the refresh token was not issued to this client",
        ),
        Turn::Unknown => invalid(
            "invalid_grant",
            "the refresh token is unknown or expired: sign in again",
        ),
    }
}

fn answer(login: &Login, fam: &Grant, refresh: &str) -> Response<Body> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let now = now_ms / 1000;
    let ttl = login.cfg.access_token_ttl_ms / 1000;
    let claims = Claims {
        iss: String::new(),
        aud: String::new(),
        sub: fam.principal.clone(),
        groups: fam.groups.clone(),
        scope: fam.scope.clone(),
        client_id: fam.client_id.clone(),
        iat: now,
        iat_ms: Some(now_ms),
        exp: now + ttl,
    };
    let access = match login.issued.sign(claims) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "auth.login: cannot sign an access token");
            return invalid("server_error", "the gateway cannot sign tokens now");
        }
    };
    let mut v = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ttl,
        "refresh_token": refresh,
    });
    if !fam.scope.is_empty() {
        v["scope"] = json!(fam.scope);
    }
    web::json(StatusCode::OK, v)
}
