//! Sluice's own access tokens (`[auth.login]`): HS256 JWTs under keys derived from the
//! `[state]` key ring, so every replica sharing the ring signs and verifies them alike and a
//! key rotation of the ring rotates them.
//!
//! Takes the derived keys ([`DOMAIN`]), Sluice's issuer and resource URL; gives a signer
//! ([`Issued::sign`], used by `login/`) and a verifier that makes a [`Principal`] of a token
//! (`sub`, `groups`, `scope`). Refuses a token with a `kid` the ring does not hold, a bad
//! signature, another issuer or audience, an expired one, and a principal that is empty or
//! Sluice's internal one.

use jsonwebtoken::{decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use super::{AuthError, Principal};

/// The longest client id an audit record carries (characters).
const MAX_CLIENT_NOTED: usize = 512;

/// The domain the token keys are derived under (`Keys::derived`).
pub const DOMAIN: &[u8] = b"sluice/auth.login/access-token/v1";
/// The prefix of the `kid` of Sluice's tokens (the ring key's id follows).
pub const KID_PREFIX: &str = "sluice-login-";

/// The claims of a Sluice access token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// Sluice's issuer.
    pub iss: String,
    /// Sluice's resource URL.
    pub aud: String,
    /// The principal.
    pub sub: String,
    /// Its groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Granted scopes, space-separated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// The client it was issued to.
    pub client_id: String,
    /// Issued at (seconds).
    pub iat: u64,
    /// Issued at (ms): an operator's revocation refuses tokens issued up to its millisecond
    /// (absent: the end of `iat`'s second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat_ms: Option<u64>,
    /// Expires at (seconds).
    pub exp: u64,
}

/// Signs and verifies Sluice's access tokens.
pub struct Issued {
    /// `(ring key id, derived key)`, the signing key first.
    keys: Vec<(u8, [u8; 32])>,
    issuer: String,
    resource: String,
    /// Operators' revocations (the runtime's, kept across reloads), once set.
    revoked: std::sync::OnceLock<std::sync::Arc<super::revoked::Revoked>>,
}

impl Issued {
    /// For `keys` (`Keys::derived(DOMAIN)`; the first signs), `issuer` and `resource`.
    pub fn new(keys: Vec<(u8, [u8; 32])>, issuer: &str, resource: &str) -> Issued {
        Issued {
            keys,
            issuer: issuer.to_owned(),
            resource: resource.to_owned(),
            revoked: std::sync::OnceLock::new(),
        }
    }

    /// Sluice's issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Sluice's resource URL (the tokens' audience).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether `token` names one of Sluice's keys (then only this verifier may take it).
    pub fn claims_kid(token: &str) -> bool {
        decode_header(token)
            .ok()
            .and_then(|h| h.kid)
            .is_some_and(|k| k.starts_with(KID_PREFIX))
    }

    /// A signed token of `claims` (its `iss` and `aud` set here).
    pub fn sign(&self, mut claims: Claims) -> Result<String, String> {
        let (id, key) = self
            .keys
            .first()
            .ok_or("no state key to sign access tokens with")?;
        claims.iss = self.issuer.clone();
        claims.aud = self.resource.clone();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(format!("{KID_PREFIX}{id}"));
        let key = EncodingKey::from_secret(key).map_err(|e| format!("bad token key: {e}"))?;
        encode(&header, &claims, &key).map_err(|e| format!("cannot sign an access token: {e}"))
    }

    /// A value derived from `input` under the signing key and `label` (HMAC-SHA256,
    /// base64url): what a replica sharing the keys derives alike and nobody else can (the login
    /// front's PKCE verifier and nonce toward the IdP, from a sign-in's id).
    pub fn derive(&self, label: &str, input: &str) -> String {
        use base64::Engine as _;
        use hmac::Mac as _;
        let key = self.keys.first().map(|k| k.1).unwrap_or_default();
        let Ok(mut m) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
            return String::new();
        };
        m.update(label.as_bytes());
        m.update(&[0]);
        m.update(input.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(m.finalize().into_bytes())
    }

