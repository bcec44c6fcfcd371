//! The vault in memory: entries sealed (no token readable in what is kept), bound to their
//! principal and upstream, dropped only while unchanged, listed without secrets, revoked.
//! The Redis side is tested with real Redis and replicas (tests/replicas).

use super::*;

fn stored(access: &str, refresh: Option<&str>) -> Stored {
    Stored {
        url: "http://up:1/mcp".into(),
        resource: "http://up:1/mcp".into(),
        access: format!("Bearer {access}"),
        renew_ms: now_ms() + 50_000,
        expires_ms: now_ms() + 60_000,
        refresh: refresh.map(str::to_owned),
        scopes: vec!["read".into()],
        serial: 7,
        issuer: "http://as:1".into(),
        token_endpoint: "http://as:1/token".into(),
        client_id: "sluice".into(),
        client_secret: Some("client-secret-value".into()),
        method: crate::config::TokenEndpointAuth::ClientSecretPost,
    }
}

fn vault() -> Vault {
    Vault::new(&crate::state::Keys::random(), None)
}

#[tokio::test]
async fn what_is_kept_is_sealed_and_opens_for_its_owner_only() {
    let v = vault();
    let raw = v
        .put("gh", "alice", &stored("access-AAA", Some("refresh-RRR")))
        .await
        .unwrap();
    for secret in ["access-AAA", "refresh-RRR", "client-secret-value"] {
        let found = raw.windows(secret.len()).any(|w| w == secret.as_bytes());
        assert!(!found, "{secret} readable in the sealed entry");
    }
    let e = v.get("gh", "alice").await.unwrap().expect("alice's entry");
    assert_eq!(e.stored.access, "Bearer access-AAA");
    assert_eq!(e.raw, raw);
    assert!(v.get("gh", "bob").await.unwrap().is_none());
    assert!(v.get("other", "alice").await.unwrap().is_none());
    // Another process's key (a vault of another ring) does not open it.
    let Store::Memory(m) = &v.store else {
        unreachable!()
    };
    let stolen = m.lock().unwrap()["gh"]["alice"].1.clone();
    assert!(vault().sealer.open("gh", "alice", &stolen).is_none());
    // Moved to another principal, it does not open either.
    m.lock()
        .unwrap()
        .get_mut("gh")
        .unwrap()
        .insert("bob".into(), (u64::MAX, stolen));
    assert!(v.get("gh", "bob").await.unwrap().is_none());
}

#[tokio::test]
async fn an_entry_is_dropped_only_while_it_is_the_one_read() {
    let v = vault();
    let old = v
        .put("gh", "alice", &stored("a1", Some("r1")))
        .await
        .unwrap();
    let new = v
        .put("gh", "alice", &stored("a2", Some("r2")))
        .await
        .unwrap();
    assert!(!v.remove("gh", "alice", Some(&old)).await.unwrap());
    assert!(v.get("gh", "alice").await.unwrap().is_some());
    assert!(v.remove("gh", "alice", Some(&new)).await.unwrap());
    assert!(v.get("gh", "alice").await.unwrap().is_none());
}

#[tokio::test]
async fn an_operator_lists_without_secrets_and_revokes_by_principal_and_upstream() {
    let v = vault();
    for (u, p) in [("gh", "alice"), ("jira", "alice"), ("gh", "bob")] {
        v.put(u, p, &stored("tok", Some("ref"))).await.unwrap();
    }
    let all = v.list(None, None).await.unwrap();
    let names: Vec<_> = all
        .iter()
        .map(|l| (l.principal.as_str(), l.upstream.as_str()))
        .collect();
    assert_eq!(names, [("alice", "gh"), ("alice", "jira"), ("bob", "gh")]);
    assert!(all
        .iter()
        .all(|l| l.refreshable && l.issuer == "http://as:1"));
    assert!(
        !format!("{all:?}").contains("tok"),
        "a listing shows a token"
    );
    assert_eq!(v.list(Some("alice"), None).await.unwrap().len(), 2);
    assert_eq!(v.list(None, Some("gh")).await.unwrap().len(), 2);
    assert_eq!(v.revoke("alice", Some("jira")).await.unwrap(), 1);
    assert_eq!(v.list(Some("alice"), None).await.unwrap().len(), 1);
    assert_eq!(v.revoke("alice", None).await.unwrap(), 1);
    assert_eq!(v.revoke("alice", None).await.unwrap(), 0);
    assert_eq!(v.list(None, None).await.unwrap().len(), 1);
}

#[test]
fn redis_keys_carry_both_names_hex_encoded_and_read_back() {
    let k = key("v", "gh", "a:b*c");
    assert_eq!(k, "sluice:v:6768:613a622a63");
    assert_eq!(names_of(&k), Some(("gh".into(), "a:b*c".into())));
    assert_eq!(names_of("sluice:v:zz:61"), None);
    assert_eq!(names_of("sluice:l:6768:61"), None);
}

#[tokio::test]
async fn a_refresh_replaces_only_the_entry_it_refreshed() {
    let v = vault();
    let old = v
        .put("gh", "alice", &stored("a1", Some("r1")))
        .await
        .unwrap();
    let new = v
        .replace("gh", "alice", &old, &stored("a2", Some("r2")))
        .await
        .unwrap();
    let new = new.expect("replaced while unchanged");
    assert_eq!(
        v.get("gh", "alice").await.unwrap().unwrap().stored.access,
        "Bearer a2"
    );
    // A second refresh of the same old entry (another request's) does not win.
    assert!(v
        .replace("gh", "alice", &old, &stored("a3", Some("r3")))
        .await
        .unwrap()
        .is_none());
    // Revoked while a refresh was under way: the refresh does not bring it back.
    assert_eq!(v.revoke("alice", None).await.unwrap(), 1);
    assert!(v
        .replace("gh", "alice", &new, &stored("a4", Some("r4")))
        .await
        .unwrap()
        .is_none());
    assert!(v.get("gh", "alice").await.unwrap().is_none());
}
