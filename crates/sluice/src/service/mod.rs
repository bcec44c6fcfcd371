//! The HTTP service: paths, health and readiness, and the pipeline for the MCP endpoint.
//!
//! Takes any HTTP request; gives a response, never an error (a failure becomes a status and a
//! body, so hyper never drops a connection for us). Refuses unknown paths with 404.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;

pub mod signin;
pub mod stack;

use crate::gateway::{Generation, Live};
use crate::respond::{Body, Reply};

/// Handles one request, on the generation current now: the MCP endpoint through its edge
/// stack, the rest here.
pub async fn handle(
    live: Arc<Live>,
    endpoint: stack::Endpoint,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    let Some(gw) = live.get() else {
        return Ok(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "service unavailable: Sluice is shutting down\n",
        ));
    };
    // The MCP endpoint, and the 2024-11-05 HTTP+SSE transport's path (bridge B's older wire).
    if req.uri().path() == gw.cfg.path || req.uri().path() == gw.cfg.bridge.sse_path {
        let reply = tower::ServiceExt::oneshot(endpoint, req)
            .await
            .unwrap_or_else(|never| match never {});
        return Ok(reply.into_response());
    }
    if let Some(login) = gw.login.as_ref().filter(|l| l.serves(req.uri().path())) {
        return Ok(login.handle(req).await);
    }
    let (parts, _body) = req.into_parts();
    let path = parts.uri.path();
    Ok(match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        signin::CALLBACK if gw.catalog.per_user => signin::callback(&gw, parts.uri.query()).await,
        signin::METADATA if gw.catalog.per_user => signin::metadata(&gw),
        "/metrics" | "/readyz" => match guard_ops(&gw, &parts) {
            Some(refused) => refused.into_response(),
            None if path == "/metrics" => metrics(&gw),
            None => readyz(&gw),
        },
        p if p == "/.well-known/oauth-protected-resource"
            || p.strip_prefix("/.well-known/oauth-protected-resource")
                == Some(gw.cfg.path.as_str()) =>
        {
            match gw.auth.advertises_oauth() {
                true => json_response(StatusCode::OK, gw.auth.metadata().to_string()),
                false => text(StatusCode::NOT_FOUND, NO_OAUTH),
            }
        }
        // Where an OAuth client looks for a sign-in Sluice does not run (mcp-remote tries
        // registration at /register): say what to send instead of "not found".
        p if !gw.auth.advertises_oauth() && is_oauth_path(p) => {
            text(StatusCode::NOT_FOUND, NO_OAUTH)
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is elsewhere (see `path` in the config)\n",
        ),
    })
}

/// The paths OAuth clients try on a server they take for their authorization server.
fn is_oauth_path(p: &str) -> bool {
    matches!(p, "/register" | "/authorize" | "/token")
        || p.starts_with("/.well-known/oauth-authorization-server")
        || p.starts_with("/.well-known/openid-configuration")
}

/// The answer at the RFC 9728 metadata path when no authorization server is configured.
const NO_OAUTH: &str =
    "not found: this gateway does not use OAuth sign-in (no auth.authorization_servers); \
send the API key you were given as Authorization: Bearer KEY\n";

/// `/metrics` and `/readyz` follow the endpoint's Host and Origin rules and, with
/// `[metrics] require_auth`, need a credential; `None` lets the request through.
fn guard_ops(gw: &Generation, parts: &http::request::Parts) -> Option<Reply> {
    let headers = &parts.headers;
    if let Err(r) = crate::edge::check_origin(
        parts,
        gw.cfg.listen.ip().is_loopback(),
        &gw.cfg.allowed_origins,
    ) {
        return Some(r);
    }
    if gw.cfg.metrics.require_auth {
        if let Err(e) = gw.auth.authenticate(headers) {
            let header = gw.auth.challenge(&e);
            return Some(
                match Reply::error("null", &crate::error::GatewayError::Auth(e)) {
                    Reply::Json(status, body) => Reply::Challenge(status, header, body),
                    other => other,
                },
            );
        }
    }
    None
}

fn metrics(gw: &Generation) -> Response<Body> {
    gw.rt.metrics.parked.set(gw.bridge.parked.len() as i64);
    gw.rt
        .metrics
        .sessions
        .set(gw.bridge.pool.open_sessions() as i64);
    gw.rt
        .metrics
        .audit_dropped
        .set(gw.rt.audit.dropped() as i64);
    gw.rt
        .metrics
        .trace_exports(crate::telemetry::counted::totals());
    if let Some(c) = &gw.governor.cluster {
        gw.rt.metrics.cluster(c);
    }
    for up in &gw.catalog.upstreams {
        gw.rt.metrics.upstream(up);
    }
    Response::builder()
        .header(
            http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
        .body(Full::new(Bytes::from(gw.rt.metrics.render())).boxed())
        .unwrap_or_default()
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(body.as_bytes())).boxed())
        .unwrap_or_default()
}

fn json_response(status: StatusCode, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

fn readyz(gw: &Generation) -> Response<Body> {
    let upstreams: Vec<_> = gw
        .catalog
        .upstreams
        .iter()
        .map(|u| {
            let s = u.status();
            // No error text: it may repeat what an upstream said; the log has the reason.
            let mut v = json!({"name": u.name, "probed": s.probed, "healthy": s.healthy});
            let states = u.balancer.endpoints.states();
            if states.len() > 1 || states.iter().any(|(_, b)| *b != "closed") {
                v["endpoints"] = states
                    .iter()
                    .map(|(url, b)| json!({"url": url, "breaker": b}))
                    .collect();
            }
            v
        })
        .collect();
    // Ready: every upstream probed once, and at least `metrics.min_healthy_upstreams` healthy
    // (by default 1): a replica with every upstream down takes no traffic it could not serve.
    let probed = gw.is_ready();
    let healthy = gw
        .catalog
        .upstreams
        .iter()
        .filter(|u| u.status().healthy)
        .count();
    let needed = gw.cfg.metrics.min_healthy(gw.catalog.upstreams.len());
    let ready = probed && healthy >= needed;
    let body = json!({"ready": ready, "probed": probed, "healthy": healthy, "min_healthy": needed, "upstreams": upstreams}).to_string();
    Response::builder()
        .status(if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        })
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}
