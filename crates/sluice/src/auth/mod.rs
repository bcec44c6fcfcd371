//! Stage 1b, authentication: who is calling. Principals come from authentication, never from
//! `clientInfo`.
//!
//! Takes the request headers; gives a [`Principal`] (id, groups, scopes) of an API key, a JWT
//! of the configured issuer (`jwt.rs`) or one of Sluice's own access tokens (`[auth.login]`,
//! `issued.rs`: a token whose `kid` names Sluice's keys is checked by those only). With no API
//! keys, no JWT and no login configured (`auth = none`, loopback listeners only) everyone is the one local
//! principal. Refuses a missing or invalid credential with 401 and a missing scope with 403,
//! both carrying `WWW-Authenticate: Bearer resource_metadata="…"` (RFC 9728) when an
//! authorization server is configured to point at, and `Bearer realm="sluice"` otherwise: with
//! API keys only, nothing advertises OAuth (an OAuth-aware client would look for a sign-in that
//! does not exist).

pub mod api_keys;
pub mod issued;
pub mod jwt;
pub mod revoked;

use std::collections::BTreeSet;

use http::HeaderMap;

use crate::config::AuthConfig;

/// The principal of Sluice's own upstream sessions (lists, probes): no credential may claim it.
pub const INTERNAL_PRINCIPAL: &str = "sluice-internal";

/// An authenticated caller: the key of budgets, sealed state and upstream session pools. Two are
/// equal when their id, groups and scopes are: whichever JWT it came with, it is who it is.
#[derive(Debug, Clone)]
pub struct Principal {
    /// Its id (API key's principal, or the JWT's principal claim).
    pub id: String,
    /// Its groups (policies and budgets may match them).
    pub groups: Vec<String>,
    /// Its scopes.
    pub scopes: BTreeSet<String>,
    /// The JWT it authenticated with (`None` for an API key and `auth = none`): what a
    /// `token_exchange` upstream exchanges for a token of its own.
    pub subject: Option<SubjectToken>,
}

impl Principal {
    /// The single principal of `auth = none`.
    pub fn local() -> Principal {
        Principal {
            id: "local".into(),
            groups: Vec::new(),
            scopes: BTreeSet::new(),
            subject: None,
        }
    }

    /// Its id as written into sealed state and logs.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The validated JWT a principal came with, as it came: never printed (its `Debug` only says it
/// is there).
#[derive(Clone)]
pub struct SubjectToken(std::sync::Arc<str>);

impl SubjectToken {
    /// Holds `token`.
    pub fn new(token: &str) -> SubjectToken {
        SubjectToken(token.into())
    }

    /// The token itself, for the one request that sends it (the token exchange).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(..)")
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        (&self.id, &self.groups, &self.scopes) == (&other.id, &other.groups, &other.scopes)
    }
}

impl Eq for Principal {}

impl std::hash::Hash for Principal {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&self.id, &self.groups, &self.scopes).hash(h);
    }
}

/// Why a request is not authenticated or not authorized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential was sent.
    #[error("authentication required: send Authorization: Bearer <token or API key>")]
    Missing,
    /// The credential is not valid (unknown key, bad signature, wrong audience or issuer, expired).
    #[error("invalid credential: {0}")]
    Invalid(&'static str),
    /// A required scope is missing.
    #[error("insufficient scope: this request needs {0}")]
    InsufficientScope(String),
}

/// Checks credentials against the configured API keys and JWT settings.
pub struct Authenticator {
    cfg: AuthConfig,
    keys: api_keys::ApiKeys,
    jwt: Option<jwt::JwtVerifier>,
    /// Sluice's own access tokens (`[auth.login]`), once [`Authenticator::accept_issued`].
    issued: Option<std::sync::Arc<issued::Issued>>,
}

impl Authenticator {
    /// Builds the authenticator (reads key files and environment variables).
    pub fn new(cfg: &AuthConfig) -> Result<Authenticator, String> {
        let keys = api_keys::ApiKeys::load(cfg)?;
        let jwt = cfg
            .jwt
            .as_ref()
            .map(|j| jwt::JwtVerifier::new(j, &cfg.resource))
            .transpose()?;
        Ok(Authenticator {
            cfg: cfg.clone(),
            keys,
            jwt,
            issued: None,
        })
    }

    /// Takes Sluice's own access tokens (`[auth.login]`) signed under `keys`
    /// (`Keys::derived(issued::DOMAIN)`); gives the signer the login front issues them with.
    /// `None` without `[auth.login]`.
    pub fn accept_issued(
        &mut self,
        keys: Vec<(u8, [u8; 32])>,
    ) -> Option<std::sync::Arc<issued::Issued>> {
        let login = self.cfg.login.as_ref()?;
        let i = std::sync::Arc::new(issued::Issued::new(keys, &login.issuer, &self.cfg.resource));
        self.issued = Some(i.clone());
        Some(i)
    }

    /// Verifies `token` as a JWT of `[auth.jwt]` only (never an API key or Sluice's own
    /// token): the admin plane's `jwt_role` check. `None` without `[auth.jwt]`.
    pub fn verify_idp_jwt(&self, token: &str) -> Option<Result<Principal, AuthError>> {
        self.jwt.as_ref().map(|j| j.verify(token))
    }

    /// Whether an MCP API key (config or `api_keys_env`) hashes to `sha256` (hex).
    pub fn holds_key_hash(&self, sha256: &str) -> bool {
        self.keys.holds_hash(sha256)
    }

