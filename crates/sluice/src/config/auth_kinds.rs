//! The kinds an `[upstream.auth]` is made of: its mode, how a client authenticates to a
//! token endpoint, a client assertion's algorithm, and the proof (secret or key) read at load.
//!
//! Takes nothing (types only); gives them to `upstream_auth` (the mode's checks) and
//! `upstream_oauth` (the `oauth` mode's). Refuses nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How Sluice authenticates to an upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// The configured `headers` and `bearer_token_env`.
    #[default]
    Static,
    /// A client credentials grant at the upstream's authorization server.
    ClientCredentials,
    /// Each principal's own token, from the authorization code grant after their consent.
    Oauth,
    /// Each principal's own token, exchanged for the JWT they authenticated with at the company's
    /// identity provider (RFC 8693 token exchange).
    TokenExchange,
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
    /// A public client: its `client_id` in the form, no secret (`oauth` only).
    None,
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
    /// No secret: a public client, or an `oauth` client that registers itself.
    None,
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
            (Proof::None, Proof::None) => true,
            _ => false,
        }
    }
}

impl Serialize for Proof {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            Proof::None => {}
            Proof::Secret { env, .. } => m.serialize_entry("client_secret_env", env)?,
            Proof::Key { file, alg, .. } => {
                m.serialize_entry("private_key_file", file)?;
                m.serialize_entry("signing_alg", alg)?;
            }
        }
        m.end()
    }
}
