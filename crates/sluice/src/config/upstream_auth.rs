//! `[upstream.auth]`: how Sluice proves who it is to one upstream (issue 31).
//!
//! Takes the table as written; gives an [`UpstreamAuth`] with its secret read from the
//! environment at load. Refuses a mode beside `headers.Authorization` or `bearer_token_env`
//! (two credentials for one server), a stdio upstream (its credentials are in `env`), an unset or
//! empty secret variable, a `private_key_jwt` key file that cannot be read or is not a key of its
//! `signing_alg` (never printed), an empty `client_id`, and a scope with a space in it;
//! `token_exchange` without `issuer` or with an `audience` or `resource` that is empty (or a
//! `resource` that is not an absolute URL without a fragment), and those two keys in other modes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::auth_kinds::{AuthMode, Proof, SigningAlg, TokenEndpointAuth};
use super::ConfigError;

/// `[upstream.auth]` as written.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// `static` (default: `headers` and `bearer_token_env`, the same for every caller),
    /// `client_credentials` (Sluice's own machine identity, from the upstream's authorization
    /// server: OAuth 2.1 client credentials grant, found through the upstream's protected
    /// resource metadata, RFC 9728), `oauth` (each user's own token after they sign in once) or
    /// `token_exchange` (each user's own token, exchanged at the company's identity provider
    /// for the JWT they called Sluice with: RFC 8693; needs `[auth.jwt]`).
    #[serde(default)]
    pub(super) mode: AuthMode,
    /// `client_credentials`, `token_exchange`: the client id registered at the authorization
    /// server (`token_exchange`: Sluice's client at the company's identity provider).
    pub(super) client_id: Option<String>,
    /// `client_credentials`, `token_exchange`: the environment variable holding the client secret.
    pub(super) client_secret_env: Option<String>,
    /// `client_credentials`, `token_exchange`: how the client proves itself to the token endpoint,
    /// `client_secret_basic` (default), `client_secret_post` or `private_key_jwt`.
    #[serde(default)]
    pub(super) token_endpoint_auth: TokenEndpointAuth,
    /// `private_key_jwt`: the PEM file (PKCS#8) of the key that signs the client assertion.
    pub(super) private_key_file: Option<String>,
    /// `private_key_jwt`: the assertion's algorithm, `ES256` (default) or `RS256`.
    #[serde(default)]
    pub(super) signing_alg: SigningAlg,
    /// `oauth`: the URL of the Client ID Metadata Document that names Sluice (an `https` URL
    /// where Sluice's `/oauth/client-metadata.json` is reached); used as the client id by an
    /// authorization server that says `client_id_metadata_document_supported`.
    pub(super) client_metadata_url: Option<String>,
    /// `oauth`: where users' browsers come back to Sluice after consent (its path is
    /// `/oauth/callback`; default: `http://` and the address Sluice listens on).
    pub(super) redirect_uri: Option<String>,
    /// Scopes asked for (default: the resource metadata's `scopes_supported`, else none).
    pub(super) scopes: Option<Vec<String>>,
    /// The authorization server allowed to receive the secret (its `issuer`, exactly). Without
    /// it, the one the upstream's metadata names, its token endpoint on that issuer's origin.
    /// `token_exchange`: required, the company identity provider's issuer (its token endpoint is
    /// found from its RFC 8414 or OpenID Connect metadata).
    pub(super) issuer: Option<String>,
    /// `token_exchange`: the `audience` asked for (RFC 8693 §2.1: the upstream's name at the
    /// identity provider); default none.
    pub(super) audience: Option<String>,
    /// `token_exchange`: the `resource` asked for (RFC 8707: the upstream's URL as the identity
    /// provider knows it); default: the upstream's `url` when `audience` is not set, else none.
    pub(super) resource: Option<String>,
}

/// A checked `[upstream.auth]` of mode `client_credentials` or `oauth`.
#[derive(Clone, PartialEq, Serialize)]
pub struct UpstreamAuth {
    /// Its mode (never `static`).
    pub mode: AuthMode,
    /// The client id (`oauth`: empty when Sluice registers itself).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// The secret or key (`sluice check` shows the variable or the file, never the value).
    #[serde(flatten)]
    pub proof: Proof,
    /// How it is presented.
    pub token_endpoint_auth: TokenEndpointAuth,
    /// Configured scopes, if any.
    pub scopes: Option<Vec<String>>,
    /// The authorization server allowed, if configured.
    pub issuer: Option<String>,
    /// `oauth`: the URL of Sluice's Client ID Metadata Document, if configured.
    pub client_metadata_url: Option<String>,
    /// `oauth`: the configured redirect URI, if any.
    pub redirect_uri: Option<String>,
    /// `token_exchange`: the audience and the resource asked for.
    #[serde(flatten)]
    pub target: Target,
}

