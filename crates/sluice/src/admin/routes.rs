//! The admin API's paths, in one table.
//!
//! Takes a request's head and body, the listener's sign-ins and the current generation; gives
//! the answer of the path it names after the checks every path gets (`auth.rs`: `Origin`,
//! `Host`, credentials, CSRF). Refuses an unknown path (404 `not_found`) and a method a path does
//! not take (405 `method_not_allowed`). The paths (all under `/admin/v1`):
//!
//! ```text
//! GET    /                      the index: version, replica, generation, paths
//! GET    /session               who you are, and the CSRF token (open listener: signs in)
//! POST   /session               {"key": "..."}: a console sign-in (cookie + CSRF token)
//! DELETE /session               signs out
//! GET    /upstreams             era, transport, health and history, breakers, processes, tools
//! GET    /principals            what each principal holds and used
//! GET    /approvals             held calls;  POST /approvals/{id}/approve | /deny
//! GET    /pins                  tool pins;   POST /pins/{upstream}/{tool}/accept
//! GET    /sign-ins?principal=P  a principal's sign-ins through [auth.login]
//! POST   /sign-ins/revoke       {"principal": "..."}: ends them (tokens refused at once)
//! GET    /audit?limit=N         the recent audit records, as written
//! GET    /config                the generation serving, when it was loaded, its source
//! POST   /reload                reads the config again (as SIGHUP does)
//! GET    /events                the event stream (SSE)
//! ```

use std::sync::Arc;

use http::request::Parts;
use http::{Method, StatusCode};
use serde_json::json;

use super::auth;
use super::{error, method_not_allowed, not_found, Answer, Cx, State, PREFIX};
use crate::gateway::Generation;

/// Serves one request.
pub async fn route(
    state: &Arc<State>,
    gw: Arc<Generation>,
    parts: &Parts,
    body: hyper::body::Incoming,
) -> Answer {
    let Some(admin) = gw.cfg.admin.clone() else {
        return not_found("the admin plane is off ([admin] was removed)");
    };
    let path = parts.uri.path();
    if let Err(d) = auth::origin_and_host(&admin, &parts.headers) {
        return d.answer();
    }
    if parts.method == Method::GET && (path == "/console" || path.starts_with("/console/")) {
        return super::console::serve(path).unwrap_or_else(|| not_found("no such console page"));
    }
    if path == "/" {
        return super::redirect("/console");
    }
    let Some(rest) = path
        .strip_prefix(PREFIX)
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return not_found("the admin API is under /admin/v1/");
    };
    let within = gw.cfg.timeouts.body_read;
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let source = parts.extensions.get::<super::Source>().copied();
    if state.throttled(source) {
        return error(
            http::StatusCode::TOO_MANY_REQUESTS,
            "slow_down",
            "too many wrong credentials from this address: wait a minute",
        );
    }
    if segs.first() == Some(&"session") && segs.len() == 1 {
        let body = match super::body::read(body, within).await {
            Ok(b) => b,
            Err(a) => return a,
        };
        let a = super::session::route(state, &gw, &admin, parts, &body);
        if a.status() == http::StatusCode::UNAUTHORIZED {
            state.failed(source);
        }
        return a;
    }
    let (cx, body) = match authenticated(state, gw, parts, body, source).await {
        Ok(v) => v,
        Err(a) => return a,
    };
    let body = &body[..];
    let m = &parts.method;
    match (segs.first().copied(), segs.len()) {
        (None, _) => only_get(m, || index(&cx)),
        (Some("upstreams"), 1) if m == Method::GET => super::views::upstreams(&cx).await,
        (Some("principals"), 1) if m == Method::GET => super::views::principals(&cx).await,
        (Some("upstreams" | "principals"), 1) => method_not_allowed("GET"),
        (Some("audit"), 1) => only_get(m, || super::views::audit(&cx, parts.uri.query())),
        (Some("config"), 1) => only_get(m, || super::views::config(&cx)),
        (Some("events"), 1) if m == Method::GET => {
            match state.streams.clone().try_acquire_owned() {
                Ok(place) => super::stream::events(&cx, place),
                Err(_) => error(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_streams",
                    "16 event streams are open on this listener: close one",
                ),
            }
        }
        (Some("events"), 1) => method_not_allowed("GET"),
        (Some("reload"), 1) if m == Method::POST => reload(&cx).await,
        (Some("reload"), 1) => method_not_allowed("POST"),
        (Some("approvals"), _) => super::approvals::route(&cx, m, &segs[1..], body).await,
        (Some("pins"), _) => super::pins::route(&cx, m, &segs[1..], body).await,
        (Some("sign-ins"), _) => {
            super::sign_ins::route(&cx, m, &segs[1..], parts.uri.query(), body).await
        }
        _ => not_found("no such admin path (see GET /admin/v1/)"),
    }
}

fn only_get(m: &Method, answer: impl FnOnce() -> Answer) -> Answer {
    match *m {
        Method::GET => answer(),
        _ => method_not_allowed("GET"),
    }
}

fn index(cx: &Cx) -> Answer {
    super::json(
        StatusCode::OK,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "api": "v1",
            "replica": cx.gw.cfg.state.replica,
            "generation": cx.gw.generation,
            "operator": cx.op.name,
            "paths": ["session", "upstreams", "principals", "approvals", "pins", "sign-ins", "audit",
                "config", "reload", "events"],
        }),
    )
}

async fn reload(cx: &Cx) -> Answer {
    tracing::info!(operator = %cx.op.name, via = cx.op.via, "reload asked through the admin API");
    match crate::reload::from_source(&cx.gw).await {
        Ok(a) => super::json(
            StatusCode::OK,
            &json!({"generation": a.generation, "added": a.added, "removed": a.removed,
                "replaced": a.replaced, "operator": cx.op.name}),
        ),
        Err(e) => error(StatusCode::CONFLICT, "reload_refused", &e),
    }
}

/// The operator a request acts as, and its body (read once it is authenticated).
async fn authenticated(
    state: &Arc<State>,
    gw: Arc<Generation>,
    parts: &Parts,
    body: hyper::body::Incoming,
    source: Option<super::Source>,
) -> Result<(Cx, bytes::Bytes), Answer> {
    let Some(admin) = gw.cfg.admin.clone() else {
        return Err(not_found("the admin plane is off ([admin] was removed)"));
    };
    let within = gw.cfg.timeouts.body_read;
    let proof = match auth::prove(&admin, &gw.auth, &state.sessions, &parts.headers) {
        Ok(p) => p,
        Err(d) => {
            if d.0 == http::StatusCode::UNAUTHORIZED {
                state.failed(source);
            }
            return Err(d.answer());
        }
    };
    let op = match auth::operator(proof, &parts.method, &parts.headers) {
        Ok(op) => op,
        Err(d) => return Err(d.answer()),
    };
    let body = match parts.method {
        Method::GET | Method::HEAD => bytes::Bytes::new(),
        _ => match super::body::read(body, within).await {
            Ok(b) => b,
            Err(a) => return Err(a),
        },
    };
    Ok((Cx { gw, op }, body))
}
