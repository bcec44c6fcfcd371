//! Sealed state: what Sluice must remember between two stateless requests, carried by the
//! client in a value only Sluice can have made (the `requestState` of `input_required` rounds).
//!
//! Takes a [`Sealed`] payload and the active key; gives `base64url(version ‖ key id ‖ payload ‖
//! tag)` with an HMAC-SHA256 tag over a domain-separated message. Opening verifies the tag in
//! constant time before anything is decoded, then checks expiry, principal and request digest.
//! Refuses every failure with a [`StateError`] whose reason the client sees in `data.reason`.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
const DOMAIN: &[u8] = b"sluice/requestState/v1\0";
const TAG: usize = 32;
/// The length of [`Keys::tag`]'s tags.
pub const SHORT_TAG: usize = 16;

/// Why a state was refused (the client sees [`StateError::reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not a value Sluice sealed, or altered since.
    #[error("requestState was not issued by this gateway or was altered; start the request again without it")]
    Tampered,
    /// Past its expiry.
    #[error("requestState has expired; start the request again without it")]
    Expired,
    /// Sealed for another principal.
    #[error("requestState belongs to another principal; start the request again without it")]
    WrongPrincipal,
    /// The method, name or arguments differ from the request that received it.
    #[error("requestState was issued for a different request (method, name or arguments changed); retry with the original request")]
    RequestChanged,
    /// The exchange it names is gone (answered already, cancelled or expired).
    #[error("the exchange this requestState names is gone (already answered, cancelled or expired); start the request again")]
    UnknownExchange,
    /// The replica holding the exchange is gone or cannot be reached (`[cluster]`).
    #[error("the replica holding this exchange is gone or cannot be reached; start the request again without requestState")]
    OwnerGone,
}

impl StateError {
    /// The stable `data.reason` value.
    pub fn reason(self) -> &'static str {
        match self {
            StateError::Tampered => "tampered",
            StateError::Expired => "expired",
            StateError::WrongPrincipal => "wrong_principal",
            StateError::RequestChanged => "request_changed",
            StateError::UnknownExchange => "unknown_exchange",
            StateError::OwnerGone => "owner_gone",
        }
    }
}

/// What a sealed state binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The principal the round was answered to.
    #[serde(rename = "p")]
    pub principal: String,
    /// The JSON-RPC method of the original request.
    #[serde(rename = "m")]
    pub method: String,
    /// Its name or URI.
    #[serde(rename = "n")]
    pub name: String,
    /// Digest of the canonical original params (hex).
    #[serde(rename = "d")]
    pub digest: String,
    /// The upstream serving it.
    #[serde(rename = "u")]
    pub upstream: String,
    /// The round this state answers (1 for the first `input_required`).
    #[serde(rename = "r")]
    pub round: u32,
    /// Expiry, milliseconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires_ms: u64,
    /// The replica that holds the parked exchange.
    #[serde(rename = "o")]
    pub owner: String,
    /// The park handle of the exchange (bridge A).
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// What the state is for.
    #[serde(rename = "k", default, skip_serializing_if = "Kind::is_bridge")]
    pub kind: Kind,
    /// For `modern`: the upstream's own `requestState`, byte for byte (`None`: it gave none).
    /// For `approval`: the rule that asked for it.
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
    /// For `modern`: input keys Sluice answered itself (denied elicitations, declined).
    #[serde(rename = "dk", default, skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<String>,
    /// For `modern`: a modern upstream's input requests held back until the user approves them
    /// (JSON), with the rule that asked for the approval.
    #[serde(rename = "ap", default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<(String, String)>,
}

/// What a sealed state is for (its wire name; a bridge A round has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Kind {
    /// A round of a legacy upstream's asks (bridge A): `handle` names the parked exchange.
    #[default]
    #[serde(rename = "bridge")]
    Bridge,
    /// An approval round Sluice asked before a tool call: `extra` is the rule.
    #[serde(rename = "approval")]
    Approval,
    /// A modern upstream's round: `extra` is the upstream's own `requestState`.
    #[serde(rename = "modern")]
    Modern,
    /// A sign-in round Sluice asked before a call to an upstream reached as each user.
    #[serde(rename = "consent")]
    Consent,
}

impl Kind {
    fn is_bridge(&self) -> bool {
        *self == Kind::Bridge
    }
}

/// What a state is issued for: the request it answers (the retry must match all of it).
#[derive(Debug, Clone)]
pub struct Bound {
    /// The principal.
    pub principal: String,
    /// The method.
    pub method: String,
    /// Its name or URI.
    pub name: String,
    /// Digest of its canonical params ([`params_digest`]); may be filled later.
    pub digest: String,
    /// The upstream it routes to.
    pub upstream: String,
}