/// What a `token_exchange` upstream's token is asked for (RFC 8693 §2.1).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Target {
    /// The `audience`, if configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The `resource`, if configured (the upstream's URL is sent when neither is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

impl UpstreamAuth {
    /// The client secret, when it proves itself with one.
    pub fn secret(&self) -> Option<&str> {
        match &self.proof {
            Proof::Secret { value, .. } => Some(value),
            Proof::Key { .. } | Proof::None => None,
        }
    }
}

impl std::fmt::Debug for UpstreamAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamAuth")
            .field("client_id", &self.client_id)
            .field(
                "proof",
                &match &self.proof {
                    Proof::Secret { env, .. } => format!("client_secret_env = {env}"),
                    Proof::Key { file, .. } => format!("private_key_file = {file}"),
                    Proof::None => "none".into(),
                },
            )
            .field("token_endpoint_auth", &self.token_endpoint_auth)
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .field("target", &self.target)
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
    let err_text = |what: String| ConfigError(format!("{at}: upstream {name:?} auth: {what}"));
    let err = |what: String| Err(err_text(what));
    if raw.mode == AuthMode::Static {
        let any = raw.client_id.is_some()
            || raw.client_secret_env.is_some()
            || raw.private_key_file.is_some()
            || raw.client_metadata_url.is_some()
            || raw.redirect_uri.is_some();
        if any || raw.scopes.is_some() || raw.issuer.is_some() || target_set(&raw) {
            return err("client_id, client_secret_env, private_key_file, client_metadata_url, redirect_uri, scopes, issuer, audience and resource are for mode = \"client_credentials\", \"oauth\" or \"token_exchange\"; set the mode or remove them".into());
        }
        return Ok(None);
    }
    if stdio {
        return err("a stdio upstream takes its credentials in env = {...}, not auth".into());
    }
    if static_credentials {
        return err("mode = \"client_credentials\", \"oauth\" or \"token_exchange\" obtains the Authorization header itself; remove headers.Authorization and bearer_token_env".into());
    }
    one_origin(urls).map_err(err_text)?;
    let target = target(&raw, &err_text)?;
    let (client_id, proof) = if raw.mode == AuthMode::Oauth {
        let fields = super::upstream_oauth::Fields {
            client_id: raw.client_id.as_deref(),
            secret_env: raw.client_secret_env.is_some(),
            method: raw.token_endpoint_auth,
            key_file: raw.private_key_file.is_some(),
            metadata_url: raw.client_metadata_url.as_deref(),
            redirect_uri: raw.redirect_uri.as_deref(),
        };
        match super::upstream_oauth::client(&fields, &err_text)? {
            (id, true) => (id, proof(&raw, &err_text)?),
            (id, false) => (id, Proof::None),
        }
    } else {
        if raw.client_metadata_url.is_some() || raw.redirect_uri.is_some() {
            return err("client_metadata_url and redirect_uri are for mode = \"oauth\"".into());
        }
        machine_client(&raw, &err_text)?
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
        mode: raw.mode,
        client_id,
        proof,
        token_endpoint_auth: raw.token_endpoint_auth,
        scopes: raw.scopes,
        issuer: raw.issuer,
        client_metadata_url: raw.client_metadata_url,
        redirect_uri: raw.redirect_uri,
        target,
    }))
}

/// The client of `client_credentials` and `token_exchange`: a `client_id` with a secret or a
/// key (no public client: Sluice itself asks for the token).
fn machine_client(
    raw: &RawAuth,
    err: &dyn Fn(String) -> ConfigError,
) -> Result<(String, Proof), ConfigError> {
    let mode = match raw.mode {
        AuthMode::TokenExchange => "token_exchange",
        _ => "client_credentials",
    };
    if raw.token_endpoint_auth == TokenEndpointAuth::None {
        return Err(err(format!("token_endpoint_auth = \"none\" is for mode = \"oauth\": mode = \"{mode}\" needs a secret or a key")));
    }
    match raw.client_id.clone() {
        Some(id) if !id.trim().is_empty() => Ok((id, proof(raw, err)?)),
        _ => Err(err(format!("client_id is required for mode = \"{mode}\""))),
    }
}

fn target_set(raw: &RawAuth) -> bool {
    raw.audience.is_some() || raw.resource.is_some()
}

