//! The headers one replica puts on a request it forwards to another, and their check.
//!
//! Takes the sending and the receiving replica's ids, the principal the entry replica
//! authenticated, the request's method, path, carried headers, and its body's length and
//! SHA-256 digest, and the shared state keys; gives `x-sluice-peer-*` headers whose tag (a short
//! HMAC under the sealing key, domain-separated from every other use of the keys) binds all of
//! them, a time and a fresh nonce. The tag covers the body through its length and digest, so the
//! receiver checks it from the head alone, before it reads a byte of the body ([`verify`]), then
//! reads exactly the signed length and checks the digest ([`Verified::check_body`]). Refuses on
//! the receiving side a sender whose id does not meet `cluster.id`'s grammar, a head without the
//! signed length and digest (a replica of an older version: [`PeerError::OtherVersion`]), a
//! request whose tag does not verify (in constant time), that is meant for another replica,
//! whose time is more than [`SKEW`] away from the receiver's clock, whose nonce was seen before
//! (the caller keeps them for that long), whose principal does not decode, or whose body is not
//! the signed one: without the state keys nobody reaches the internal listener, nor makes it
//! read a body, and a forward seen on the wire cannot be sent again, elsewhere, or as another
//! method.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use crate::auth::Principal;
use crate::state::Keys;

/// v2: the body is bound by its length and digest, carried in the head (v1 hashed the body
/// only, so its receiver had to read the body before it could verify anything).
const DOMAIN: &[u8] = b"sluice/peer/v2\0";
/// The most a forwarded request's time may differ from the receiver's clock.
pub const SKEW: u64 = 30_000;

/// The sending replica's id.
pub const FROM: &str = "x-sluice-peer";
const TIME: &str = "x-sluice-peer-time";
const TO: &str = "x-sluice-peer-to";
const NONCE: &str = "x-sluice-peer-nonce";
const PRINCIPAL: &str = "x-sluice-peer-principal";
const TAG: &str = "x-sluice-peer-tag";
/// The body's length in bytes (decimal), signed.
const LENGTH: &str = "x-sluice-peer-length";
/// The body's SHA-256 (base64url), signed.
const DIGEST: &str = "x-sluice-peer-digest";

/// The client headers a forward carries: the MCP headers the owner checks against the body,
/// and what says how to answer. Never `Authorization` or cookies: the owner trusts the
/// principal the entry replica authenticated, and a client's token goes nowhere.
pub fn carried(name: &http::HeaderName) -> bool {
    let n = name.as_str();
    n.starts_with("mcp-")
        || matches!(
            n,
            "accept" | "content-type" | "traceparent" | "tracestate" | "last-event-id"
        )
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
        .map(|(k, v)| {
            (
                k.as_str(),
                [k.as_str().as_bytes(), b":", v.as_bytes()].concat(),
            )
        })
        .collect();
    lines.sort_by(|a, b| a.0.cmp(b.0));
    lines
        .into_iter()
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join(&b"\n"[..])
}

/// What the tag binds besides the carried headers: everything in the head.
struct Head<'a> {
    from: &'a str,
    to: &'a str,
    method: &'a http::Method,
    path: &'a str,
    time: &'a str,
    nonce: &'a str,
    who: &'a str,
    length: &'a str,
    digest: &'a [u8],
}

fn tagged(
    keys: &Keys,
    id: Option<u8>,
    h: &Head<'_>,
    headers: &HeaderMap,
) -> Option<(u8, [u8; crate::state::SHORT_TAG])> {
    let canon = canonical(headers);
    let parts: [&[u8]; 10] = [
        h.from.as_bytes(),
        h.to.as_bytes(),
        h.method.as_str().as_bytes(),
        h.path.as_bytes(),
        h.time.as_bytes(),
        h.nonce.as_bytes(),
        h.who.as_bytes(),
        &canon,
        h.length.as_bytes(),
        h.digest,
    ];
    match id {
        None => Some(keys.tag(DOMAIN, &parts)),
        Some(id) => Some((id, keys.tag_with(id, DOMAIN, &parts)?)),
    }
}

