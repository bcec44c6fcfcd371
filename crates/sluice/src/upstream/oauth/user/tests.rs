//! The per-user token table's rules without an authorization server: a sign-in `state` is
//! single use and expires, the `iss` is compared as a string, consents in progress are bounded
//! per principal, and a step-up asks the union of scopes, the same ones only so often.

use std::time::Duration;

use super::super::grant::Token;
use super::*;
use http::HeaderValue;

fn users() -> Users {
    let cfg = crate::config::UpstreamAuth {
        mode: crate::config::AuthMode::Oauth,
        client_id: String::new(),
        proof: crate::config::Proof::None,
        token_endpoint_auth: crate::config::TokenEndpointAuth::None,
        scopes: None,
        issuer: None,
        client_metadata_url: None,
        redirect_uri: None,
        target: Default::default(),
    };
    let url = "http://up:1/mcp".parse().unwrap();
    Users::new("gh", url, cfg, "http://127.0.0.1:9/oauth/callback".into())
}

fn server() -> Arc<Server> {
    let mut found = super::super::discovery::tests_found();
    found.user.authorization = Some("http://as:1/authorize".parse().unwrap());
    found.user.iss_parameter = true;
    found.user.pkce_methods = Some(vec!["S256".into()]);
    Arc::new(Server {
        found,
        client: register::Client {
            id: "sluice".into(),
            secret: None,
            method: crate::config::TokenEndpointAuth::None,
            how: "pre-registered",
        },
        challenged: Some(vec!["read".into()]),
    })
}

fn http() -> HttpClient {
    let s = Duration::from_secs(1);
    HttpClient::new(s, s, 1 << 20, 1 << 16, s)
}

fn pending(u: &Users, state: &str, principal: &str, expires: Instant) {
    u.pending.lock().unwrap().insert(
        state.into(),
        Pending {
            principal: principal.into(),
            verifier: "v".into(),
            redirect: u.redirect.clone(),
            server: server(),
            expires,
            scopes: vec![],
            shared: false,
        },
    );
}

#[tokio::test]
async fn a_state_is_used_once_expires_and_needs_the_issuers_own_iss() {
    let u = users();
    let later = Instant::now() + Duration::from_secs(60);
    pending(&u, "s1", "alice", later);
    assert!(u.issued("s1").await);
    // Another issuer (a normalized one too: RFC 9207 compares strings): refused, and gone.
    let e = u
        .finish(&http(), "s1", "c", Some("http://as:1/"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("another issuer"), "{e}");
    let e = u
        .finish(&http(), "s1", "c", Some("http://as:1"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("used already or has expired"), "{e}");
    // The server says it sends iss: one without is refused.
    pending(&u, "s2", "alice", later);
    let e = u.finish(&http(), "s2", "c", None).await.unwrap_err();
    assert!(e.to_string().contains("carries no iss"), "{e}");
    // Expired.
    pending(&u, "s3", "alice", Instant::now() - Duration::from_millis(1));
    let e = u
        .finish(&http(), "s3", "c", Some("http://as:1"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("expired"), "{e}");
    assert!(!u.has("alice"));
    // Nothing of the code in the errors.
    assert!(!e.to_string().contains("code=c"));
}

#[tokio::test]
async fn consents_in_progress_are_bounded_per_principal() {
    let u = users();
    *u.server.lock().await = Some(server());
    let mut urls = Vec::new();
    for _ in 0..PENDING_PER_PRINCIPAL + 3 {
        urls.push(
            u.consent(&http(), "alice", &HeaderMap::new())
                .await
                .unwrap(),
        );
    }
    u.consent(&http(), "bob", &HeaderMap::new()).await.unwrap();
    let p = u.pending.lock().unwrap();
    let alice = p.values().filter(|p| p.principal == "alice").count();
    assert_eq!(
        (alice, p.len()),
        (PENDING_PER_PRINCIPAL, PENDING_PER_PRINCIPAL + 1)
    );
    // The challenge's scope is asked for, and each URL has its own state.
    assert!(urls[0].contains("scope=read"), "{}", urls[0]);
    let mut states: Vec<_> = urls
        .iter()
        .map(|u| u.split("state=").nth(1).unwrap())
        .collect();
    states.dedup();
    assert_eq!(states.len(), urls.len());
}

async fn hold(u: &Users, principal: &str, token: &str, scopes: &[&str]) -> HeaderValue {
    let header = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    let now = Instant::now();
    let t = Token {
        header: header.clone(),
        renew_at: now + Duration::from_secs(60),
        expires_at: now + Duration::from_secs(70),
    };
    let scopes = scopes.iter().map(|s| s.to_string()).collect();
    let s = server();
    let stored = u.stored(t, None, scopes, 1, &s.found, &s.client);
    u.keep(principal, stored).await.unwrap();
    header
}

#[tokio::test]
async fn a_step_up_asks_the_union_of_scopes_and_the_same_ones_only_so_often() {
    let u = users();
    let s = server();
    let www = |scope: &str| format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\"");
    let sent = hold(&u, "alice", "t1", &["read"]).await;
    // Not insufficient_scope (or another token than the one held): the token stays.
    assert!(!u.insufficient("alice", &sent, Some("Bearer error=\"invalid_token\"")));
    let other = HeaderValue::from_static("Bearer other");
    assert!(!u.insufficient("alice", &other, Some(&www("write"))));
    assert!(u.has("alice"));
    // A new scope: dropped, and the next sign-in asks for both.
    assert!(u.insufficient("alice", &sent, Some(&www("write"))));
    assert!(!u.has("alice"));
    assert_eq!(u.scopes(&s, "alice"), ["read", "write"]);
    assert_eq!(u.scopes(&s, "bob"), ["read"]);
    // The same scopes again and again: asked MAX_SAME_SCOPE more times, then the token stays.
    for round in 0..MAX_SAME_SCOPE + 1 {
        let sent = hold(&u, "alice", &format!("t{round}x"), &["read", "write"]).await;
        let dropped = u.insufficient("alice", &sent, Some(&www("write")));
        assert_eq!(dropped, round < MAX_SAME_SCOPE, "round {round}");
    }
}
