//! The headers one replica puts on a request it forwards to another, and their check.
//!
//! Takes the sending replica's id, the principal the entry replica authenticated, the request
//! path and body, and the shared state keys; gives `x-sluice-peer-*` headers whose tag (a short
//! HMAC under the sealing key, domain-separated from every other use of the keys) binds all of
//! them and a time. Refuses on the receiving side a request whose tag does not verify (in
//! constant time), whose time is more than [`SKEW`] away from the receiver's clock, or whose
//! principal does not decode: without the state keys nobody reaches the internal listener.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use crate::auth::Principal;
use crate::state::Keys;

const DOMAIN: &[u8] = b"sluice/peer/v1\0";
/// The most a forwarded request's time may differ from the receiver's clock.
pub const SKEW: u64 = 30_000;

/// The sending replica's id.
pub const FROM: &str = "x-sluice-peer";
const TIME: &str = "x-sluice-peer-time";
const PRINCIPAL: &str = "x-sluice-peer-principal";
const TAG: &str = "x-sluice-peer-tag";

/// The client headers a forward carries: the MCP headers the owner checks against the body,
/// and what says how to answer. Never `Authorization` or cookies: the owner trusts the
/// principal the entry replica authenticated, and a client's token goes nowhere.
pub fn carried(name: &http::HeaderName) -> bool {
    let n = name.as_str();
    n.starts_with("mcp-") || matches!(n, "accept" | "content-type" | "traceparent" | "tracestate" | "last-event-id")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Who {
    id: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    scopes: std::collections::BTreeSet<String>,
}

fn body_digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// Signs a forward: adds the `x-sluice-peer-*` headers to `headers`.
pub fn sign(keys: &Keys, from: &str, principal: &Principal, path: &str, body: &[u8], now_ms: u64, headers: &mut HeaderMap) {
    let who = Who { id: principal.id.clone(), groups: principal.groups.clone(), scopes: principal.scopes.clone() };
    let who = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&who).unwrap_or_default());
    let time = now_ms.to_string();
    let digest = body_digest(body);
    let (id, tag) = keys.tag(DOMAIN, &[from.as_bytes(), time.as_bytes(), who.as_bytes(), path.as_bytes(), &digest]);
    let tag = format!("{id}.{}", URL_SAFE_NO_PAD.encode(tag));
    for (k, v) in [(FROM, from.to_owned()), (TIME, time), (PRINCIPAL, who), (TAG, tag)] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    }
}

/// Why a forward was refused (logged by the receiver; the sender sees 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// A header is missing or malformed.
    #[error("a forwarded request lacks its peer headers")]
    Missing,
    /// The tag does not verify under any state key.
    #[error("a forwarded request's tag does not verify (not signed with this cluster's state keys)")]
    BadTag,
    /// Too old or from the future.
    #[error("a forwarded request's time is more than 30 s from this replica's clock")]
    Stale,
}

/// Checks a forward's headers against its path and body; gives the sender's id and the
/// principal it authenticated.
pub fn verify(keys: &Keys, headers: &HeaderMap, path: &str, body: &[u8], now_ms: u64) -> Result<(String, Principal), PeerError> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).ok_or(PeerError::Missing);
    let (from, time, who, tag) = (get(FROM)?, get(TIME)?, get(PRINCIPAL)?, get(TAG)?);
    let (id, tag) = tag.split_once('.').ok_or(PeerError::Missing)?;
    let id: u8 = id.parse().map_err(|_| PeerError::Missing)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| PeerError::Missing)?;
    let digest = body_digest(body);
    if !keys.verify_tag(id, DOMAIN, &[from.as_bytes(), time.as_bytes(), who.as_bytes(), path.as_bytes(), &digest], &tag) {
        return Err(PeerError::BadTag);
    }
    let t: u64 = time.parse().map_err(|_| PeerError::Missing)?;
    if t.abs_diff(now_ms) > SKEW {
        return Err(PeerError::Stale);
    }
    let who: Who = URL_SAFE_NO_PAD.decode(who).ok().and_then(|b| serde_json::from_slice(&b).ok()).ok_or(PeerError::Missing)?;
    Ok((from.to_owned(), Principal { id: who.id, groups: who.groups, scopes: who.scopes }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(b: u8) -> Keys {
        Keys::new(vec![crate::state::Key::new(1, vec![b; 32]).unwrap()]).unwrap()
    }

    #[test]
    fn a_signed_forward_verifies_once_and_nothing_of_it_can_change() {
        let p = Principal { id: "alice".into(), groups: vec!["eng".into()], scopes: Default::default() };
        let mut h = HeaderMap::new();
        sign(&keys(7), "r1", &p, "/internal/v1/mcp", b"{}", 1_000_000, &mut h);
        let (from, got) = verify(&keys(7), &h, "/internal/v1/mcp", b"{}", 1_000_500).unwrap();
        assert_eq!((from.as_str(), got.id.as_str(), got.groups.clone()), ("r1", "alice", vec!["eng".to_string()]));
        assert_eq!(verify(&keys(8), &h, "/internal/v1/mcp", b"{}", 1_000_500).unwrap_err(), PeerError::BadTag, "other keys");
        assert_eq!(verify(&keys(7), &h, "/internal/v1/mcp", b"{ }", 1_000_500).unwrap_err(), PeerError::BadTag, "the body");
        assert_eq!(verify(&keys(7), &h, "/other", b"{}", 1_000_500).unwrap_err(), PeerError::BadTag, "the path");
        assert_eq!(verify(&keys(7), &h, "/internal/v1/mcp", b"{}", 1_000_000 + SKEW + 1).unwrap_err(), PeerError::Stale);
        let mut forged = h.clone();
        let bob = URL_SAFE_NO_PAD.encode(br#"{"id":"bob"}"#);
        forged.insert(PRINCIPAL, HeaderValue::from_str(&bob).unwrap());
        assert_eq!(verify(&keys(7), &forged, "/internal/v1/mcp", b"{}", 1_000_500).unwrap_err(), PeerError::BadTag, "the principal");
        let mut bare = h.clone();
        bare.remove(TAG);
        assert_eq!(verify(&keys(7), &bare, "/internal/v1/mcp", b"{}", 1_000_500).unwrap_err(), PeerError::Missing);
    }

    #[test]
    fn a_forward_carries_the_mcp_headers_and_never_a_credential() {
        for n in ["mcp-protocol-version", "mcp-method", "mcp-session-id", "accept", "content-type"] {
            assert!(carried(&http::HeaderName::from_static(n)), "{n}");
        }
        for n in ["authorization", "cookie", "x-api-key", "host", "x-sluice-peer-tag", "proxy-authorization"] {
            assert!(!carried(&http::HeaderName::from_static(n)), "{n}");
        }
    }
}
