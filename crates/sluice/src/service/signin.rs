//! The public listener's side of users' sign-ins to upstreams reached as each user
//! (`[upstream.auth] mode = "oauth"`): the OAuth callback a browser comes back to, and the
//! Client ID Metadata Document that names Sluice to authorization servers that take one.
//!
//! Takes `GET /oauth/callback?code=…&state=…[&iss=…]` (or `?error=…&state=…`) and
//! `GET /oauth/client-metadata.json`; gives a short page that says what happened (never the
//! code, the token or the principal) and the document. Refuses (400, with a page that says
//! what to do): a `state` no upstream issued, or one used or expired; an answer without
//! `code`; the authorization server's own refusal (its `error` code shown when it is a plain
//! token); what `Users::finish` refuses (another `iss`, a code the server would not exchange).

use std::borrow::Cow;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::gateway::Generation;
use crate::respond::Body;

/// Where a browser comes back after consent.
pub const CALLBACK: &str = crate::config::CALLBACK_PATH;
/// Where Sluice's Client ID Metadata Document is served.
pub const METADATA: &str = "/oauth/client-metadata.json";

/// Answers the callback.
pub async fn callback(gw: &Generation, query: Option<&str>) -> Response<Body> {
    let q: Vec<(Cow<'_, str>, Cow<'_, str>)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes()).collect();
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_ref());
    let Some(state) = get("state") else {
        return page(StatusCode::BAD_REQUEST, "This sign-in link carries no state: start again by calling the tool in your MCP client.".into());
    };
    let mut issuer = None;
    for p in gw
        .catalog
        .upstreams
        .iter()
        .filter_map(|u| u.per_user.as_ref())
    {
        if p.users.issued(state).await {
            issuer = Some(p.users.clone());
            break;
        }
    }
    let Some(users) = issuer else {
        return page(StatusCode::BAD_REQUEST, "This sign-in link was used already or has expired: call the tool again in your MCP client for a new one.".into());
    };
    if let Some(error) = get("error") {
        users.abandon(state).await;
        let shown = if error.len() <= 64
            && error
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            error
        } else {
            "an error"
        };
        return page(StatusCode::BAD_REQUEST, format!("The authorization server of {} answered {shown}: nothing was signed in. Call the tool again to retry.", users.name()));
    }
    let Some(code) = get("code").filter(|c| !c.is_empty()) else {
        users.abandon(state).await;
        return page(StatusCode::BAD_REQUEST, "The authorization server sent no code: nothing was signed in. Call the tool again to retry.".into());
    };
    let http = &gw.catalog.link.client;
    match users.finish(http, state, code, get("iss")).await {
        Ok(_) => page(
            StatusCode::OK,
            format!(
                "Signed in to {}. You can close this window and go back to your MCP client.",
                users.name()
            ),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "a sign-in to an upstream failed");
            page(
                StatusCode::BAD_REQUEST,
                format!("Signing in failed: {e}. Call the tool again to retry."),
            )
        }
    }
}

/// Sluice's Client ID Metadata Document: its `client_id` (the first `client_metadata_url`
/// configured) and every `oauth` upstream's redirect URI; 404 when none is configured.
pub fn metadata(gw: &Generation) -> Response<Body> {
    let auths: Vec<&crate::config::UpstreamAuth> = gw
        .cfg
        .upstreams
        .iter()
        .filter_map(|u| u.auth.as_ref())
        .filter(|a| a.mode == crate::config::AuthMode::Oauth)
        .collect();
    let Some(id) = auths.iter().find_map(|a| a.client_metadata_url.clone()) else {
        return page(
            StatusCode::NOT_FOUND,
            "No client_metadata_url is configured: this Sluice has no Client ID Metadata Document."
                .into(),
        );
    };
    let mut redirects: Vec<String> = gw
        .catalog
        .upstreams
        .iter()
        .filter_map(|u| u.per_user.as_ref())
        .map(|p| p.users.redirect().to_owned())
        .collect();
    redirects.sort();
    redirects.dedup();
    let doc = serde_json::json!({
        "client_id": id,
        "client_name": "Sluice MCP gateway",
        "redirect_uris": redirects,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(doc.to_string())).boxed())
        .unwrap_or_default()
}

/// A plain page: `text` escaped, no script, not framed, not cached.
fn page(status: StatusCode, text: String) -> Response<Body> {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let body = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>Sluice sign-in</title><p>{escaped}</p>\n"
    );
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(
            "content-security-policy",
            "default-src 'none'; frame-ancestors 'none'",
        )
        .header(http::header::CACHE_CONTROL, "no-store")
        .header("referrer-policy", "no-referrer")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}
