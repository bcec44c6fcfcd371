//! `[auth.login]`: Sluice as the authorization server MCP clients sign in to, the user's
//! sign-in itself delegated to the company's OpenID Connect provider (issue 32).
//!
//! Takes the raw table and Sluice's `resource` URL; gives a [`LoginConfig`] with its defaults
//! (issuer = the resource's origin, claims `sub` and `groups`, lifetimes, registration on).
//! Refuses, saying which key to set: no `idp_issuer` or `idp_client_id` (or an empty one), an
//! issuer or IdP issuer that is not an `http(s)://` URL without query or fragment, a plain
//! `http://` issuer on a host that is not loopback, an issuer with a path (Sluice's endpoints
//! are at the root of its origin), lifetimes out of their bounds, and neither
//! registration way enabled (no client could sign in).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Invalid;

/// `[auth.login]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLogin {
    /// Sluice's public base URL, its issuer as an authorization server (default the origin of
    /// `auth.resource`). `https://` unless the host is loopback.
    pub(super) issuer: Option<String>,
    /// Required: the company IdP's OpenID Connect issuer (its
    /// `/.well-known/openid-configuration` is read from there).
    pub(super) idp_issuer: Option<String>,
    /// Required: the client id Sluice was registered with at the IdP.
    pub(super) idp_client_id: Option<String>,
    /// Environment variable holding that client's secret (absent: a public client, PKCE only).
    pub(super) idp_client_secret_env: Option<String>,
    /// Scopes asked of the IdP (default `["openid"]`; `openid` is always asked).
    #[serde(default)]
    pub(super) idp_scopes: Vec<String>,
    /// The ID token claim naming the principal (default `sub`).
    pub(super) principal_claim: Option<String>,
    /// The ID token claim listing the principal's groups (default `groups`).
    pub(super) groups_claim: Option<String>,
    /// Lifetime of Sluice's access tokens (default 600000, 60000 to 3600000).
    pub(super) access_token_ttl_ms: Option<u64>,
    /// Lifetime of a refresh token family from sign-in (default 86400000, 60000 to 2592000000).
    pub(super) refresh_token_ttl_ms: Option<u64>,
    /// Dynamic Client Registration at `/register` (RFC 7591; default true).
    pub(super) dynamic_registration: Option<bool>,
    /// Client ID Metadata Documents: a `client_id` that is an `https://` URL (default true).
    pub(super) client_metadata_documents: Option<bool>,
    /// Lets a Client ID Metadata Document be fetched over `http://` from a loopback host
    /// (tests only; default false).
    #[serde(default)]
    pub(super) allow_loopback_metadata: bool,
}

/// Sluice's authorization server front.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LoginConfig {
    /// Sluice's issuer: its public base URL, no trailing `/`.
    pub issuer: String,
    /// The IdP's issuer, as written (no trailing `/` added or removed).
    pub idp_issuer: String,
    /// Sluice's client id at the IdP.
    pub idp_client_id: String,
    /// The variable holding Sluice's client secret at the IdP.
    pub idp_client_secret_env: Option<String>,
    /// Scopes asked of the IdP, `openid` first.
    pub idp_scopes: Vec<String>,
    /// The ID token claim naming the principal.
    pub principal_claim: String,
    /// The ID token claim listing groups.
    pub groups_claim: String,
    /// Lifetime of an access token, in milliseconds.
    pub access_token_ttl_ms: u64,
    /// Lifetime of a refresh token family, in milliseconds.
    pub refresh_token_ttl_ms: u64,
    /// Whether `/register` takes registrations.
    pub dynamic_registration: bool,
    /// Whether a URL `client_id` is taken as a Client ID Metadata Document.
    pub client_metadata_documents: bool,
    /// Whether a metadata document may come over `http://` from a loopback host.
    pub allow_loopback_metadata: bool,
}

/// Bounds of `access_token_ttl_ms`.
const ACCESS_TTL: (u64, u64) = (60_000, 3_600_000);
/// Bounds of `refresh_token_ttl_ms`.
const REFRESH_TTL: (u64, u64) = (60_000, 30 * 86_400_000);