    /// Refuses the tokens `revoked` names from now on (set once, by the gateway).
    pub fn use_revocations(&self, revoked: &std::sync::Arc<super::revoked::Revoked>) {
        let _ = self.revoked.set(revoked.clone());
    }

    /// The principal of a valid token.
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let header = decode_header(token).map_err(|_| AuthError::Invalid("not a JWT"))?;
        let id: Option<u8> = header
            .kid
            .as_deref()
            .and_then(|k| k.strip_prefix(KID_PREFIX))
            .and_then(|k| k.parse().ok());
        let key = id
            .and_then(|id| self.keys.iter().find(|(k, _)| *k == id))
            .ok_or(AuthError::Invalid(
                "the token was signed with a key this gateway no longer holds: sign in again",
            ))?;
        let mut v = jsonwebtoken::Validation::new(Algorithm::HS256);
        v.leeway = 5;
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.resource]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let key = DecodingKey::from_secret(&key.1)
            .map_err(|_| AuthError::Invalid("the token key is unusable"))?;
        let data = decode::<Claims>(token, &key, &v)
            .map_err(|e| AuthError::Invalid(super::jwt::reason(&e)))?;
        let c = data.claims;
        let issued_ms = c
            .iat_ms
            .unwrap_or(c.iat.saturating_mul(1000).saturating_add(999));
        if self
            .revoked
            .get()
            .is_some_and(|r| r.refuses(&c.sub, issued_ms))
        {
            return Err(AuthError::Invalid(
                "an operator ended this sign-in: sign in again",
            ));
        }
        if c.sub.is_empty() || c.sub == super::INTERNAL_PRINCIPAL {
            return Err(AuthError::Invalid(
                "the principal claim names no usable principal",
            ));
        }
        // Which client the principal signed in with, for the audit record (an id Sluice issued
        // or a metadata document URL it fetched: bounded, never a secret).
        let client: String = c.client_id.chars().take(MAX_CLIENT_NOTED).collect();
        crate::audit::note(|r| r.client = Some(client));
        Ok(Principal {
            id: c.sub,
            groups: c.groups,
            scopes: c.scope.split_whitespace().map(str::to_owned).collect(),
            subject: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(sub: &str, exp: u64) -> Claims {
        Claims {
            iss: String::new(),
            aud: String::new(),
            sub: sub.into(),
            groups: vec!["eng".into()],
            scope: "mcp".into(),
            client_id: "c".into(),
            iat: 0,
            iat_ms: None,
            exp,
        }
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    #[test]
    fn a_signed_token_verifies_and_others_do_not() {
        let i = Issued::new(vec![(1, [7; 32])], "https://gw", "https://gw/mcp");
        let t = i.sign(claims("alice", now() + 60)).unwrap();
        assert!(Issued::claims_kid(&t));
        let p = i.verify(&t).unwrap();
        assert_eq!(
            (p.id.as_str(), p.groups.clone()),
            ("alice", vec!["eng".into()])
        );
        assert!(p.scopes.contains("mcp"));
        // Another ring, another resource, expired, internal principal: refused.
        let other = Issued::new(vec![(1, [8; 32])], "https://gw", "https://gw/mcp");
        assert!(other.verify(&t).is_err());
        let elsewhere = Issued::new(vec![(1, [7; 32])], "https://gw", "https://other/mcp");
        assert!(elsewhere.verify(&t).is_err());
        let rotated = Issued::new(vec![(2, [7; 32])], "https://gw", "https://gw/mcp");
        assert!(rotated.verify(&t).is_err());
        let old = i.sign(claims("alice", now() - 600)).unwrap();
        assert!(i.verify(&old).is_err());
        let internal = i.sign(claims(super::super::INTERNAL_PRINCIPAL, now() + 60));
        assert!(i.verify(&internal.unwrap()).is_err());
    }
}
