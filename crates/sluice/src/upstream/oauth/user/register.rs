//! Who Sluice is at an upstream's authorization server when it asks users' consent: the
//! pre-registered client of the config, its Client ID Metadata Document's URL where the server
//! takes one, or a client it registers (RFC 7591 Dynamic Client Registration), in that order.
//!
//! Takes the discovered server and the `[upstream.auth]`; gives the [`Client`]. Refuses (an
//! [`UpstreamError::Auth`] naming the upstream): a server that offers none of the three, and a
//! registration answer without a `client_id`. The secret a registration returns is kept in
//! memory only, never logged.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::super::discovery::Found;
use crate::config::{Proof, TokenEndpointAuth, UpstreamAuth};
use crate::upstream::client::{HttpClient, UpstreamError};

/// How Sluice presents itself to the token endpoint.
#[derive(Clone)]
pub(crate) struct Client {
    /// Its client id.
    pub id: String,
    /// Its secret, when it has one.
    pub secret: Option<String>,
    /// How the secret is sent (`None`: the id in the form only).
    pub method: TokenEndpointAuth,
    /// How it got its identity (`pre-registered`, `metadata document`, `registered`).
    pub how: &'static str,
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// Sluice's client at `found`'s server, for the redirect URI `redirect`.
pub(crate) async fn client(
    http: &HttpClient,
    name: &str,
    found: &Found,
    cfg: &UpstreamAuth,
    redirect: &str,
) -> Result<Client, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    if !cfg.client_id.is_empty() {
        let secret = match &cfg.proof {
            Proof::Secret { value, .. } => Some(value.clone()),
            _ => None,
        };
        return Ok(Client {
            id: cfg.client_id.clone(),
            method: if secret.is_some() {
                cfg.token_endpoint_auth
            } else {
                TokenEndpointAuth::None
            },
            secret,
            how: "pre-registered",
        });
    }
    if let (true, Some(url)) = (found.user.metadata_documents, &cfg.client_metadata_url) {
        return Ok(Client {
            id: url.clone(),
            secret: None,
            method: TokenEndpointAuth::None,
            how: "metadata document",
        });
    }
    let Some(at) = &found.user.registration else {
        return Err(fail("its authorization server offers no way for Sluice to register (no registration_endpoint, and no client_id_metadata_document_supported with client_metadata_url set): register Sluice there and set client_id".into()));
    };
    if cfg.issuer.is_none() && !super::super::discovery::on_issuers_origin(found, at) {
        return Err(fail("its authorization server's registration_endpoint is on another origin than its issuer: set [upstream.auth] issuer to allow that server".into()));
    }
    register(http, name, found, at, redirect).await
}

/// Registers Sluice at `at`, `found`'s registration endpoint (RFC 7591).
async fn register(
    http: &HttpClient,
    name: &str,
    found: &Found,
    at: &http::Uri,
    redirect: &str,
) -> Result<Client, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    // The method asked for, of those the server lists (RFC 8414 §2: `client_secret_basic`
    // when it lists none): `client_secret_post` first, whose id and secret in the form every
    // such server takes (some refuse Basic without the id in the form, others Basic with it).
    let asked = match &found.auth_methods {
        None => "client_secret_basic",
        Some(m) => ["client_secret_post", "client_secret_basic", "none"]
            .into_iter()
            .find(|x| m.iter().any(|y| y == x))
            .unwrap_or("none"),
    };
    let body = serde_json::json!({
        "client_name": "Sluice MCP gateway",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": asked,
        "application_type": "web",
    });
    let mut headers = HeaderMap::new();
    super::super::grant::post_headers(&mut headers, at, "application/json");
    let (_, answer) = http
        .send(
            http::Method::POST,
            name,
            at,
            headers,
            Bytes::from(body.to_string()),
            None,
        )
        .await?;
    let (status, body) = super::super::grant::whole(answer, "registration").map_err(fail)?;
    if status != StatusCode::CREATED && status != StatusCode::OK {
        return Err(fail(format!(
            "its registration endpoint refused Sluice (HTTP {})",
            status.as_u16()
        )));
    }
    let r: Registered = serde_json::from_slice(&body).map_err(|_| {
        fail("its registration endpoint's answer has no client_id (RFC 7591)".into())
    })?;
    let method = match (
        r.token_endpoint_auth_method.as_deref().or(Some(asked)),
        &r.client_secret,
    ) {
        (_, None) | (Some("none"), _) => TokenEndpointAuth::None,
        (Some("client_secret_post"), Some(_)) => TokenEndpointAuth::ClientSecretPost,
        _ => TokenEndpointAuth::ClientSecretBasic,
    };
    Ok(Client {
        id: r.client_id,
        secret: r
            .client_secret
            .filter(|_| method != TokenEndpointAuth::None),
        method,
        how: "registered",
    })
}
