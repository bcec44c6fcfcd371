//! The peer head's tests: a signed forward verifies, and nothing it binds (keys, body, method,
//! replica, path, time, carried headers, principal, tag) can change without a refusal.

use super::*;

fn keys(b: u8) -> Keys {
    Keys::new(vec![crate::state::Key::new(1, vec![b; 32]).unwrap()]).unwrap()
}

fn fwd<'a>(method: &'a http::Method, to: &'a str, body: &'a [u8]) -> Forwarded<'a> {
    Forwarded {
        from: "r1",
        to,
        method,
        path: "/internal/v1/mcp",
        body,
    }
}

/// Verifies `h` as a forward of `body` (head, then body), as the internal listener does.
fn check(k: &Keys, h: &HeaderMap, f: Forwarded<'_>, now: u64) -> Result<Verified, PeerError> {
    let v = verify(k, h, f.to, f.method, f.path, now)?;
    v.check_body(f.body)?;
    Ok(v)
}

/// A forward of `{}` for `r2` that `alice` (of `eng`) signed with `keys(7)` at 1 000 000 ms,
/// carrying `mcp-session-id: s1`.
fn signed(p: &Principal, post: &http::Method) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("mcp-session-id", HeaderValue::from_static("s1"));
    sign(&keys(7), &fwd(post, "r2", b"{}"), p, 1_000_000, &mut h);
    h
}

/// Why `keys(7)` refuse `h` as the forward `f` at `now`.
fn refused(h: &HeaderMap, f: Forwarded<'_>, now: u64) -> PeerError {
    check(&keys(7), h, f, now).unwrap_err()
}

#[test]
fn a_signed_forward_verifies_and_nothing_of_it_can_change() {
    let p = Principal {
        id: "alice".into(),
        groups: vec!["eng".into()],
        scopes: Default::default(),
        subject: None,
    };
    let post = http::Method::POST;
    let h = signed(&p, &post);
    let v = check(&keys(7), &h, fwd(&post, "r2", b"{}"), 1_000_500).unwrap();
    assert_eq!(
        (
            v.from.as_str(),
            v.principal.id.as_str(),
            v.principal.groups.clone()
        ),
        ("r1", "alice", vec!["eng".to_string()])
    );
    assert_eq!((v.nonce.len(), v.length), (32, 2));
    the_keys_body_method_replica_path_and_time_are_bound(&h, &post);
    the_carried_headers_the_principal_and_the_tag_are_bound(&h, &p, &post);
}

/// Other keys, another body, method, replica or path, or a stale time: refused.
fn the_keys_body_method_replica_path_and_time_are_bound(h: &HeaderMap, post: &http::Method) {
    assert_eq!(
        check(&keys(8), h, fwd(post, "r2", b"{}"), 1_000_500).unwrap_err(),
        PeerError::BadTag,
        "other keys"
    );
    assert_eq!(
        refused(h, fwd(post, "r2", b"{ }"), 1_000_500),
        PeerError::BadBody,
        "the body's length"
    );
    assert_eq!(
        refused(h, fwd(post, "r2", b"[]"), 1_000_500),
        PeerError::BadBody,
        "the body, same length"
    );
    assert_eq!(
        refused(h, fwd(&http::Method::DELETE, "r2", b"{}"), 1_000_500),
        PeerError::BadTag,
        "the method"
    );
    assert_eq!(
        refused(h, fwd(post, "r3", b"{}"), 1_000_500),
        PeerError::NotForMe,
        "another replica"
    );
    assert_eq!(
        refused(
            h,
            Forwarded {
                path: "/other",
                ..fwd(post, "r2", b"{}")
            },
            1_000_500
        ),
        PeerError::BadTag,
        "the path"
    );
    assert_eq!(
        refused(h, fwd(post, "r2", b"{}"), 1_000_000 + SKEW + 1),
        PeerError::Stale
    );
}

