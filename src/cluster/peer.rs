//! The headers one replica puts on a request it forwards to another, and their check.
//!
//! Takes the sending and the receiving replica's ids, the principal the entry replica
//! authenticated, the request's method, path, carried headers and body, and the shared state
//! keys; gives `x-sluice-peer-*` headers whose tag (a short HMAC under the sealing key,
//! domain-separated from every other use of the keys) binds all of them, a time and a fresh
//! nonce. Refuses on the receiving side a sender whose id does not meet `cluster.id`'s grammar,
//! a request whose tag does not verify (in constant time), that is meant for another replica,
//! whose time is more than [`SKEW`] away from the receiver's clock, whose nonce was seen before (the caller keeps them for that long), or whose principal
//! does not decode: without the state keys nobody reaches the internal listener, and a forward
//! seen on the wire cannot be sent again, elsewhere, or as another method.

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
const TO: &str = "x-sluice-peer-to";
const NONCE: &str = "x-sluice-peer-nonce";
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

/// What a forward is: who sends it to whom, for whom, and the request.
pub struct Forwarded<'a> {
    /// The sending replica.
    pub from: &'a str,
    /// The replica it is for.
    pub to: &'a str,
    /// The HTTP method.
    pub method: &'a http::Method,
    /// The path.
    pub path: &'a str,
    /// The body.
    pub body: &'a [u8],
}

/// The carried headers, canonical: `name:value` lines sorted by name, a name's values in their
/// order (so two values of one name cannot be swapped). Trace context is carried but not
/// signed: a proxy between replicas may rewrite it, and it decides nothing.
fn canonical(headers: &HeaderMap) -> Vec<u8> {
    let mut lines: Vec<(&str, Vec<u8>)> = headers
        .iter()
        .filter(|(k, _)| carried(k) && !matches!(k.as_str(), "traceparent" | "tracestate"))
        .map(|(k, v)| (k.as_str(), [k.as_str().as_bytes(), b":", v.as_bytes()].concat()))
        .collect();
    lines.sort_by(|a, b| a.0.cmp(b.0));
    lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>().join(&b"\n"[..])
}

fn tagged(
    keys: &Keys,
    id: Option<u8>,
    f: &Forwarded<'_>,
    time: &str,
    nonce: &str,
    who: &str,
    headers: &HeaderMap,
) -> Option<(u8, [u8; crate::state::SHORT_TAG])> {
    let digest = body_digest(f.body);
    let canon = canonical(headers);
    let parts: [&[u8]; 9] = [
        f.from.as_bytes(),
        f.to.as_bytes(),
        f.method.as_str().as_bytes(),
        f.path.as_bytes(),
        time.as_bytes(),
        nonce.as_bytes(),
        who.as_bytes(),
        &canon,
        &digest,
    ];
    match id {
        None => Some(keys.tag(DOMAIN, &parts)),
        Some(id) => Some((id, keys.tag_with(id, DOMAIN, &parts)?)),
    }
}

/// Signs a forward: adds the `x-sluice-peer-*` headers to `headers` (which must already hold
/// the carried client headers).
pub fn sign(keys: &Keys, f: &Forwarded<'_>, principal: &Principal, now_ms: u64, headers: &mut HeaderMap) {
    let who = Who { id: principal.id.clone(), groups: principal.groups.clone(), scopes: principal.scopes.clone() };
    let who = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&who).unwrap_or_default());
    let time = now_ms.to_string();
    let nonce = crate::state::nonce();
    let Some((id, tag)) = tagged(keys, None, f, &time, &nonce, &who, headers) else { return };
    let tag = format!("{id}.{}", URL_SAFE_NO_PAD.encode(tag));
    for (k, v) in [(FROM, f.from.to_owned()), (TO, f.to.to_owned()), (TIME, time), (NONCE, nonce), (PRINCIPAL, who), (TAG, tag)] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    }
}

/// Cheap checks before the body is read: every peer header present, meant for `me`, fresh.
pub fn precheck(headers: &HeaderMap, me: &str, now_ms: u64) -> Result<(), PeerError> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).ok_or(PeerError::Missing);
    for k in [NONCE, PRINCIPAL, TAG] {
        get(k)?;
    }
    // The sender's id is logged and audited: only one that meets cluster.id's grammar.
    if !super::replica::is_valid(get(FROM)?) {
        return Err(PeerError::Missing);
    }
    if get(TO)? != me {
        return Err(PeerError::NotForMe);
    }
    let t: u64 = get(TIME)?.parse().map_err(|_| PeerError::Missing)?;
    if t.abs_diff(now_ms) > SKEW {
        return Err(PeerError::Stale);
    }
    Ok(())
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
    /// Signed for another replica.
    #[error("a forwarded request is meant for another replica")]
    NotForMe,
    /// Its nonce was seen before: a replay.
    #[error("a forwarded request was replayed")]
    Replayed,
}

