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
    /// What a user's consent needs of the server (`oauth` mode).
    pub user: UserEndpoints,
}

/// The authorization server's metadata a user's consent needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct UserEndpoints {
    /// Its `authorization_endpoint`.
    pub authorization: Option<Uri>,
    /// Its `registration_endpoint` (Dynamic Client Registration, RFC 7591).
    pub registration: Option<Uri>,
    /// Its `code_challenge_methods_supported`, when listed.
    pub pkce_methods: Option<Vec<String>>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub iss_parameter: bool,
    /// `client_id_metadata_document_supported`.
    pub metadata_documents: bool,
    /// The server's own `scopes_supported`.
    pub scopes_supported: Vec<String>,
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
    authorization_endpoint: Option<String>,
    registration_endpoint: Option<String>,
    code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

/// Finds the authorization server of the upstream at `url` (`name` for errors).
pub(super) async fn find(
    client: &HttpClient,
    name: &str,
    url: &Uri,
    challenge: &Challenge,
) -> Result<Found, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    let Some(prm) = resource_metadata(client, name, url, challenge).await? else {
        return before_resource_metadata(client, name, url).await;
    };
    if !same_resource(url, &prm.resource) {
        return Err(fail(
            "its protected resource metadata names another resource than its url".into(),
        ));
    }
    let issuer = prm.authorization_servers.first().ok_or_else(|| {
        fail("its protected resource metadata names no authorization server".into())
    })?;
    let meta = server_metadata(client, name, issuer).await?;
    found(name, meta, prm.resource, prm.scopes_supported)
}

/// The authorization server `issuer` itself, from its metadata (`token_exchange`: the company's
/// identity provider, configured, not named by the upstream); no resource.
pub(super) async fn at_issuer(
    client: &HttpClient,
    name: &str,
    issuer: &str,
) -> Result<Found, UpstreamError> {
    let meta = server_metadata(client, name, issuer).await?;
    found(name, meta, String::new(), Vec::new())
}

/// An MCP 2025-03-26 server, which publishes no resource metadata: its own origin is its
/// authorization server, described at that origin's RFC 8414 location or, without one, at the
/// default paths `/authorize`, `/token` and `/register` (MCP 2025-03-26, "Fallbacks").
async fn before_resource_metadata(
    client: &HttpClient,
    name: &str,
    url: &Uri,
) -> Result<Found, UpstreamError> {
    let base = origin(url);
    let at = parse(
        name,
        &format!("{base}/.well-known/oauth-authorization-server"),
    )?;
    let meta = match get_json::<ServerMetadata>(client, name, &at).await? {
        Some(m) => m,
        None => ServerMetadata {
            issuer: base.clone(),
            token_endpoint: Some(format!("{base}/token")),
            authorization_endpoint: Some(format!("{base}/authorize")),
            registration_endpoint: Some(format!("{base}/register")),
            grant_types_supported: None,
            token_endpoint_auth_methods_supported: None,
            // MCP 2025-03-26's default endpoints: PKCE was required of them.
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            authorization_response_iss_parameter_supported: false,
            client_id_metadata_document_supported: false,
            scopes_supported: Vec::new(),
        },
    };
    found(name, meta, url.to_string(), Vec::new())
}

/// What `meta` says, for `resource` and its `scopes`.
fn found(
    name: &str,
    meta: ServerMetadata,
    resource: String,
    scopes: Vec<String>,
) -> Result<Found, UpstreamError> {
    let fail = |why: String| UpstreamError::Auth(name.to_owned(), why);
    let token_endpoint = meta
        .token_endpoint
        .as_deref()
        .ok_or_else(|| fail("its authorization server's metadata has no token_endpoint".into()))
        .and_then(|t| http_uri(name, "token_endpoint", t))?;
    let endpoint = |what: &str, at: &Option<String>| {
        at.as_deref().map(|t| http_uri(name, what, t)).transpose()
    };
    let user = UserEndpoints {
        authorization: endpoint("authorization_endpoint", &meta.authorization_endpoint)?,
        registration: endpoint("registration_endpoint", &meta.registration_endpoint)?,
        pkce_methods: meta.code_challenge_methods_supported,
        iss_parameter: meta.authorization_response_iss_parameter_supported,
        metadata_documents: meta.client_id_metadata_document_supported,
        scopes_supported: meta.scopes_supported,
    };
    Ok(Found {
        user,
        issuer: meta.issuer,
        token_endpoint,
        resource,
        scopes_supported: scopes,
        grant_types: meta.grant_types_supported,
        auth_methods: meta.token_endpoint_auth_methods_supported,
    })
}