    /// Whether any credential is required.
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty() || self.jwt.is_some() || self.cfg.login.is_some()
    }

    /// Whether JWTs are accepted, the IdP's or Sluice's own (then any subject may be a principal).
    pub fn jwt(&self) -> bool {
        self.jwt.is_some() || self.cfg.login.is_some()
    }

    /// The principals API keys name, config and environment alike (for `sluice check`).
    pub fn key_principals(&self) -> impl Iterator<Item = &Principal> {
        self.keys.principals()
    }

    /// The global `required_scopes` `p` lacks (every request of it is refused without them).
    pub fn missing_scopes<'a>(&'a self, p: &'a Principal) -> impl Iterator<Item = &'a str> + 'a {
        let on = self.enabled();
        self.cfg
            .required_scopes
            .iter()
            .filter(move |s| on && !p.scopes.contains(*s))
            .map(String::as_str)
    }

    /// The `WWW-Authenticate` value for a refusal: it names the RFC 9728 metadata only when
    /// [`Authenticator::advertises_oauth`].
    pub fn challenge(&self, err: &AuthError) -> String {
        let tail = match self.advertises_oauth() {
            true => format!("resource_metadata=\"{}\"", self.metadata_url()),
            false => "realm=\"sluice\"".to_owned(),
        };
        match err {
            AuthError::Missing => format!("Bearer {tail}"),
            AuthError::Invalid(_) => format!("Bearer error=\"invalid_token\", {tail}"),
            AuthError::InsufficientScope(s) => {
                format!("Bearer error=\"insufficient_scope\", scope=\"{s}\", {tail}")
            }
        }
    }

    /// Whether Sluice points clients at an OAuth authorization server: only when
    /// `auth.authorization_servers` names one (`[auth.login]` names Sluice itself there). Without it the resource metadata is not served
    /// (404) and challenges carry no `resource_metadata`, so an OAuth-aware client (mcp-remote,
    /// the Inspector) does not try to register or sign in where nothing can sign it in.
    pub fn advertises_oauth(&self) -> bool {
        !self.cfg.authorization_servers.is_empty()
    }

    /// The URL of this resource's RFC 9728 metadata (path-suffixed form).
    pub fn metadata_url(&self) -> String {
        metadata_url(&self.cfg.resource)
    }

    /// The RFC 9728 protected-resource metadata document.
    pub fn metadata(&self) -> serde_json::Value {
        let mut scopes: BTreeSet<&String> = self.cfg.required_scopes.iter().collect();
        scopes.extend(self.cfg.upstream_scopes.iter().flat_map(|(_, s)| s));
        serde_json::json!({
            "resource": self.cfg.resource,
            "authorization_servers": self.cfg.authorization_servers,
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    /// Authenticates a request and checks the global required scopes.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        if !self.enabled() {
            return Ok(Principal::local());
        }
        let token = bearer(headers).ok_or(AuthError::Missing)?;
        let principal = match self.keys.find(token) {
            Some(p) => p,
            None => match (&self.issued, &self.jwt) {
                (Some(i), _) if issued::Issued::claims_kid(token) => i.verify(token)?,
                (_, Some(j)) => j.verify(token)?,
                (Some(_), None) => {
                    return Err(AuthError::Invalid(
                        "not a token of this gateway: sign in again",
                    ))
                }
                (None, None) => return Err(AuthError::Invalid("unknown API key")),
            },
        };
        require(&principal, &self.cfg.required_scopes)?;
        Ok(principal)
    }

    /// Whether `p` may reach `upstream` at all (its `required_scopes`): lists, discovery and
    /// listen streams show a principal only the upstreams it may call.
    pub fn may_reach(&self, p: &Principal, upstream: &str) -> bool {
        self.authorize_upstream(p, upstream).is_ok()
    }

    /// Whether any upstream requires scopes (then what a principal sees depends on who it is,
    /// and nothing listed is `cacheScope: public`).
    pub fn scoped(&self) -> bool {
        self.enabled() && !self.cfg.upstream_scopes.is_empty()
    }

    /// Checks the scopes an upstream requires.
    pub fn authorize_upstream(&self, p: &Principal, upstream: &str) -> Result<(), AuthError> {
        if !self.enabled() {
            return Ok(());
        }
        match self.cfg.upstream_scopes.iter().find(|(u, _)| u == upstream) {
            Some((_, scopes)) => require(p, scopes),
            None => Ok(()),
        }
    }
}

fn require(p: &Principal, scopes: &[String]) -> Result<(), AuthError> {
    let missing: Vec<&str> = scopes
        .iter()
        .filter(|s| !p.scopes.contains(*s))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(AuthError::InsufficientScope(scopes.join(" ")))
    }
}

/// The token of `Authorization: Bearer …` (or `X-API-Key`).
fn bearer(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, token) = v.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then_some(token.trim())
            .filter(|t| !t.is_empty());
    }
    h.get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// `scheme://host/.well-known/oauth-protected-resource/path` for a resource URL.
pub fn metadata_url(resource: &str) -> String {
    let (origin, path) = match resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(k) => (&resource[..k], &resource[k..]),
        None => (resource, ""),
    };
    format!(
        "{origin}/.well-known/oauth-protected-resource{}",
        path.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_url_is_path_suffixed() {
        assert_eq!(
            metadata_url("https://gw.example.com/mcp"),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }
}