/// A `token_exchange` table's `issuer` (required) and `audience` and `resource` (for that mode
/// only, each non-empty; the resource an absolute URL without a fragment, RFC 8707 §2).
fn target(raw: &RawAuth, err: &dyn Fn(String) -> ConfigError) -> Result<Target, ConfigError> {
    if raw.mode != AuthMode::TokenExchange {
        if target_set(raw) {
            return Err(err(
                "audience and resource are for mode = \"token_exchange\"; remove them".into(),
            ));
        }
        return Ok(Target::default());
    }
    if raw.issuer.as_deref().is_none_or(|i| i.trim().is_empty()) {
        return Err(err("mode = \"token_exchange\" needs issuer: the company identity provider's issuer, exactly as its metadata says (the one that signs the JWTs of [auth.jwt] and exchanges them)".into()));
    }
    if raw.audience.as_deref().is_some_and(|a| a.trim().is_empty()) {
        return Err(err("audience is empty: name the upstream as the identity provider knows it, or remove the key".into()));
    }
    if let Some(r) = raw.resource.as_deref() {
        let ok = r
            .parse::<http::Uri>()
            .ok()
            .is_some_and(|u| u.scheme().is_some() && u.authority().is_some() && !r.contains('#'));
        if !ok {
            return Err(err(format!(
                "resource {:?} is not an absolute URL without a fragment (RFC 8707)",
                crate::escape::shown(r, 120)
            )));
        }
    }
    Ok(Target {
        audience: raw.audience.clone(),
        resource: raw.resource.clone(),
    })
}

/// Refused: `urls` on several origins (a token is for one resource), or with credentials in
/// them (they would go to the authorization server as part of the resource).
fn one_origin(urls: &[String]) -> Result<(), String> {
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
        return Err("credentials in the url go to the authorization server as part of the resource; put them in headers or remove them".into());
    }
    if origins.len() > 1 {
        return Err("its urls are on several origins, and a token is for one resource: give it urls on one scheme, host and port, or one upstream per origin".into());
    }
    Ok(())
}

/// The secret or the key `raw` names, read and checked.
pub(super) fn proof(
    raw: &RawAuth,
    err: &dyn Fn(String) -> ConfigError,
) -> Result<Proof, ConfigError> {
    if raw.token_endpoint_auth == TokenEndpointAuth::PrivateKeyJwt {
        if raw.client_secret_env.is_some() {
            return Err(err(
                "private_key_jwt signs with a key and sends no secret: remove client_secret_env"
                    .into(),
            ));
        }
        let Some(file) = raw.private_key_file.clone() else {
            return Err(err("private_key_file is required for token_endpoint_auth = \"private_key_jwt\": the PEM file of the signing key".into()));
        };
        let pem = std::fs::read(&file)
            .map_err(|e| err(format!("private_key_file {file:?} cannot be read: {e}")))?;
        let key = match raw.signing_alg {
            SigningAlg::ES256 => jsonwebtoken::EncodingKey::from_ec_pem(&pem),
            SigningAlg::RS256 => jsonwebtoken::EncodingKey::from_rsa_pem(&pem),
        }
        .map_err(|_| {
            err(format!(
                "private_key_file {file:?} is not a PEM key for {:?}",
                raw.signing_alg
            ))
        })?;
        let key = std::sync::Arc::new(key);
        return Ok(Proof::Key {
            file,
            key,
            pem,
            alg: raw.signing_alg,
        });
    }
    if raw.private_key_file.is_some() {
        return Err(err("private_key_file is for token_endpoint_auth = \"private_key_jwt\"; set it or remove the file".into()));
    }
    let Some(var) = raw.client_secret_env.clone() else {
        return Err(err("client_secret_env is required for mode = \"client_credentials\" or \"token_exchange\": the variable holding the client secret (or token_endpoint_auth = \"private_key_jwt\" with private_key_file)".into()));
    };
    let shown = crate::escape::shown_var(&var);
    match std::env::var(&var) {
        Ok(s) if !s.trim().is_empty() => Ok(Proof::Secret { env: var, value: s }),
        Ok(_) => Err(err(format!(
            "environment variable {shown} (client_secret_env) is empty"
        ))),
        Err(_) => Err(err(format!(
            "environment variable {shown} (client_secret_env) is not set"
        ))),
    }
}

/// Across sections: a `token_exchange` upstream exchanges the JWT its caller authenticated with,
/// so `[auth.jwt]` must be configured (`jwt`: whether it is).
pub(super) fn needs_jwt(upstreams: &[super::UpstreamConfig], jwt: bool) -> Result<(), String> {
    let exchanging = upstreams.iter().find(|u| {
        u.auth
            .as_ref()
            .is_some_and(|a| a.mode == AuthMode::TokenExchange)
    });
    match exchanging {
        Some(u) if !jwt => Err(format!(
            "upstream {:?} has [upstream.auth] mode = \"token_exchange\", which exchanges the JWT each caller signed in with at the company's identity provider, but [auth.jwt] is not configured: configure [auth.jwt] with that identity provider's issuer and keys (API keys alone give no token to exchange)",
            u.name
        )),
        _ => Ok(()),
    }
}