/// A fresh unguessable nonce (128 bits, hex): a state's single-use handle.
pub fn nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    hex(&bytes)
}

/// Lowercase hex of `bytes`, in one allocation (a `format!` per byte cost a bridge round ~15k
/// instructions in its two digests and its nonce).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

impl Sealed {
    /// A state of `kind` for the request `bound`, answering round `round`, expiring at
    /// `expires_ms`, with a fresh single-use nonce as its handle.
    pub fn issue(kind: Kind, bound: Bound, round: u32, expires_ms: u64, owner: &str) -> Sealed {
        Sealed {
            principal: bound.principal,
            method: bound.method,
            name: bound.name,
            digest: bound.digest,
            upstream: bound.upstream,
            round,
            expires_ms,
            owner: owner.to_owned(),
            handle: Some(nonce()),
            kind,
            extra: None,
            declined: Vec::new(),
            pending: None,
        }
    }
}

/// One HMAC key with its id.
#[derive(Clone)]
pub struct Key {
    /// The id written into every sealed value.
    pub id: u8,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({}, <redacted>)", self.id)
    }
}

impl Key {
    /// A key from its secret bytes (at least 32).
    pub fn new(id: u8, secret: Vec<u8>) -> Result<Key, String> {
        if secret.len() < 32 {
            return Err(format!(
                "state key {id}: the secret must be at least 32 bytes"
            ));
        }
        Ok(Key { id, secret })
    }

    fn mac(&self) -> HmacSha256 {
        let mut m =
            <HmacSha256 as Mac>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable_mac());
        m.update(DOMAIN);
        m
    }

    /// The first 16 bytes of HMAC-SHA256 over `domain` then each part with its length before it
    /// (so parts cannot run into each other).
    fn short_tag(&self, domain: &[u8], parts: &[&[u8]]) -> [u8; SHORT_TAG] {
        let mut m =
            <HmacSha256 as Mac>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable_mac());
        m.update(domain);
        for p in parts {
            m.update(&(p.len() as u64).to_be_bytes());
            m.update(p);
        }
        let mut out = [0u8; SHORT_TAG];
        out.copy_from_slice(&m.finalize().into_bytes()[..SHORT_TAG]);
        out
    }
}

fn unreachable_mac() -> HmacSha256 {
    // HMAC accepts keys of any length; this is never reached.
    <HmacSha256 as Mac>::new_from_slice(&[0u8; 32]).expect("hmac accepts any key length")
}

/// The keys Sluice seals with (the first) and opens with (any).
#[derive(Debug, Clone)]
pub struct Keys {
    keys: Vec<Key>,
}

impl Keys {
    /// A key ring; the first key seals.
    pub fn new(keys: Vec<Key>) -> Result<Keys, String> {
        if keys.is_empty() {
            return Err("at least one state key is needed".into());
        }
        // The id picks the key that opens a value: two keys with one id would make the second
        // unreachable (every value sealed under it refused).
        let mut ids = std::collections::BTreeSet::new();
        if let Some(k) = keys.iter().find(|k| !ids.insert(k.id)) {
            return Err(format!(
                "state key id {} is given twice; every key in state.keys and state.key_env needs its own id (rotate by adding a new id first)",
                k.id
            ));
        }
        Ok(Keys { keys })
    }

    /// A random key for a single replica (replicas must share configured keys instead).
    pub fn random() -> Keys {
        let secret: [u8; 32] = rand::random();
        Keys {
            keys: vec![Key {
                id: 0,
                secret: secret.to_vec(),
            }],
        }
    }

