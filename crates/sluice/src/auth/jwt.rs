//! JWT bearer tokens: HS256 with a shared secret, or RS256/ES256 with public keys (PEM files
//! or a JWKS file).
//!
//! Takes a token; gives its principal (a configurable claim, default `sub`), groups and scopes.
//! Refuses a bad signature, another issuer, another audience (Sluice's own resource URL by
//! default), and `exp`/`nbf` outside a small leeway.

use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::{AuthError, Principal};
use crate::config::JwtConfig;

/// A verification key: its `kid` (from a JWKS), the key, and the algorithm it verifies.
type Key = (Option<String>, DecodingKey, Algorithm);

/// A verifier for the configured issuer and keys.
pub struct JwtVerifier {
    keys: Vec<Key>,
    validation: Validation,
    principal_claim: String,
    groups_claim: String,
}

impl JwtVerifier {
    /// Loads the keys.
    pub fn new(cfg: &JwtConfig, resource: &str) -> Result<JwtVerifier, String> {
        let mut keys = Vec::new();
        if cfg.issuer.trim().is_empty() {
            return Err(
                "auth.jwt.issuer is empty: name the issuer whose tokens are accepted".into(),
            );
        }
        hs256_keys(cfg, &mut keys)?;
        for path in &cfg.public_keys {
            keys.push(pem_key(path)?);
        }
        if let Some(path) = &cfg.jwks_file {
            jwks_keys(path, &mut keys)?;
        }
        if keys.is_empty() {
            return Err(
                "auth.jwt: configure hs256_secret_env, hs256_secret_file, public_keys or jwks_file"
                    .into(),
            );
        }
        let validation = validation(cfg, &keys, resource);
        Ok(JwtVerifier {
            keys,
            validation,
            principal_claim: cfg.principal_claim.clone(),
            groups_claim: cfg.groups_claim.clone(),
        })
    }

    /// Verifies a token.
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let header = decode_header(token).map_err(|_| AuthError::Invalid("not a JWT"))?;
        let mut last = AuthError::Invalid("no key matches the token");
        for (kid, key, alg) in &self.keys {
            if *alg != header.alg || (header.kid.is_some() && kid.is_some() && header.kid != *kid) {
                continue;
            }
            let mut v = self.validation.clone();
            v.algorithms = vec![*alg];
            match decode::<Value>(token, key, &v) {
                Ok(data) => {
                    let mut p = self.principal(&data.claims)?;
                    p.subject = Some(super::SubjectToken::new(token));
                    return Ok(p);
                }
                Err(e) => last = AuthError::Invalid(reason(&e)),
            }
        }
        Err(last)
    }

    fn principal(&self, claims: &Value) -> Result<Principal, AuthError> {
        let id = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .ok_or(AuthError::Invalid("the principal claim is missing"))?;
        if id.is_empty() || id == super::INTERNAL_PRINCIPAL {
            return Err(AuthError::Invalid(
                "the principal claim names no usable principal",
            ));
        }
        let groups = groups_of(&claims, &self.groups_claim);
        let scopes = claims
            .get("scope")
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(Principal {
            id: id.to_owned(),
            groups,
            scopes,
            subject: None,
        })
    }
}

/// The HS256 secrets: from `hs256_secret_env`, then from `hs256_secret_file` (trimmed), each
/// long enough.
fn hs256_keys(cfg: &JwtConfig, keys: &mut Vec<Key>) -> Result<(), String> {
    if let Some(var) = &cfg.hs256_secret_env {
        let secret = std::env::var(var).map_err(|_| {
            format!(
                "auth.jwt: environment variable {} is not set",
                crate::escape::shown_var(var)
            )
        })?;
        check_secret(
            secret.as_bytes(),
            &format!("the environment variable {var}"),
        )?;
        keys.push((
            None,
            DecodingKey::from_secret(secret.as_bytes())
                .map_err(|e| format!("auth.jwt: bad HS256 secret: {e}"))?,
            Algorithm::HS256,
        ));
    }
    if let Some(path) = &cfg.hs256_secret_file {
        let secret =
            std::fs::read(path).map_err(|e| format!("auth.jwt: cannot read {path}: {e}"))?;
        let secret = secret.trim_ascii();
        check_secret(secret, path)?;
        keys.push((
            None,
            DecodingKey::from_secret(secret)
                .map_err(|e| format!("auth.jwt: bad HS256 secret: {e}"))?,
            Algorithm::HS256,
        ));
    }
    Ok(())
}