impl LoginConfig {
    /// `[auth.login]` for `resource` (Sluice's MCP endpoint URL).
    pub(super) fn from_raw(raw: RawLogin, resource: &str) -> Result<LoginConfig, Invalid> {
        let need = |v: Option<String>, key: &str, what: &str| {
            v.map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    Invalid(format!(
                        "auth.login.{key} is missing or empty: set it to {what}"
                    ))
                })
        };
        let idp_issuer = need(
            raw.idp_issuer,
            "idp_issuer",
            "your company IdP's OpenID Connect issuer URL (e.g. https://login.example.com)",
        )?;
        let idp_client_id = need(
            raw.idp_client_id,
            "idp_client_id",
            "the client id Sluice is registered with at your IdP",
        )?;
        url_ok(&idp_issuer, "idp_issuer")?;
        let issuer = match raw.issuer {
            Some(i) => i.trim_end_matches('/').to_owned(),
            None => origin(resource),
        };
        url_ok(&issuer, "issuer")?;
        if issuer.splitn(4, '/').nth(3).is_some_and(|p| !p.is_empty()) {
            return Err(Invalid(format!("auth.login.issuer = {issuer:?} has a path: Sluice serves /authorize, /token and its metadata at the root of its origin; write the origin only (e.g. https://mcp.example.com)")));
        }
        let mut idp_scopes = vec!["openid".to_owned()];
        idp_scopes.extend(raw.idp_scopes.into_iter().filter(|s| s != "openid"));
        if raw.idp_client_secret_env.as_deref() == Some("") {
            return Err(Invalid("auth.login.idp_client_secret_env is empty: name the environment variable holding Sluice's client secret at the IdP, or remove the key for a public client".into()));
        }
        for (key, v) in [
            ("principal_claim", &raw.principal_claim),
            ("groups_claim", &raw.groups_claim),
        ] {
            if v.as_deref().is_some_and(|c| c.trim().is_empty()) {
                return Err(Invalid(format!("auth.login.{key} is empty: name the ID token claim, or remove the key for its default")));
            }
        }
        let cfg = LoginConfig {
            issuer,
            idp_issuer,
            idp_client_id,
            idp_client_secret_env: raw.idp_client_secret_env,
            idp_scopes,
            principal_claim: raw.principal_claim.unwrap_or_else(|| "sub".into()),
            groups_claim: raw.groups_claim.unwrap_or_else(|| "groups".into()),
            access_token_ttl_ms: ttl(raw.access_token_ttl_ms, 600_000, ACCESS_TTL, "access")?,
            refresh_token_ttl_ms: ttl(
                raw.refresh_token_ttl_ms,
                86_400_000,
                REFRESH_TTL,
                "refresh",
            )?,
            dynamic_registration: raw.dynamic_registration.unwrap_or(true),
            client_metadata_documents: raw.client_metadata_documents.unwrap_or(true),
            allow_loopback_metadata: raw.allow_loopback_metadata,
        };
        if !cfg.dynamic_registration && !cfg.client_metadata_documents {
            return Err(Invalid("auth.login: dynamic_registration and client_metadata_documents are both false, so no client could register; enable one".into()));
        }
        Ok(cfg)
    }

    /// Where the IdP sends the user's browser back.
    pub fn callback(&self) -> String {
        format!("{}{LOGIN_CALLBACK}", self.issuer)
    }
}

/// The path of the IdP's redirect back to Sluice.
pub const LOGIN_CALLBACK: &str = "/login/callback";

fn ttl(v: Option<u64>, default: u64, (lo, hi): (u64, u64), which: &str) -> Result<u64, Invalid> {
    let v = v.unwrap_or(default);
    if !(lo..=hi).contains(&v) {
        return Err(Invalid(format!(
            "auth.login.{which}_token_ttl_ms = {v} is out of bounds: use {lo} to {hi}"
        )));
    }
    Ok(v)
}

/// `scheme://authority` of a URL (the whole string when it has no path).
fn origin(url: &str) -> String {
    match url.find("://").map(|i| i + 3) {
        Some(start) => match url[start..].find('/') {
            Some(j) => url[..start + j].to_owned(),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// An `http(s)://` URL without query or fragment; plain `http` only on loopback (a test IdP
/// there; anywhere else, whoever is on the path could serve its own keys and forge sign-ins).
fn url_ok(url: &str, key: &str) -> Result<(), Invalid> {
    let bad = |why: &str| {
        Invalid(format!(
            "auth.login.{key} = {url:?} {why}: write an https:// URL without query or fragment"
        ))
    };
    let uri: http::Uri = url.parse().map_err(|_| bad("is not a URL"))?;
    let host = uri.host().ok_or_else(|| bad("has no host"))?;
    if url.contains('?') || url.contains('#') {
        return Err(bad("has a query or a fragment"));
    }
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(host) => Ok(()),
        Some("http") => Err(bad("is plain http on a host that is not loopback")),
        _ => Err(bad("is not http(s)")),
    }
}

/// Whether `host` (a URI host, IPv6 in brackets) is loopback.
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