/// A carried header changed, a name's values swapped, a forged principal, no tag: refused.
fn the_carried_headers_the_principal_and_the_tag_are_bound(
    h: &HeaderMap,
    p: &Principal,
    post: &http::Method,
) {
    let mut other = h.clone();
    other.insert("mcp-session-id", HeaderValue::from_static("s2"));
    assert_eq!(
        refused(&other, fwd(post, "r2", b"{}"), 1_000_500),
        PeerError::BadTag,
        "a carried header"
    );
    let mut two = HeaderMap::new();
    two.append("mcp-param-a", HeaderValue::from_static("1"));
    two.append("mcp-param-a", HeaderValue::from_static("2"));
    sign(&keys(7), &fwd(post, "r2", b"{}"), p, 1_000_000, &mut two);
    let mut swapped = two.clone();
    swapped.remove("mcp-param-a");
    swapped.append("mcp-param-a", HeaderValue::from_static("2"));
    swapped.append("mcp-param-a", HeaderValue::from_static("1"));
    assert_eq!(
        refused(&swapped, fwd(post, "r2", b"{}"), 1_000_500),
        PeerError::BadTag,
        "a name's values swapped"
    );
    let mut forged = h.clone();
    forged.insert(
        PRINCIPAL,
        HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(br#"{"id":"bob"}"#)).unwrap(),
    );
    assert_eq!(
        refused(&forged, fwd(post, "r2", b"{}"), 1_000_500),
        PeerError::BadTag,
        "the principal"
    );
    let mut bare = h.clone();
    bare.remove(TAG);
    assert_eq!(
        refused(&bare, fwd(post, "r2", b"{}"), 1_000_500),
        PeerError::Missing
    );
}

#[test]
fn the_body_is_bound_by_the_head_so_it_is_verified_before_any_byte_is_read() {
    let (p, post) = (
        Principal {
            id: "alice".into(),
            groups: vec![],
            scopes: Default::default(),
            subject: None,
        },
        http::Method::POST,
    );
    let mut h = HeaderMap::new();
    sign(
        &keys(7),
        &fwd(&post, "r2", b"{\"a\":1}"),
        &p,
        1_000_000,
        &mut h,
    );
    // The head alone verifies, and says how much to read.
    let v = verify(&keys(7), &h, "r2", &post, PATH, 1_000_500).unwrap();
    assert_eq!(v.length, 7);
    // A length or digest changed in the head: the tag no longer verifies.
    for (k, v) in [
        (LENGTH, "4194304".to_owned()),
        (LENGTH, "+7".to_owned()),
        (DIGEST, URL_SAFE_NO_PAD.encode([0u8; 32])),
    ] {
        let mut bad = h.clone();
        bad.insert(k, HeaderValue::from_str(&v).unwrap());
        assert!(
            verify(&keys(7), &bad, "r2", &post, PATH, 1_000_500).is_err(),
            "{k}: {v}"
        );
    }
    // A v1 head (no length or digest): said to be another version.
    for k in [LENGTH, DIGEST] {
        let mut old = h.clone();
        old.remove(k);
        assert_eq!(
            verify(&keys(7), &old, "r2", &post, PATH, 1_000_500).unwrap_err(),
            PeerError::OtherVersion,
            "{k}"
        );
    }
}

const PATH: &str = "/internal/v1/mcp";

#[test]
fn a_forward_carries_the_mcp_headers_and_never_a_credential() {
    for n in [
        "mcp-protocol-version",
        "mcp-method",
        "mcp-session-id",
        "accept",
        "content-type",
    ] {
        assert!(carried(&http::HeaderName::from_static(n)), "{n}");
    }
    for n in [
        "authorization",
        "cookie",
        "x-api-key",
        "host",
        "x-sluice-peer-tag",
        "proxy-authorization",
    ] {
        assert!(!carried(&http::HeaderName::from_static(n)), "{n}");
    }
}
