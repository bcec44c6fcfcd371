//! `[upstream.auth]`: how Sluice proves who it is to one upstream (issue 31).
//!
//! Takes the table as written; gives an [`UpstreamAuth`] with its secret read from the
//! environment at load. Refuses a mode beside `headers.Authorization` or `bearer_token_env`
//! (two credentials for one server), a stdio upstream (its credentials are in `env`), an unset or
//! empty secret variable, a `private_key_jwt` key file that cannot be read or is not a key of its
//! `signing_alg` (never printed), an empty `client_id`, and a scope with a space in it.

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
    /// `client_credentials`: how the client proves itself to the token endpoint,
    /// `client_secret_basic` (default), `client_secret_post` or `private_key_jwt`.
    #[serde(default)]
    pub(super) token_endpoint_auth: TokenEndpointAuth,
    /// `private_key_jwt`: the PEM file (PKCS#8) of the key that signs the client assertion.
    pub(super) private_key_file: Option<String>,
    /// `private_key_jwt`: the assertion's algorithm, `ES256` (default) or `RS256`.
    #[serde(default)]
    pub(super) signing_alg: SigningAlg,
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
    /// A JWT signed with the client's private key (RFC 7523 §2.2), no secret.
    PrivateKeyJwt,
}

/// The algorithm of a `private_key_jwt` assertion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum SigningAlg {
    /// ECDSA P-256 with SHA-256.
    #[default]
    ES256,
    /// RSA PKCS#1 v1.5 with SHA-256.
    RS256,
}

/// What proves the client to the token endpoint, read at load.
#[derive(Clone)]
pub enum Proof {
    /// A client secret, from the variable `env`.
    Secret {
        /// The variable's name.
        env: String,
        /// The secret.
        value: String,
    },
    /// A private key, from the PEM file `file`.
    Key {
        /// The file's path.
        file: String,
        /// The key, parsed.
        key: std::sync::Arc<jsonwebtoken::EncodingKey>,
        /// The file's bytes (a reload that changes them makes a new upstream).
        pem: Vec<u8>,
        /// Its algorithm.
        alg: SigningAlg,
    },
}

impl PartialEq for Proof {
    fn eq(&self, other: &Proof) -> bool {
        match (self, other) {
            (Proof::Secret { env, value }, Proof::Secret { env: e, value: v }) => {
                env == e && value == v
            }
            (
                Proof::Key { file, pem, alg, .. },
                Proof::Key {
                    file: f,
                    pem: p,
                    alg: a,
                    ..
                },
            ) => file == f && pem == p && alg == a,
            _ => false,
        }
    }
}

impl Serialize for Proof {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        match self {
            Proof::Secret { env, .. } => m.serialize_entry("client_secret_env", env)?,
            Proof::Key { file, alg, .. } => {
                m.serialize_entry("private_key_file", file)?;
                m.serialize_entry("signing_alg", alg)?;
            }
        }
        m.end()
    }
}

/// A checked `[upstream.auth]` of mode `client_credentials`.
#[derive(Clone, PartialEq, Serialize)]
pub struct UpstreamAuth {
    /// The client id.
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
}

impl UpstreamAuth {
    /// The client secret, when it proves itself with one.
    pub fn secret(&self) -> Option<&str> {
        match &self.proof {
            Proof::Secret { value, .. } => Some(value),
            Proof::Key { .. } => None,
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
                },
            )
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
    let err_text = |what: String| ConfigError(format!("{at}: upstream {name:?} auth: {what}"));
    let err = |what: String| Err(err_text(what));
    if raw.mode == AuthMode::Static {
        let any = raw.client_id.is_some()
            || raw.client_secret_env.is_some()
            || raw.private_key_file.is_some();
        if any || raw.scopes.is_some() || raw.issuer.is_some() {
            return err("client_id, client_secret_env, private_key_file, scopes and issuer are for mode = \"client_credentials\"; set the mode or remove them".into());
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
    let client_id = match raw.client_id.clone() {
        Some(id) if !id.trim().is_empty() => id,
        _ => return err("client_id is required for mode = \"client_credentials\"".into()),
    };
    let proof = proof(&raw, &err_text)?;
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
        proof,
        token_endpoint_auth: raw.token_endpoint_auth,
        scopes: raw.scopes,
        issuer: raw.issuer,
    }))
}

/// The secret or the key `raw` names, read and checked.
fn proof(raw: &RawAuth, err: &dyn Fn(String) -> ConfigError) -> Result<Proof, ConfigError> {
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
        return Err(err("client_secret_env is required for mode = \"client_credentials\": the variable holding the client secret".into()));
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
