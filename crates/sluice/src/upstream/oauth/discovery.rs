//! Finding an upstream's authorization server: its protected resource metadata (RFC 9728),
//! then the server's own metadata (RFC 8414, or OpenID Connect discovery).
//!
//! Takes the upstream's URL and, when it gave one, its Bearer challenge; gives the token
//! endpoint, the `resource` to ask a token for (the metadata's, byte for byte) and the scopes
//! it lists. Refuses (an [`UpstreamError::Auth`] naming the step): metadata whose `resource`
//! is not the upstream's own origin and path, an authorization server whose metadata names
//! another `issuer` than the one asked for (checked as exact strings, RFC 8414 §3.3), a server
//! without a `token_endpoint`, a URL that is not `http://` (Sluice's upstream client speaks no
//! TLS yet), and any answer over the upstream's response limit or time (the HTTP client's
//! bounds).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use serde::Deserialize;

use super::challenge::Challenge;
use crate::upstream::client::{Answer, HttpClient, UpstreamError};

/// What discovery found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Found {
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its token endpoint.
    pub token_endpoint: Uri,
    /// The protected resource's `resource`, as written there.
    pub resource: String,
    /// The resource metadata's `scopes_supported`.
    pub scopes_supported: Vec<String>,
    /// The server's `grant_types_supported`, when it lists them.
    pub grant_types: Option<Vec<String>>,
    /// The server's `token_endpoint_auth_methods_supported`, when it lists them.
    pub auth_methods: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    token_endpoint: Option<String>,
    grant_types_supported: Option<Vec<String>>,
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// Finds the authorization server of the upstream at `url` (`name` for errors).
pub(super) async fn find(
    client: &HttpClient,
    name: &str,
    url: &Uri,
    challenge: &Challenge,
) -> Result<Found, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    let prm = resource_metadata(client, name, url, challenge).await?;
    if !same_resource(url, &prm.resource) {
        return Err(fail(format!(
            "its protected resource metadata names another resource ({}) than its url",
            crate::escape::shown(&prm.resource, 120)
        )));
    }
    let issuer = prm.authorization_servers.first().ok_or_else(|| {
        fail("its protected resource metadata names no authorization server".into())
    })?;
    let meta = server_metadata(client, name, issuer).await?;
    let token_endpoint = meta
        .token_endpoint
        .as_deref()
        .ok_or_else(|| fail("its authorization server's metadata has no token_endpoint".into()))
        .and_then(|t| http_uri(name, "token_endpoint", t))?;
    Ok(Found {
        issuer: meta.issuer,
        token_endpoint,
        resource: prm.resource,
        scopes_supported: prm.scopes_supported,
        grant_types: meta.grant_types_supported,
        auth_methods: meta.token_endpoint_auth_methods_supported,
    })
}

/// The resource metadata: where the challenge says, else the path-aware well-known location,
/// else the root one (RFC 9728 §3.1).
async fn resource_metadata(
    client: &HttpClient,
    name: &str,
    url: &Uri,
    challenge: &Challenge,
) -> Result<ResourceMetadata, UpstreamError> {
    let mut tried = Vec::new();
    if let Some(at) = &challenge.resource_metadata {
        tried.push(http_uri(name, "resource_metadata", at)?);
    }
    let path = url.path().trim_end_matches('/');
    let base = format!("{}://{}", scheme(url), authority(url));
    if !path.is_empty() {
        tried.push(parse(
            name,
            &format!("{base}/.well-known/oauth-protected-resource{path}"),
        )?);
    }
    tried.push(parse(
        name,
        &format!("{base}/.well-known/oauth-protected-resource"),
    )?);
    for at in &tried {
        if let Some(m) = get_json(client, name, at).await? {
            return Ok(m);
        }
    }
    Err(UpstreamError::Auth(
        name.to_owned(),
        "no protected resource metadata found (RFC 9728: none in its WWW-Authenticate challenge nor at /.well-known/oauth-protected-resource)".into(),
    ))
}

