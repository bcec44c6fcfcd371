//! `/admin/v1/session`: console sign-ins.
//!
//! Takes a sign-in's key (`POST {"key": "…"}`: an admin key, or a JWT whose groups hold the
//! admin role), or the sign-in cookie; gives the operator's name, how they proved it and the
//! CSRF token the console sends with each change, and sets the `sluice_admin` cookie
//! (HttpOnly, SameSite=Strict, Path=/, expiring with the sign-in). On an open loopback listener
//! `GET` signs the caller in as `local`. Refuses a wrong key (401 `bad_credentials`, logged
//! without the key), a body that is not `{"key": string}` (400 `bad_request`), and a sign-out
//! without the CSRF token (403 `csrf`).

use std::sync::Arc;

use http::request::Parts;
use http::{header, HeaderValue, Method, StatusCode};
use serde_json::json;

use super::auth::{self, Proof};
use super::{error, method_not_allowed, Answer, Operator, State};
use crate::config::Admin;
use crate::gateway::Generation;

/// Serves `/admin/v1/session`.
pub fn route(
    state: &Arc<State>,
    gw: &Arc<Generation>,
    admin: &Admin,
    parts: &Parts,
    body: &[u8],
) -> Answer {
    match parts.method {
        Method::GET => match auth::prove(admin, &gw.auth, &state.sessions, &parts.headers) {
            Ok(Proof::Session(op, csrf)) => who(&op, &csrf),
            Ok(Proof::Open) if cross_site(&parts.headers) => super::error(
                StatusCode::FORBIDDEN,
                "origin",
                "another site's page asked for a sign-in: open the console itself",
            ),
            Ok(Proof::Open) => open(state, admin, auth::local(), auth::Basis::Open),
            Ok(Proof::Bearer(op)) => super::json(
                StatusCode::OK,
                &json!({"operator": op.name, "via": op.via, "csrf": null}),
            ),
            Err(d) => d.answer(),
        },
        Method::POST => sign_in(state, gw, admin, body),
        Method::DELETE => sign_out(state, admin, gw, parts),
        _ => method_not_allowed("GET, POST or DELETE"),
    }
}

fn who(op: &Operator, csrf: &str) -> Answer {
    super::json(
        StatusCode::OK,
        &json!({"operator": op.name, "via": op.via, "csrf": csrf}),
    )
}

/// Whether a browser says another site's page sent the request (`Sec-Fetch-Site`): a sign-in
/// made so could evict the operator's own.
fn cross_site(headers: &http::HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| !matches!(v.as_bytes(), b"same-origin" | b"none"))
}

fn open(state: &Arc<State>, admin: &Admin, op: Operator, basis: auth::Basis) -> Answer {
    let made = state
        .sessions
        .open(op.clone(), basis, admin.session, admin.max_sessions);
    let mut a = who(&op, &made.csrf);
    let cookie = format!(
        "{}={}; Path=/admin/v1; HttpOnly; SameSite=Strict; Max-Age={}",
        auth::COOKIE,
        made.cookie,
        admin.session.as_secs()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        a.headers_mut().insert(header::SET_COOKIE, v);
    }
    a
}

fn sign_in(state: &Arc<State>, gw: &Arc<Generation>, admin: &Admin, body: &[u8]) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SignIn {
        key: String,
    }
    let Ok(s) = serde_json::from_slice::<SignIn>(body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "send {\"key\": \"<admin key>\"} as JSON",
        );
    };
    match auth::credential_on(admin, &gw.auth, s.key.trim()) {
        Ok((op, basis)) => {
            tracing::info!(operator = %op.name, via = op.via, "operator signed in to the console");
            let op = Operator {
                name: op.name,
                via: "session",
            };
            open(state, admin, op, basis)
        }
        Err(_) => {
            tracing::warn!("console sign-in refused: not an admin key or operator token");
            error(
                StatusCode::UNAUTHORIZED,
                "bad_credentials",
                "that is not an admin key (nor a token of an operator): check [[admin.keys]]",
            )
        }
    }
}

fn sign_out(state: &Arc<State>, admin: &Admin, gw: &Arc<Generation>, parts: &Parts) -> Answer {
    let proof = match auth::prove(admin, &gw.auth, &state.sessions, &parts.headers) {
        Ok(p) => p,
        Err(d) => return d.answer(),
    };
    if let Err(d) = auth::operator(proof, &parts.method, &parts.headers) {
        return d.answer();
    }
    if let Some((c, _, _)) = auth::signed_in(&state.sessions, admin, &parts.headers) {
        state.sessions.close(c);
    }
    let mut a = super::json(StatusCode::OK, &json!({"signed_out": true}));
    let gone = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        auth::COOKIE
    );
    if let Ok(v) = HeaderValue::from_str(&gone) {
        a.headers_mut().insert(header::SET_COOKIE, v);
    }
    a
}