/// The resource metadata: where the challenge says, else the path-aware well-known location,
/// else the root one (RFC 9728 §3.1); `None` when there is none.
async fn resource_metadata(
    client: &HttpClient,
    name: &str,
    url: &Uri,
    challenge: &Challenge,
) -> Result<Option<ResourceMetadata>, UpstreamError> {
    let mut tried = Vec::new();
    let base = origin(url);
    if let Some(at) = &challenge.resource_metadata {
        // Served by the resource server itself (RFC 9728 §3): on another origin it is refused.
        let at = http_uri(name, "resource_metadata", at)?;
        if origin(&at) != base {
            return Err(UpstreamError::Auth(
                name.to_owned(),
                "its challenge points at resource metadata on another origin than its url".into(),
            ));
        }
        tried.push(at);
    }
    let path = url.path().trim_end_matches('/');
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
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The authorization server's metadata, from the locations RFC 8414 §3.1 and OpenID Connect
/// discovery give for `issuer`, its `issuer` checked.
async fn server_metadata(
    client: &HttpClient,
    name: &str,
    issuer: &str,
) -> Result<ServerMetadata, UpstreamError> {
    let iss = http_uri(name, "authorization server", issuer)?;
    let base = origin(&iss);
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
                "its authorization server's metadata names another issuer than the one asked for (RFC 8414 §3.3: refused)".into(),
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
    if let Ok(h) = HeaderValue::from_str(&host_port(at)) {
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

/// Whether `resource` names the upstream at `url`: the same origin, a path that is the URL's
/// or a prefix of it at a segment boundary, no query and no fragment (RFC 8707 §2).
fn same_resource(url: &Uri, resource: &str) -> bool {
    let Ok(r) = resource.parse::<Uri>() else {
        return false;
    };
    if resource.contains('#') || r.query().is_some() || origin(&r) != origin(url) {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let up = url.path().trim_end_matches('/');
    up == rp
        || up
            .strip_prefix(rp)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Where discovery may send the client secret: to the configured `issuer` only, or, without
/// one, to a token endpoint on the origin of the issuer the upstream named.
pub(super) fn pinned(name: &str, found: &Found, issuer: Option<&str>) -> Result<(), UpstreamError> {
    let fail = |why: &str| Err(UpstreamError::Auth(name.to_owned(), why.to_owned()));
    match issuer {
        Some(i) if i != found.issuer => {
            fail("its resource metadata names another authorization server than the configured issuer")
        }
        Some(_) => Ok(()),
        None => match found.issuer.parse::<Uri>() {
            Ok(iss) if origin(&iss) == origin(&found.token_endpoint) => Ok(()),
            _ => fail("its authorization server's token_endpoint is on another origin than its issuer: set [upstream.auth] issuer to allow that server"),
        },
    }
}

/// Whether `at` is on the origin of `found`'s issuer.
pub(super) fn on_issuers_origin(found: &Found, at: &Uri) -> bool {
    found
        .issuer
        .parse::<Uri>()
        .is_ok_and(|iss| origin(&iss) == origin(at))
}

/// `scheme://host[:port]`, lowercased, without any userinfo.
fn origin(u: &Uri) -> String {
    format!("{}://{}", u.scheme_str().unwrap_or("http"), host_port(u)).to_ascii_lowercase()
}

/// `host[:port]`, without any userinfo.
pub(super) fn host_port(u: &Uri) -> String {
    match (u.host(), u.port_u16()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => String::new(),
    }
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

/// A found server for other modules' tests.
#[cfg(test)]
pub(super) fn tests_found() -> Found {
    tests::found("http://as:1", "http://as:1/token")
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
        assert!(!same_resource(&url, "http://h:1/api/mcp?aud=http://other"));
        assert!(!same_resource(&url, "http://h:1/api/mcp#frag"));
        assert!(!same_resource(&url, "http://evil@h:1/api/mcp/../x"));
    }

    pub(in crate::upstream::oauth) fn found(issuer: &str, token: &str) -> Found {
        Found {
            issuer: issuer.into(),
            token_endpoint: token.parse().unwrap(),
            resource: "http://up:1/mcp".into(),
            scopes_supported: vec![],
            grant_types: None,
            auth_methods: None,
            user: Default::default(),
        }
    }

    #[test]
    fn the_secret_goes_to_the_configured_issuer_or_to_the_named_issuers_origin_only() {
        let same = found("http://as:1", "http://as:1/token");
        assert!(pinned("u", &same, None).is_ok());
        assert!(pinned("u", &same, Some("http://as:1")).is_ok());
        let e = pinned("u", &same, Some("http://idp.corp:1")).unwrap_err();
        assert!(e.to_string().contains("than the configured issuer"), "{e}");
        let off = found("http://as:1", "http://evil:2/token");
        let e = pinned("u", &off, None).unwrap_err();
        assert!(e.to_string().contains("set [upstream.auth] issuer"), "{e}");
        assert!(pinned("u", &off, Some("http://as:1")).is_ok());
    }

    #[test]
    fn only_web_urls_are_followed() {
        assert!(http_uri("u", "token_endpoint", "http://a:1/token").is_ok());
        assert!(http_uri("u", "token_endpoint", "https://a/token").is_ok());
        assert!(http_uri("u", "token_endpoint", "file:///etc/passwd").is_err());
        assert!(http_uri("u", "token_endpoint", "/relative").is_err());
    }
}
