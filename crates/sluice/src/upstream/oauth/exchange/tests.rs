//! The token exchange request's shape and the per-principal bookkeeping.

use base64::Engine;

use super::*;
use crate::config::{AuthMode, Proof, Target, TokenEndpointAuth};

fn cfg(how: TokenEndpointAuth, target: Target, scopes: Option<Vec<String>>) -> UpstreamAuth {
    UpstreamAuth {
        mode: AuthMode::TokenExchange,
        client_id: "sluice".into(),
        proof: Proof::Secret {
            env: "S".into(),
            value: "s3cret".into(),
        },
        token_endpoint_auth: how,
        scopes,
        issuer: Some("http://idp:1".into()),
        client_metadata_url: None,
        redirect_uri: None,
        target,
    }
}

fn form(body: &Bytes) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn url() -> Uri {
    "http://internal:2/mcp".parse().unwrap()
}

#[test]
fn the_request_exchanges_the_jwt_for_the_upstreams_url_by_default() {
    let subject = SubjectToken::new("eyJ.subject.jwt");
    let c = cfg(
        TokenEndpointAuth::ClientSecretBasic,
        Target::default(),
        Some(vec!["mcp:tools".into(), "read".into()]),
    );
    let (h, body) = request(&discovery::tests_found(), &c, &url(), &subject).unwrap();
    let f = form(&body);
    let want = [
        ("grant_type", GRANT),
        ("subject_token", "eyJ.subject.jwt"),
        ("subject_token_type", ACCESS_TOKEN),
        ("requested_token_type", ACCESS_TOKEN),
        ("resource", "http://internal:2/mcp"),
        ("scope", "mcp:tools read"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(f, want);
    let basic = h[http::header::AUTHORIZATION].to_str().unwrap();
    let pair = base64::engine::general_purpose::STANDARD
        .decode(basic.strip_prefix("Basic ").unwrap())
        .unwrap();
    assert_eq!(pair, b"sluice:s3cret");
    assert!(h[http::header::AUTHORIZATION].is_sensitive());
}

#[test]
fn an_audience_alone_sends_no_resource_and_both_send_both() {
    let subject = SubjectToken::new("t");
    let only = Target {
        audience: Some("internal-api".into()),
        resource: None,
    };
    let c = cfg(TokenEndpointAuth::ClientSecretPost, only, None);
    let (h, body) = request(&discovery::tests_found(), &c, &url(), &subject).unwrap();
    let f = form(&body);
    assert!(f.contains(&("audience".into(), "internal-api".into())));
    assert!(!f.iter().any(|(k, _)| k == "resource" || k == "scope"));
    assert!(f.contains(&("client_secret".into(), "s3cret".into())));
    assert!(!h.contains_key(http::header::AUTHORIZATION));
    let both = Target {
        audience: Some("internal-api".into()),
        resource: Some("https://internal.corp/mcp".into()),
    };
    let c = cfg(TokenEndpointAuth::ClientSecretPost, both, None);
    let (_, body) = request(&discovery::tests_found(), &c, &url(), &subject).unwrap();
    let f = form(&body);
    assert!(f.contains(&("audience".into(), "internal-api".into())));
    assert!(f.contains(&("resource".into(), "https://internal.corp/mcp".into())));
}

#[test]
fn a_subject_token_is_never_printed() {
    let s = SubjectToken::new("eyJ.secret.jwt");
    assert_eq!(format!("{s:?}"), "SubjectToken(..)");
    let p = crate::auth::Principal {
        subject: Some(s),
        ..crate::auth::Principal::local()
    };
    assert!(!format!("{p:?}").contains("secret"));
    // Whichever token a principal came with, it is the same principal.
    assert_eq!(p, crate::auth::Principal::local());
}

#[tokio::test]
async fn a_principal_without_a_jwt_is_told_what_the_upstream_needs() {
    let c = cfg(
        TokenEndpointAuth::ClientSecretBasic,
        Target::default(),
        None,
    );
    let x = Exchange::new("internal", url(), c);
    let e = x.held_for("alice").err().unwrap().to_string();
    assert!(e.contains("company IdP's token"), "{e}");
    assert!(x.held("alice").is_none());
}

#[test]
fn a_new_jwt_replaces_the_old_one_and_the_token_held_for_it_is_not_used() {
    let c = cfg(
        TokenEndpointAuth::ClientSecretBasic,
        Target::default(),
        None,
    );
    let x = Exchange::new("internal", url(), c);
    x.subject("alice", &SubjectToken::new("one"));
    let held = x.held_for("alice").unwrap();
    let old: [u8; 32] = Sha256::digest(b"one").into();
    let mut header = HeaderValue::from_static("Bearer exchanged");
    header.set_sensitive(true);
    let later = Instant::now() + std::time::Duration::from_secs(60);
    let token = Token {
        header: header.clone(),
        renew_at: later,
        expires_at: later,
    };
    *held.token.lock().unwrap() = Some((old, Arc::new(token)));
    assert_eq!(x.held("alice"), Some(header.clone()));
    x.subject("alice", &SubjectToken::new("two"));
    assert_eq!(x.held("alice"), None, "held for another JWT");
    x.rejected("alice", &header);
    assert!(held.token.lock().unwrap().is_none());
}
