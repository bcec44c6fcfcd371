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

use crate::gateway::Gateway;
use crate::respond::Body;

/// Handles one request.
pub async fn handle(gw: Arc<Gateway>, req: Request<hyper::body::Incoming>) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    if path == gw.cfg.path {
        return Ok(crate::pipeline::run(&gw, parts, body).await.into_response());
    }
    Ok(match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => readyz(&gw),
        p if p == "/.well-known/oauth-protected-resource"
            || p.strip_prefix("/.well-known/oauth-protected-resource") == Some(gw.cfg.path.as_str()) =>
        {
            json_response(StatusCode::OK, gw.auth.metadata().to_string())
        }
        _ => text(StatusCode::NOT_FOUND, "not found: the MCP endpoint is elsewhere (see `path` in the config)\n"),
    })
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

fn readyz(gw: &Gateway) -> Response<Body> {
    let upstreams: Vec<_> = gw
        .upstreams
        .iter()
        .map(|u| {
            let s = u.status();
            json!({"name": u.name, "probed": s.probed, "healthy": s.healthy, "error": s.error})
        })
        .collect();
    let ready = gw.is_ready();
    let body = json!({"ready": ready, "upstreams": upstreams}).to_string();
    Response::builder()
        .status(if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE })
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}
