//! `/admin/v1/sign-ins`: principals' sign-ins through `[auth.login]`, for operators.
//!
//! Takes a principal; gives its sign-ins held (the client each was made with, whether revoked;
//! never a token) and, on `POST /admin/v1/sign-ins/revoke {"principal"}`, ends them all: refresh
//! tokens refused at once, access tokens refused here at once and on every replica within 2 s
//! (`login/revocations.rs`), logged with the operator. Refuses a config without
//! `[auth.login]` (404 `not_found`), a missing or empty principal (400 `bad_request`), and says
//! when Redis could not be reached (503 `redis_unreachable`).

use http::{Method, StatusCode};
use serde_json::json;

use super::{error, method_not_allowed, not_found, Answer, Cx};

/// Sign-ins listed for one principal at most.
pub const MAX_LISTED: usize = 100;

/// Serves `/admin/v1/sign-ins…` (`rest`: the segments after `sign-ins`).
pub async fn route(
    cx: &Cx,
    method: &Method,
    rest: &[&str],
    query: Option<&str>,
    body: &[u8],
) -> Answer {
    if cx.gw.cfg.auth.login.is_none() {
        return not_found("this config has no [auth.login]: nobody signs in through Sluice");
    }
    match (rest, method) {
        ([], &Method::GET) => list(cx, query).await,
        ([], _) => method_not_allowed("GET"),
        (["revoke"], &Method::POST) => revoke(cx, body).await,
        (["revoke"], _) => method_not_allowed("POST"),
        _ => not_found("no such path under /admin/v1/sign-ins"),
    }
}

fn principal_in(query: Option<&str>) -> Option<String> {
    let q = query?;
    form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == "principal")
        .map(|(_, v)| v.into_owned())
        .filter(|p| !p.is_empty())
}

async fn list(cx: &Cx, query: Option<&str>) -> Answer {
    let Some(p) = principal_in(query) else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "name the principal: GET /admin/v1/sign-ins?principal=NAME",
        );
    };
    match cx.gw.rt.login_store.sign_ins(&p, MAX_LISTED).await {
        Ok(held) => {
            let list: Vec<_> = held
                .into_iter()
                .map(|(client, revoked)| json!({"client": client, "revoked": revoked}))
                .collect();
            super::json(StatusCode::OK, &json!({"principal": p, "sign_ins": list}))
        }
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "redis_unreachable", &e),
    }
}

async fn revoke(cx: &Cx, body: &[u8]) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Revoke {
        principal: String,
    }
    let p = match serde_json::from_slice::<Revoke>(body) {
        Ok(r) if !r.principal.is_empty() => r.principal,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "send {\"principal\": \"NAME\"} as JSON",
            )
        }
    };
    let cluster = cx.gw.governor.cluster.as_deref();
    let rt = &cx.gw.rt;
    match crate::login::revocations::revoke(&rt.login_store, &rt.revoked, cluster, &p).await {
        Ok(n) => {
            tracing::warn!(principal = %crate::escape::Escaped(&p), revoked = n, operator = %cx.op.name, "an operator ended a principal's sign-ins");
            super::json(
                StatusCode::OK,
                &json!({"principal": p, "revoked": n, "operator": cx.op.name}),
            )
        }
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "redis_unreachable", &e),
    }
}