/// Signs a forward: adds the `x-sluice-peer-*` headers to `headers` (which must already hold
/// the carried client headers).
pub fn sign(
    keys: &Keys,
    f: &Forwarded<'_>,
    principal: &Principal,
    now_ms: u64,
    headers: &mut HeaderMap,
) {
    let who = Who {
        id: principal.id.clone(),
        groups: principal.groups.clone(),
        scopes: principal.scopes.clone(),
    };
    let who = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&who).unwrap_or_default());
    let (time, nonce, length, digest) = (
        now_ms.to_string(),
        crate::state::nonce(),
        f.body.len().to_string(),
        body_digest(f.body),
    );
    let head = Head {
        from: f.from,
        to: f.to,
        method: f.method,
        path: f.path,
        time: &time,
        nonce: &nonce,
        who: &who,
        length: &length,
        digest: &digest,
    };
    let Some((id, tag)) = tagged(keys, None, &head, headers) else {
        return;
    };
    let tag = format!("{id}.{}", URL_SAFE_NO_PAD.encode(tag));
    let digest = URL_SAFE_NO_PAD.encode(digest);
    let pairs = [
        (FROM, f.from.to_owned()),
        (TO, f.to.to_owned()),
        (TIME, time),
        (NONCE, nonce),
        (PRINCIPAL, who),
        (LENGTH, length),
    ];
    for (k, v) in pairs.into_iter().chain([(DIGEST, digest), (TAG, tag)]) {
        if let Ok(v) = HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    }
}

/// Cheap checks: every peer header present, meant for `me`, fresh.
pub fn precheck(headers: &HeaderMap, me: &str, now_ms: u64) -> Result<(), PeerError> {
    let get = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .ok_or(PeerError::Missing)
    };
    for k in [NONCE, PRINCIPAL, TAG] {
        get(k)?;
    }
    // A v1 replica signs the body itself and sends no length: said apart, so the log says why.
    if get(LENGTH).is_err() || get(DIGEST).is_err() {
        return Err(PeerError::OtherVersion);
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
    #[error(
        "a forwarded request's tag does not verify (not signed with this cluster's state keys)"
    )]
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
    /// No signed body length and digest: the sender runs another (older) version.
    #[error("a forwarded request carries no signed body length and digest: the sending replica runs another version of Sluice; run one version on every replica")]
    OtherVersion,
    /// The body is not the one signed (length or digest).
    #[error("a forwarded request's body is not the one its head signed")]
    BadBody,
}

/// What a forward's head, verified, says.
#[derive(Debug)]
pub struct Verified {
    /// The sending replica.
    pub from: super::replica::ReplicaId,
    /// The principal the sending replica authenticated.
    pub principal: Principal,
    /// The forward's nonce (the caller refuses one it saw).
    pub nonce: String,
    /// The signed body length: the most the caller reads, and exactly what it must get.
    pub length: usize,
    digest: [u8; 32],
}

impl Verified {
    /// Whether `body` is the body the head signed (its length, then its digest).
    pub fn check_body(&self, body: &[u8]) -> Result<(), PeerError> {
        let same = body.len() == self.length
            && bool::from(subtle::ConstantTimeEq::ct_eq(
                &body_digest(body)[..],
                &self.digest[..],
            ));
        if same {
            Ok(())
        } else {
            Err(PeerError::BadBody)
        }
    }
}

/// Checks a forward's head, before its body is read: `to` is this replica, `method` and `path`
/// the request's; gives what it says. The body is checked after with [`Verified::check_body`].
pub fn verify(
    keys: &Keys,
    headers: &HeaderMap,
    to: &str,
    method: &http::Method,
    path: &str,
    now_ms: u64,
) -> Result<Verified, PeerError> {
    precheck(headers, to, now_ms)?;
    let get = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .ok_or(PeerError::Missing)
    };
    let (from, time, nonce, who, tag) = (
        get(FROM)?,
        get(TIME)?,
        get(NONCE)?,
        get(PRINCIPAL)?,
        get(TAG)?,
    );
    let length_text = get(LENGTH)?;
    // Digits only (usize's parse takes a `+`): one length, one spelling.
    if length_text.is_empty() || !length_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PeerError::Missing);
    }
    let length: usize = length_text.parse().map_err(|_| PeerError::Missing)?;
    let digest: [u8; 32] = URL_SAFE_NO_PAD
        .decode(get(DIGEST)?)
        .ok()
        .and_then(|d| d.try_into().ok())
        .ok_or(PeerError::Missing)?;
    let (id, tag) = tag.split_once('.').ok_or(PeerError::Missing)?;
    let id: u8 = id.parse().map_err(|_| PeerError::Missing)?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| PeerError::Missing)?;
    let head = Head {
        from,
        to,
        method,
        path,
        time,
        nonce,
        who,
        length: length_text,
        digest: &digest,
    };
    let expected = tagged(keys, Some(id), &head, headers).ok_or(PeerError::BadTag)?;
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected.1[..], &tag[..])) {
        return Err(PeerError::BadTag);
    }
    let who: Who = URL_SAFE_NO_PAD
        .decode(who)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(PeerError::Missing)?;
    let from = super::replica::ReplicaId::parse(from).ok_or(PeerError::Missing)?;
    let principal = Principal {
        id: who.id,
        groups: who.groups,
        scopes: who.scopes,
        subject: None,
    };
    Ok(Verified {
        from,
        principal,
        nonce: nonce.to_owned(),
        length,
        digest,
    })
}

#[cfg(test)]
mod tests;