/// Checks a forward's headers against the request (`f.to` is this replica); gives the
/// sender's id, the principal it authenticated, and the nonce (the caller refuses one it saw).
pub fn verify(
    keys: &Keys,
    headers: &HeaderMap,
    f: &Forwarded<'_>,
    now_ms: u64,
) -> Result<(super::replica::ReplicaId, Principal, String), PeerError> {
    precheck(headers, f.to, now_ms)?;
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).ok_or(PeerError::Missing);
    let (from, time, nonce, who, tag) = (get(FROM)?, get(TIME)?, get(NONCE)?, get(PRINCIPAL)?, get(TAG)?);
    let (id, tag) = tag.split_once('.').ok_or(PeerError::Missing)?;
    let id: u8 = id.parse().map_err(|_| PeerError::Missing)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| PeerError::Missing)?;
    let claimed = Forwarded { from, ..*f };
    let expected = tagged(keys, Some(id), &claimed, time, nonce, who, headers).ok_or(PeerError::BadTag)?;
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected.1[..], &tag[..])) {
        return Err(PeerError::BadTag);
    }
    let who: Who = URL_SAFE_NO_PAD.decode(who).ok().and_then(|b| serde_json::from_slice(&b).ok()).ok_or(PeerError::Missing)?;
    let from = super::replica::ReplicaId::parse(from).ok_or(PeerError::Missing)?;
    Ok((from, Principal { id: who.id, groups: who.groups, scopes: who.scopes }, nonce.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(b: u8) -> Keys {
        Keys::new(vec![crate::state::Key::new(1, vec![b; 32]).unwrap()]).unwrap()
    }

    fn fwd<'a>(method: &'a http::Method, to: &'a str, body: &'a [u8]) -> Forwarded<'a> {
        Forwarded { from: "r1", to, method, path: "/internal/v1/mcp", body }
    }

    #[test]
    fn a_signed_forward_verifies_and_nothing_of_it_can_change() {
        let p = Principal { id: "alice".into(), groups: vec!["eng".into()], scopes: Default::default() };
        let post = http::Method::POST;
        let mut h = HeaderMap::new();
        h.insert("mcp-session-id", HeaderValue::from_static("s1"));
        sign(&keys(7), &fwd(&post, "r2", b"{}"), &p, 1_000_000, &mut h);
        let (from, got, nonce) = verify(&keys(7), &h, &fwd(&post, "r2", b"{}"), 1_000_500).unwrap();
        assert_eq!((from.as_str(), got.id.as_str(), got.groups.clone()), ("r1", "alice", vec!["eng".to_string()]));
        assert_eq!(nonce.len(), 32);
        let refused = |h: &HeaderMap, f: Forwarded<'_>, now: u64| verify(&keys(7), h, &f, now).unwrap_err();
        assert_eq!(verify(&keys(8), &h, &fwd(&post, "r2", b"{}"), 1_000_500).unwrap_err(), PeerError::BadTag, "other keys");
        assert_eq!(refused(&h, fwd(&post, "r2", b"{ }"), 1_000_500), PeerError::BadTag, "the body");
        assert_eq!(refused(&h, fwd(&http::Method::DELETE, "r2", b"{}"), 1_000_500), PeerError::BadTag, "the method");
        assert_eq!(refused(&h, fwd(&post, "r3", b"{}"), 1_000_500), PeerError::NotForMe, "another replica");
        assert_eq!(refused(&h, Forwarded { path: "/other", ..fwd(&post, "r2", b"{}") }, 1_000_500), PeerError::BadTag, "the path");
        assert_eq!(refused(&h, fwd(&post, "r2", b"{}"), 1_000_000 + SKEW + 1), PeerError::Stale);
        let mut other = h.clone();
        other.insert("mcp-session-id", HeaderValue::from_static("s2"));
        assert_eq!(refused(&other, fwd(&post, "r2", b"{}"), 1_000_500), PeerError::BadTag, "a carried header");
        let mut two = HeaderMap::new();
        two.append("mcp-param-a", HeaderValue::from_static("1"));
        two.append("mcp-param-a", HeaderValue::from_static("2"));
        sign(&keys(7), &fwd(&post, "r2", b"{}"), &p, 1_000_000, &mut two);
        let mut swapped = two.clone();
        swapped.remove("mcp-param-a");
        swapped.append("mcp-param-a", HeaderValue::from_static("2"));
        swapped.append("mcp-param-a", HeaderValue::from_static("1"));
        assert_eq!(refused(&swapped, fwd(&post, "r2", b"{}"), 1_000_500), PeerError::BadTag, "a name's values swapped");
        let mut forged = h.clone();
        forged.insert(PRINCIPAL, HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(br#"{"id":"bob"}"#)).unwrap());
        assert_eq!(refused(&forged, fwd(&post, "r2", b"{}"), 1_000_500), PeerError::BadTag, "the principal");
        let mut bare = h.clone();
        bare.remove(TAG);
        assert_eq!(refused(&bare, fwd(&post, "r2", b"{}"), 1_000_500), PeerError::Missing);
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