/// One public key from a PEM file: RSA (RS256), else EC (ES256).
fn pem_key(path: &str) -> Result<Key, String> {
    let pem = std::fs::read(path).map_err(|e| format!("auth.jwt: cannot read {path}: {e}"))?;
    let key = DecodingKey::from_rsa_pem(&pem)
        .map(|k| (k, Algorithm::RS256))
        .or_else(|_| DecodingKey::from_ec_pem(&pem).map(|k| (k, Algorithm::ES256)))
        .map_err(|_| format!("auth.jwt: {path} is not an RSA or EC public key in PEM"))?;
    Ok((None, key.0, key.1))
}

/// Every key of a JWKS file, with its `kid`: ES256 when it says so, else RS256. Refuses a file
/// that holds no key.
fn jwks_keys(path: &str, keys: &mut Vec<Key>) -> Result<(), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("auth.jwt: cannot read {path}: {e}"))?;
    let set: jsonwebtoken::jwk::JwkSet =
        serde_json::from_str(&text).map_err(|e| format!("auth.jwt: {path} is not a JWKS: {e}"))?;
    if set.keys.is_empty() {
        return Err(format!(
            "auth.jwt: {path} holds no key; add the issuer's keys or remove jwks_file"
        ));
    }
    for jwk in &set.keys {
        let alg = match jwk.common.key_algorithm.map(|a| format!("{a:?}")) {
            Some(a) if a == "ES256" => Algorithm::ES256,
            _ => Algorithm::RS256,
        };
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|e| format!("auth.jwt: a key in {path} is unusable: {e}"))?;
        keys.push((jwk.common.key_id.clone(), key, alg));
    }
    Ok(())
}

/// What a token must satisfy: one of the keys' algorithms, the issuer, the audience (the
/// configured one, else Sluice's `resource` URL), `exp`, `nbf`, within the leeway.
fn validation(cfg: &JwtConfig, keys: &[Key], resource: &str) -> Validation {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.algorithms = Vec::new();
    for k in keys {
        if !validation.algorithms.contains(&k.2) {
            validation.algorithms.push(k.2);
        }
    }
    validation.leeway = cfg.leeway_ms / 1000;
    validation.set_issuer(&[&cfg.issuer]);
    validation.set_audience(&[cfg.audience.as_deref().unwrap_or(resource)]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.validate_nbf = true;
    validation
}

/// An HS256 secret shorter than the hash (RFC 7518 §3.2) is guessable; an empty one signs for anyone.
const MIN_SECRET: usize = 32;

fn check_secret(secret: &[u8], from: &str) -> Result<(), String> {
    if secret.len() < MIN_SECRET {
        return Err(format!(
            "auth.jwt: the HS256 secret in {from} is {} bytes; it must be at least {MIN_SECRET} (an empty or short secret lets anyone sign tokens)",
            secret.len()
        ));
    }
    Ok(())
}

pub(super) fn reason(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidAudience => "the token was issued for another resource (audience)",
        ErrorKind::InvalidIssuer => "the token comes from another issuer",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss, aud)",
        _ => "the token is malformed",
    }
}
/// The groups a token's `claim` holds: an array of strings, or one space-separated string
/// (what IdPs send); none otherwise.
pub fn groups_of(claims: &Value, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}