    /// Seals a payload.
    pub fn seal(&self, s: &Sealed) -> String {
        let key = &self.keys[0];
        let payload = serde_json::to_vec(s).unwrap_or_default();
        let mut out = Vec::with_capacity(2 + payload.len() + TAG);
        out.push(VERSION);
        out.push(key.id);
        out.extend_from_slice(&payload);
        let mut mac = key.mac();
        mac.update(&out);
        out.extend_from_slice(&mac.finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(out)
    }

    /// A short tag over `parts` under the sealing key, for values other than a `requestState`
    /// (bridge B's session ids): gives the key's id and the tag. `domain` keeps each use's tags
    /// apart from the others' and from `requestState`'s.
    pub fn tag(&self, domain: &[u8], parts: &[&[u8]]) -> (u8, [u8; SHORT_TAG]) {
        let key = &self.keys[0];
        (key.id, key.short_tag(domain, parts))
    }

    /// Per key of the ring, its id and a 32-byte key for another use than sealing
    /// `requestState` (HMAC-SHA256 of `domain` under the key's secret), the sealing key first:
    /// the token vault's encryption keys, rotated with the ring.
    pub fn derived(&self, domain: &[u8]) -> Vec<(u8, [u8; 32])> {
        let derive = |k: &Key| {
            let mut m = <HmacSha256 as Mac>::new_from_slice(&k.secret)
                .unwrap_or_else(|_| unreachable_mac());
            m.update(domain);
            (k.id, m.finalize().into_bytes().into())
        };
        self.keys.iter().map(derive).collect()
    }

    /// The short tag over `parts` under key `id` of the ring (`None`: the ring does not hold it).
    pub fn tag_with(&self, id: u8, domain: &[u8], parts: &[&[u8]]) -> Option<[u8; SHORT_TAG]> {
        self.keys
            .iter()
            .find(|k| k.id == id)
            .map(|k| k.short_tag(domain, parts))
    }

    /// Whether `tag` is [`Keys::tag`]'s over `parts` under key `id` of the ring (compared in
    /// constant time); false for a key id the ring does not hold.
    pub fn verify_tag(&self, id: u8, domain: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
        self.keys
            .iter()
            .find(|k| k.id == id)
            .is_some_and(|k| bool::from(k.short_tag(domain, parts).ct_eq(tag)))
    }

    /// Verifies the tag (constant time), then decodes, then checks expiry, principal and digest.
    pub fn open(
        &self,
        token: &str,
        principal: &str,
        method: &str,
        name: &str,
        digest: &str,
        now_ms: u64,
    ) -> Result<Sealed, StateError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| StateError::Tampered)?;
        if bytes.len() < 2 + TAG || bytes[0] != VERSION {
            return Err(StateError::Tampered);
        }
        let (body, tag) = bytes.split_at(bytes.len() - TAG);
        let key = self
            .keys
            .iter()
            .find(|k| k.id == body[1])
            .ok_or(StateError::Tampered)?;
        let mut mac = key.mac();
        mac.update(body);
        mac.verify_slice(tag).map_err(|_| StateError::Tampered)?;
        let s: Sealed = serde_json::from_slice(&body[2..]).map_err(|_| StateError::Tampered)?;
        if now_ms >= s.expires_ms {
            return Err(StateError::Expired);
        }
        if s.principal != principal {
            return Err(StateError::WrongPrincipal);
        }
        if s.method != method || s.name != name || s.digest != digest {
            return Err(StateError::RequestChanged);
        }
        Ok(s)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub mod digest;
pub mod nonces;
pub use digest::params_digest;

#[cfg(test)]
mod tests;

/// Parses one `ID:BASE64` key (ID 0–255, the secret at least 32 bytes, standard Base64).
pub fn parse_key(spec: &str) -> Result<Key, String> {
    let (id, b64) = spec
        .split_once(':')
        .ok_or("expected ID:BASE64, e.g. 1:<44 base64 characters>")?;
    let id: u8 = id
        .trim()
        .parse()
        .map_err(|_| format!("key id {id:?} must be a number 0-255"))?;
    let secret = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| format!("key {id}: the secret is not valid Base64"))?;
    Key::new(id, secret)
}

/// The key ring from config and the environment; a random key (with a warning) when none.
pub fn keys_from(configured: &[String], key_env: Option<&str>) -> Result<Keys, String> {
    let mut keys = configured
        .iter()
        .map(|k| parse_key(k))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(var) = key_env {
        // A configured source that yields no key must not fall back to a random one.
        let v = std::env::var(var).map_err(|_| {
            format!(
                "state.key_env names the environment variable {}, which is not set; set it (ID:BASE64, comma-separated) or remove key_env",
                crate::escape::shown_var(var)
            )
        })?;
        let before = keys.len();
        for k in v.split(',').filter(|k| !k.trim().is_empty()) {
            keys.push(parse_key(k).map_err(|e| format!("{var}: {e}"))?);
        }
        if keys.len() == before {
            return Err(format!(
                "state.key_env: the environment variable {var} holds no key; set it (ID:BASE64, comma-separated) or remove key_env"
            ));
        }
    }
    if keys.is_empty() {
        tracing::warn!(
            "no state keys configured: sealing requestState with a random key; replicas must share keys (state.keys or state.key_env)"
        );
        return Ok(Keys::random());
    }
    Keys::new(keys)
}
