//! `[auth]`, `[auth.jwt]` and `[auth.login]`: how a caller proves who it is.
//!
//! Takes the raw tables, the `required_scopes` gathered from the upstreams and the endpoint's own
//! URL (the default `resource`); gives an [`AuthConfig`] with the JWT claims and leeway at their
//! defaults. Refuses `[auth.login]` with `authorization_servers` (Sluice is then the one) and
//! what `login.rs` refuses; nothing else itself: whether a listener or `/metrics` may go without auth is
//! checked where the config is assembled, since it spans sections.

use serde::{Deserialize, Serialize};

use super::login::LoginConfig;
use super::raw::{RawAuth, RawJwt};
use super::upstream::UpstreamScopes;
use super::Invalid;

/// One API key: the SHA-256 (hex) of the key, never the key itself.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Hex SHA-256 of the key (`sluice hash-key KEY` prints it).
    pub sha256: String,
    /// The principal the key authenticates.
    pub principal: String,
    /// Its groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Its scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// JWT bearer settings.
#[derive(Debug, Clone, Serialize)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: String,
    /// Required `aud` (default: `auth.resource`).
    pub audience: Option<String>,
    /// Environment variable holding an HS256 secret.
    pub hs256_secret_env: Option<String>,
    /// File holding an HS256 secret.
    pub hs256_secret_file: Option<String>,
    /// PEM files of RS256 / ES256 public keys.
    pub public_keys: Vec<String>,
    /// A JWKS file.
    pub jwks_file: Option<String>,
    /// The claim naming the principal (default `sub`).
    pub principal_claim: String,
    /// The claim listing groups (default `groups`).
    pub groups_claim: String,
    /// Clock leeway for `exp` / `nbf` (default 30 s).
    pub leeway_ms: u64,
}

/// Authentication: API keys and/or JWT; neither means `none` (loopback only).
#[derive(Debug, Clone, Serialize, Default)]
pub struct AuthConfig {
    /// Sluice's own resource URL (the JWT audience, and RFC 9728 `resource`). Printed, like
    /// every value, through the one redaction (`redact.rs`).
    pub resource: String,
    /// Authorization servers advertised in the resource metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes every request needs.
    pub required_scopes: Vec<String>,
    /// Scopes per upstream (from each upstream's `required_scopes`).
    pub upstream_scopes: Vec<(String, Vec<String>)>,
    /// API keys (hashes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<ApiKeyConfig>,
    /// Environment variable with more keys.
    pub api_keys_env: Option<String>,
    /// JWT settings.
    pub jwt: Option<JwtConfig>,
    /// Sluice's own authorization server front (`[auth.login]`).
    pub login: Option<super::login::LoginConfig>,
}

// === impl AuthConfig ===

impl AuthConfig {
    /// `[auth]` with the upstreams' scopes; `resource` defaults to `endpoint()`, the URL Sluice
    /// serves MCP on.
    pub(super) fn from_raw(
        raw: RawAuth,
        upstream_scopes: UpstreamScopes,
        endpoint: impl FnOnce() -> String,
    ) -> Result<AuthConfig, Invalid> {
        let resource = raw.resource.unwrap_or_else(endpoint);
        let login = raw
            .login
            .map(|l| LoginConfig::from_raw(l, &resource))
            .transpose()?;
        let mut authorization_servers = raw.authorization_servers;
        if let Some(l) = &login {
            // Sluice is the authorization server its resource metadata names.
            if !authorization_servers.is_empty() {
                return Err(Invalid("auth.authorization_servers and [auth.login] are both set: with [auth.login] Sluice is the authorization server; remove authorization_servers".into()));
            }
            authorization_servers.push(l.issuer.clone());
        }
        Ok(AuthConfig {
            resource,
            authorization_servers,
            required_scopes: raw.required_scopes,
            upstream_scopes,
            api_keys: raw.api_keys,
            api_keys_env: raw.api_keys_env,
            jwt: raw.jwt.map(JwtConfig::from),
            login,
        })
    }

    /// Whether any credential is configured (API keys, a key variable or JWT); without one,
    /// every caller is let in, which is only safe on loopback.
    pub(super) fn configured(&self) -> bool {
        !(self.api_keys.is_empty()
            && self.api_keys_env.is_none()
            && self.jwt.is_none()
            && self.login.is_none())
    }
}

// === impl JwtConfig ===

impl From<RawJwt> for JwtConfig {
    fn from(j: RawJwt) -> JwtConfig {
        JwtConfig {
            issuer: j.issuer,
            audience: j.audience,
            hs256_secret_env: j.hs256_secret_env,
            hs256_secret_file: j.hs256_secret_file,
            public_keys: j.public_keys,
            jwks_file: j.jwks_file,
            principal_claim: j.principal_claim.unwrap_or_else(|| "sub".into()),
            groups_claim: j.groups_claim.unwrap_or_else(|| "groups".into()),
            leeway_ms: j.leeway_ms.unwrap_or(30_000),
        }
    }
}