/// The authorization server's metadata, from the locations RFC 8414 §3.1 and OpenID Connect
/// discovery give for `issuer`, its `issuer` checked.
async fn server_metadata(
    client: &HttpClient,
    name: &str,
    issuer: &str,
) -> Result<ServerMetadata, UpstreamError> {
    let iss = http_uri(name, "authorization server", issuer)?;
    let base = format!("{}://{}", scheme(&iss), authority(&iss));
    let path = iss.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{base}/.well-known/oauth-authorization-server"),
            format!("{base}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    };
    for at in candidates {
        let Some(meta) = get_json::<ServerMetadata>(client, name, &parse(name, &at)?).await? else {
            continue;
        };
        if meta.issuer != issuer {
            return Err(UpstreamError::Auth(
                name.to_owned(),
                format!(
                    "its authorization server's metadata names issuer {} where {} was asked for (RFC 8414 §3.3: refused)",
                    crate::escape::shown(&meta.issuer, 120),
                    crate::escape::shown(issuer, 120)
                ),
            ));
        }
        return Ok(meta);
    }
    Err(UpstreamError::Auth(
        name.to_owned(),
        format!(
            "no authorization server metadata found for {} (RFC 8414, OpenID Connect discovery)",
            crate::escape::shown(issuer, 120)
        ),
    ))
}

/// GETs `at`: its JSON when it answers 200 with a body that reads as `T`, `None` when it
/// answers anything else (a location that is not there).
async fn get_json<T: serde::de::DeserializeOwned>(
    client: &HttpClient,
    name: &str,
    at: &Uri,
) -> Result<Option<T>, UpstreamError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    let host = authority(at);
    if let Ok(h) = HeaderValue::from_str(&host) {
        headers.insert(http::header::HOST, h);
    }
    let (_, answer) = client
        .send(http::Method::GET, name, at, headers, Bytes::new(), None)
        .await?;
    Ok(match answer {
        Answer::Json(StatusCode::OK, body) => serde_json::from_slice(&body).ok(),
        _ => None,
    })
}

/// Whether `resource` names the upstream at `url`: the same scheme and authority, and a path
/// that is the URL's or a prefix of it at a segment boundary.
fn same_resource(url: &Uri, resource: &str) -> bool {
    let Ok(r) = resource.parse::<Uri>() else {
        return false;
    };
    if r.scheme_str() != url.scheme_str() || r.authority() != url.authority() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let up = url.path().trim_end_matches('/');
    up == rp
        || up
            .strip_prefix(rp)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn scheme(u: &Uri) -> &str {
    u.scheme_str().unwrap_or("http")
}

fn authority(u: &Uri) -> String {
    u.authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default()
}

fn parse(name: &str, at: &str) -> Result<Uri, UpstreamError> {
    at.parse()
        .map_err(|_| UpstreamError::Auth(name.to_owned(), "a metadata URL does not parse".into()))
}

/// `at` as an `http://` or `https://` URL, or why not (`what` names the field).
pub(super) fn http_uri(name: &str, what: &str, at: &str) -> Result<Uri, UpstreamError> {
    let fail = |why: &str| {
        UpstreamError::Auth(
            name.to_owned(),
            format!("{what} {}: {why}", crate::escape::shown(at, 120)),
        )
    };
    let u: Uri = at.parse().map_err(|_| fail("not a URL"))?;
    match u.scheme_str() {
        Some("http" | "https") if u.authority().is_some() => Ok(u),
        _ => Err(fail("not an http:// or https:// URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_the_upstream_or_a_prefix_of_its_path() {
        let url: Uri = "http://h:1/api/mcp".parse().unwrap();
        assert!(same_resource(&url, "http://h:1/api/mcp"));
        assert!(same_resource(&url, "http://h:1/api/mcp/"));
        assert!(same_resource(&url, "http://h:1/api"));
        assert!(same_resource(&url, "http://h:1"));
        assert!(!same_resource(&url, "http://h:1/ap"));
        assert!(!same_resource(&url, "http://h:2/api/mcp"));
        assert!(!same_resource(&url, "https://evil.example.com/mcp"));
        assert!(!same_resource(&url, "http://h:1/api/mcp/more"));
    }

    #[test]
    fn only_web_urls_are_followed() {
        assert!(http_uri("u", "token_endpoint", "http://a:1/token").is_ok());
        assert!(http_uri("u", "token_endpoint", "https://a/token").is_ok());
        assert!(http_uri("u", "token_endpoint", "file:///etc/passwd").is_err());
        assert!(http_uri("u", "token_endpoint", "/relative").is_err());
    }
}
