//! API keys: stored as SHA-256 hashes, compared in constant time.
//!
//! Takes the configured hashes (config and an environment variable); gives the principal of a
//! presented key. Refuses nothing itself: an unknown key is `None`.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Principal;
use crate::config::AuthConfig;

/// The configured keys.
pub struct ApiKeys {
    keys: Vec<([u8; 32], Principal)>,
}

fn parse_hash(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    // Not a byte of it is printed: a key pasted where its hash belongs is the secret itself.
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(
            "an API key hash is not 64 hex characters (it is not shown): give the sha256 of the key (`sluice hash-key KEY`), never the key itself"
                .to_owned(),
        );
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| "API key hash: not hex".to_owned())?;
    }
    Ok(out)
}

impl ApiKeys {
    /// Loads keys from config and `api_keys_env` (`HASH=principal[:group|group][:scope|scope]`, comma-separated).
    pub fn load(cfg: &AuthConfig) -> Result<ApiKeys, String> {
        let mut keys = Vec::new();
        for k in &cfg.api_keys {
            if k.principal.trim().is_empty() {
                return Err("auth.api_keys: an entry has an empty principal; name who the key authenticates".into());
            }
            if k.principal == super::INTERNAL_PRINCIPAL {
                return Err(format!(
                    "auth.api_keys: the principal {:?} is Sluice's own; choose another",
                    super::INTERNAL_PRINCIPAL
                ));
            }
            let p = Principal {
                id: k.principal.clone(),
                groups: k.groups.clone(),
                scopes: k.scopes.iter().cloned().collect(),
                subject: None,
            };
            keys.push((parse_hash(&k.sha256)?, p));
        }
        if let Some(var) = &cfg.api_keys_env {
            // A configured source that yields no key would turn authentication off: refuse it.
            let v = std::env::var(var).map_err(|_| {
                format!(
                    "auth.api_keys_env names the environment variable {}, which is not set; set it (HASH=principal, comma-separated) or remove api_keys_env",
                    crate::escape::shown_var(var)
                )
            })?;
            let before = keys.len();
            {
                for entry in v.split(',').filter(|e| !e.trim().is_empty()) {
                    let (hash, rest) = entry.split_once('=').ok_or_else(|| {
                        format!("{var}: expected HASH=principal[:groups][:scopes]")
                    })?;
                    let mut parts = rest.split(':');
                    let id = parts.next().unwrap_or("").trim().to_owned();
                    let list = |s: Option<&str>| {
                        s.map(|s| {
                            s.split('|')
                                .filter(|x| !x.is_empty())
                                .map(str::to_owned)
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                    };
                    let groups = list(parts.next());
                    let scopes: BTreeSet<String> = list(parts.next()).into_iter().collect();
                    if id.is_empty() {
                        return Err(format!("{var}: an entry has an empty principal; expected HASH=principal[:groups][:scopes]"));
                    }
                    if id == super::INTERNAL_PRINCIPAL {
                        return Err(format!(
                            "{var}: the principal {:?} is Sluice's own; choose another",
                            super::INTERNAL_PRINCIPAL
                        ));
                    }
                    keys.push((
                        parse_hash(hash)?,
                        Principal {
                            id,
                            groups,
                            scopes,
                            subject: None,
                        },
                    ));
                }
            }
            if keys.len() == before {
                return Err(format!(
                    "auth.api_keys_env: the environment variable {var} holds no API key; set it (HASH=principal, comma-separated) or remove api_keys_env"
                ));
            }
        }
        Ok(ApiKeys { keys })
    }

    /// Whether no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The principals the keys name (config and `api_keys_env`), in order, each as its first
    /// key gives it (for `sluice check`).
    /// Whether one of these keys (config and environment) hashes to `sha256` (hex).
    pub fn holds_hash(&self, sha256: &str) -> bool {
        let Ok(want) = parse_hash(sha256) else {
            return false;
        };
        self.keys.iter().any(|(h, _)| bool::from(h.ct_eq(&want)))
    }

    /// The principals the keys name.
    pub fn principals(&self) -> impl Iterator<Item = &Principal> {
        self.keys.iter().map(|(_, p)| p)
    }

    /// The principal of `token`, comparing its hash with every configured one in constant time.
    pub fn find(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (hash, p) in &self.keys {
            if bool::from(hash.ct_eq(&digest)) && found.is_none() {
                found = Some(p.clone());
            }
        }
        found
    }
}

/// The hex SHA-256 of a key, for writing configs (`sluice hash-key`).
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
