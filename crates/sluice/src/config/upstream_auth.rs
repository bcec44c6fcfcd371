//! `[upstream.auth]`: how Sluice proves who it is to one upstream (issue 31).
//!
//! Takes the table as written; gives an [`UpstreamAuth`] with its secret read from the
//! environment at load. Refuses a mode beside `headers.Authorization` or `bearer_token_env`
//! (two credentials for one server), a stdio upstream (its credentials are in `env`), an unset or
//! empty secret variable, an empty `client_id`, and a scope with a space in it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[upstream.auth]` as written.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// `static` (default: `headers` and `bearer_token_env`, the same for every caller) or
    /// `client_credentials` (Sluice's own machine identity, from the upstream's authorization
    /// server: OAuth 2.1 client credentials grant, found through the upstream's protected
    /// resource metadata, RFC 9728).
    #[serde(default)]
    pub(super) mode: AuthMode,
    /// `client_credentials`: the client id registered at the authorization server.
    pub(super) client_id: Option<String>,
    /// `client_credentials`: the environment variable holding the client secret.
    pub(super) client_secret_env: Option<String>,
    /// `client_credentials`: how the secret is sent to the token endpoint,
    /// `client_secret_basic` (default) or `client_secret_post`.
    #[serde(default)]
    pub(super) token_endpoint_auth: TokenEndpointAuth,
    /// Scopes asked for (default: the resource metadata's `scopes_supported`, else none).
    pub(super) scopes: Option<Vec<String>>,
    /// The authorization server allowed to receive the secret (its `issuer`, exactly). Without
    /// it, the one the upstream's metadata names, its token endpoint on that issuer's origin.
    pub(super) issuer: Option<String>,
}

/// How Sluice authenticates to an upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// The configured `headers` and `bearer_token_env`.
    #[default]
    Static,
    /// A client credentials grant at the upstream's authorization server.
    ClientCredentials,
}

/// How a client secret is presented to a token endpoint (RFC 6749 §2.3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenEndpointAuth {
    /// HTTP Basic with the form-encoded id and secret.
    #[default]
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
}

/// A checked `[upstream.auth]` of mode `client_credentials`.
#[derive(Clone, PartialEq, Serialize)]
pub struct UpstreamAuth {
    /// The client id.
    pub client_id: String,
    /// The variable the secret was read from (shown by `sluice check`; the secret never is).
    pub client_secret_env: String,
    /// The secret, read at load.
    #[serde(skip)]
    pub client_secret: String,
    /// How the secret is presented.
    pub token_endpoint_auth: TokenEndpointAuth,
    /// Configured scopes, if any.
    pub scopes: Option<Vec<String>>,
    /// The authorization server allowed, if configured.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for UpstreamAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamAuth")
            .field("client_id", &self.client_id)
            .field("client_secret_env", &self.client_secret_env)
            .field("token_endpoint_auth", &self.token_endpoint_auth)
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// Checks `raw` for upstream `name` (`at`: where it stands); `static_credentials`: whether the
/// upstream also sets `Authorization` or `bearer_token_env`; `stdio`: whether it is one; `urls`:
/// its URLs (one origin, no credentials in them: the token is for that one resource).
pub(super) fn check(
    raw: Option<RawAuth>,
    name: &str,
    at: &str,
    static_credentials: bool,
    stdio: bool,
    urls: &[String],
) -> Result<Option<UpstreamAuth>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let err = |what: String| Err(ConfigError(format!("{at}: upstream {name:?} auth: {what}")));
    if raw.mode == AuthMode::Static {
        let any = raw.client_id.is_some() || raw.client_secret_env.is_some();
        if any || raw.scopes.is_some() || raw.issuer.is_some() {
            return err("client_id, client_secret_env, scopes and issuer are for mode = \"client_credentials\"; set the mode or remove them".into());
        }
        return Ok(None);
    }
    if stdio {
        return err("a stdio upstream takes its credentials in env = {...}, not auth".into());
    }
    if static_credentials {
        return err("mode = \"client_credentials\" obtains the Authorization header itself; remove headers.Authorization and bearer_token_env".into());
    }
    let origins: std::collections::BTreeSet<String> = urls
        .iter()
        .filter_map(|u| u.parse::<http::Uri>().ok())
        .map(|u| {
            format!(
                "{}://{}",
                u.scheme_str().unwrap_or(""),
                u.authority().map_or("", |a| a.as_str())
            )
            .to_ascii_lowercase()
        })
        .collect();
    if origins.iter().any(|o| o.contains('@')) {
        return err("credentials in the url go to the authorization server as part of the resource; put them in headers or remove them".into());
    }
    if origins.len() > 1 {
        return err("its urls are on several origins, and a token is for one resource: give it urls on one scheme, host and port, or one upstream per origin".into());
    }
    let client_id = match raw.client_id {
        Some(id) if !id.trim().is_empty() => id,
        _ => return err("client_id is required for mode = \"client_credentials\"".into()),
    };
    let Some(var) = raw.client_secret_env else {
        return err("client_secret_env is required for mode = \"client_credentials\": the variable holding the client secret".into());
    };
    let shown = crate::escape::shown_var(&var);
    let secret = match std::env::var(&var) {
        Ok(s) if !s.trim().is_empty() => s,
        Ok(_) => {
            return err(format!(
                "environment variable {shown} (client_secret_env) is empty"
            ))
        }
        Err(_) => {
            return err(format!(
                "environment variable {shown} (client_secret_env) is not set"
            ))
        }
    };
    if let Some(bad) = raw
        .scopes
        .iter()
        .flatten()
        .find(|s| s.is_empty() || s.contains(' '))
    {
        return err(format!(
            "scope {bad:?} is not one scope: scopes are listed one per string"
        ));
    }
    Ok(Some(UpstreamAuth {
        client_id,
        client_secret_env: var,
        client_secret: secret,
        token_endpoint_auth: raw.token_endpoint_auth,
        scopes: raw.scopes,
        issuer: raw.issuer,
    }))
}
