//! The login front's bounds, end to end in process (no IdP: codes are put in the store as the
//! IdP's callback would): PKCE, redirect URIs, `resource`, the consent cookie, single-use codes,
//! refresh rotation and replay.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt as _;

use super::records::{Client, Code, Origin};
use super::store::{hashed, Store};
use super::web::Params;
use super::*;

const RESOURCE: &str = "http://127.0.0.1:8080/mcp";
const REDIRECT: &str = "http://127.0.0.1:4567/cb";

fn login() -> Login {
    let cfg = LoginConfig {
        issuer: "http://127.0.0.1:8080".into(),
        idp_issuer: "http://127.0.0.1:9".into(),
        idp_client_id: "sluice".into(),
        idp_client_secret_env: None,
        idp_scopes: vec!["openid".into()],
        principal_claim: "sub".into(),
        groups_claim: "groups".into(),
        access_token_ttl_ms: 600_000,
        refresh_token_ttl_ms: 3_600_000,
        dynamic_registration: true,
        client_metadata_documents: true,
        allow_loopback_metadata: false,
    };
    let auth = crate::config::AuthConfig {
        resource: RESOURCE.into(),
        login: Some(cfg.clone()),
        ..Default::default()
    };
    let issued = Arc::new(Issued::new(vec![(1, [3; 32])], &cfg.issuer, RESOURCE));
    let d = Duration::from_secs(1);
    let http = HttpClient::new(d, d, 1 << 16, 1 << 16, d);
    Login::new(&cfg, &auth, Arc::new(Store::default()), issued, http, None)
}

async fn client(l: &Login) {
    let c = Client {
        client_id: "c1".into(),
        redirect_uris: vec![REDIRECT.into()],
        client_name: Some("<b>Test</b>".into()),
        origin: Origin::Registered,
    };
    assert!(l.store.put_client(c).await);
}

async fn code(l: &Login, verifier: &str) -> String {
    let code = checks::secret();
    let grant = Code {
        redirect_uri: REDIRECT.into(),
        code_challenge: checks::challenge(verifier),
        grant: super::records::Grant {
            client_id: "c1".into(),
            principal: "alice".into(),
            groups: vec!["eng".into()],
            scope: String::new(),
        },
    };
    assert!(l.store.put_code(hashed(&code), grant).await);
    code
}

fn form(pairs: &[(&str, &str)]) -> Params {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    Params::parse(s.finish().as_bytes())
}

async fn json(r: Response<Body>) -> (StatusCode, serde_json::Value) {
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

fn location(r: &Response<Body>) -> String {
    let l = r.headers().get(http::header::LOCATION).expect("a redirect");
    l.to_str().unwrap().to_owned()
}

async fn exchange(l: &Login, code: &str, verifier: &str) -> (StatusCode, serde_json::Value) {
    let f = form(&[
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", REDIRECT),
        ("client_id", "c1"),
        ("resource", RESOURCE),
    ]);
    json(token::token(l, &f).await).await
}

#[tokio::test]
async fn a_code_gives_a_token_the_bearer_check_takes_and_works_once() {
    let l = login();
    let v = checks::secret();
    let c = code(&l, &v).await;
    let (status, t) = exchange(&l, &c, &v).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    let p = l
        .issued
        .verify(t["access_token"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        (p.id.as_str(), p.groups.clone()),
        ("alice", vec!["eng".to_owned()])
    );
    let (status, again) = exchange(&l, &c, &v).await;
    assert_eq!(
        (status, again["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn a_wrong_verifier_or_redirect_spends_the_code() {
    let l = login();
    let v = checks::secret();
    let c = code(&l, &v).await;
    let (_, bad) = exchange(&l, &c, &checks::secret()).await;
    assert_eq!(bad["error"], "invalid_grant");
    let (_, after) = exchange(&l, &c, &v).await;
    assert_eq!(after["error"], "invalid_grant", "a code is tried once");
    let c = code(&l, &v).await;
    let f = form(&[
        ("grant_type", "authorization_code"),
        ("code", &c),
        ("code_verifier", &v),
        ("redirect_uri", "http://127.0.0.1:4567/other"),
        ("client_id", "c1"),
    ]);
    assert_eq!(
        json(token::token(&l, &f).await).await.1["error"],
        "invalid_grant"
    );
}

async fn refresh(l: &Login, token: &str) -> (StatusCode, serde_json::Value) {
    let f = form(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", token),
        ("client_id", "c1"),
    ]);
    json(token::token(l, &f).await).await
}

#[tokio::test]
async fn a_replayed_refresh_token_revokes_its_family() {
    let l = login();
    let v = checks::secret();
    let (_, t) = exchange(&l, &code(&l, &v).await, &v).await;
    let first = t["refresh_token"].as_str().unwrap().to_owned();
    let (status, next) = refresh(&l, &first).await;
    assert_eq!(status, StatusCode::OK);
    let second = next["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second, "rotated");
    let (_, replay) = refresh(&l, &first).await;
    assert_eq!(replay["error"], "invalid_grant");
    let (_, revoked) = refresh(&l, &second).await;
    assert_eq!(
        revoked["error"], "invalid_grant",
        "the whole family is revoked"
    );
    let f = form(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", "x.y"),
        ("client_id", "c1"),
    ]);
    assert_eq!(
        json(token::token(&l, &f).await).await.1["error"],
        "invalid_grant"
    );
}

fn authorize(pairs: &[(&str, &str)]) -> Params {
    let challenge = checks::challenge(&checks::secret());
    let mut all: Vec<(&str, &str)> = vec![
        ("response_type", "code"),
        ("client_id", "c1"),
        ("redirect_uri", REDIRECT),
        ("state", "s1"),
        ("resource", RESOURCE),
        ("code_challenge_method", "S256"),
    ];
    all.retain(|(k, _)| !pairs.iter().any(|(p, _)| p == k));
    all.extend_from_slice(pairs);
    let mut f = form(&all);
    if !pairs.iter().any(|(k, _)| *k == "code_challenge") {
        f = form(&[all.as_slice(), &[("code_challenge", challenge.as_str())]].concat());
    }
    f
}

#[tokio::test]
async fn authorize_refuses_plain_pkce_a_foreign_resource_and_an_unregistered_redirect() {
    let l = login();
    client(&l).await;
    let plain = authorize::start(&l, None, &authorize(&[("code_challenge_method", "plain")])).await;
    let to = location(&plain);
    assert!(
        to.starts_with(REDIRECT) && to.contains("error=invalid_request") && to.contains("state=s1"),
        "{to}"
    );
    let other = authorize::start(
        &l,
        None,
        &authorize(&[("resource", "https://other.example/mcp")]),
    )
    .await;
    assert!(location(&other).contains("error=invalid_target"));
    let stray = authorize::start(
        &l,
        None,
        &authorize(&[("redirect_uri", "https://evil.example/cb")]),
    )
    .await;
    assert_eq!(stray.status(), StatusCode::BAD_REQUEST);
    assert!(
        stray.headers().get(http::header::LOCATION).is_none(),
        "never sent to an unregistered URI"
    );
    let unknown = authorize::start(&l, None, &authorize(&[("client_id", "nobody")])).await;
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn errors_go_back_unattended_only_to_a_native_redirect_and_long_parameters_are_refused() {
    let l = login();
    client(&l).await;
    let web = Client {
        client_id: "c2".into(),
        redirect_uris: vec!["https://app.example/cb".into()],
        client_name: None,
        origin: Origin::Registered,
    };
    assert!(l.store.put_client(web).await);
    // An https redirect gets the error as a page: no unattended hop to a URI anyone registers.
    let q = authorize(&[
        ("client_id", "c2"),
        ("redirect_uri", "https://app.example/cb"),
        ("response_type", "token"),
    ]);
    let page = authorize::start(&l, None, &q).await;
    assert_eq!(page.status(), StatusCode::BAD_REQUEST);
    assert!(page.headers().get(http::header::LOCATION).is_none());
    // A loopback one (a native host) gets the redirect.
    let native = authorize::start(&l, None, &authorize(&[("response_type", "token")])).await;
    assert!(location(&native).contains("error=unsupported_response_type"));
    // A state over 1 KiB is refused with a page, before anything is kept.
    let long = "s".repeat(authorize::MAX_PARAM + 1);
    let r = authorize::start(&l, None, &authorize(&[("state", long.as_str())])).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.headers().get(http::header::LOCATION).is_none());
}

#[tokio::test]
async fn the_consent_page_escapes_the_client_and_needs_its_cookie() {
    let l = login();
    client(&l).await;
    let port = authorize::start(
        &l,
        None,
        &authorize(&[("redirect_uri", "http://127.0.0.1:9999/cb")]),
    )
    .await;
    assert_eq!(
        port.status(),
        StatusCode::OK,
        "a loopback redirect on another port"
    );
    let cookie = port
        .headers()
        .get(http::header::SET_COOKIE)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"));
    let html = String::from_utf8(
        port.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(html.contains("&lt;b&gt;Test&lt;/b&gt;") && !html.contains("<b>Test"));
    let id = html
        .split("name=\"pending\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let f = form(&[("pending", id), ("decision", "allow")]);
    let without = authorize::consent(&l, &http::HeaderMap::new(), &f).await;
    assert_eq!(without.status(), StatusCode::BAD_REQUEST, "another browser");
    let mut h = http::HeaderMap::new();
    let forged = format!("{}=forged", web::cookie_name(id));
    h.insert(http::header::COOKIE, forged.parse().unwrap());
    assert_eq!(
        authorize::consent(&l, &h, &f).await.status(),
        StatusCode::BAD_REQUEST
    );
    let value = cookie.split(';').next().unwrap();
    h.insert(http::header::COOKIE, value.parse().unwrap());
    // The IdP's redirect back without the cookie is refused and spends nothing.
    let back = form(&[("state", id), ("code", "x")]);
    let stray = authorize::callback(&l, &http::HeaderMap::new(), &back).await;
    assert_eq!(stray.status(), StatusCode::BAD_REQUEST);
    assert!(l.store.pending(&hashed(id)).await.is_some(), "still there");
    let deny = form(&[("pending", id), ("decision", "deny")]);
    let denied = authorize::consent(&l, &h, &deny).await;
    assert!(location(&denied).contains("error=access_denied"));
}

#[tokio::test]
async fn an_operator_lists_and_ends_a_principals_sign_ins_in_one_process() {
    use super::records::{Family, Grant};
    let store = Store::default();
    for (who, client) in [("alice", "c1"), ("alice", "c2"), ("bob", "c3")] {
        let grant = Grant {
            client_id: client.into(),
            principal: who.into(),
            groups: Vec::new(),
            scope: String::new(),
        };
        let f = Family {
            grant,
            current: hashed(client),
            revoked: false,
        };
        assert!(
            store
                .put_family(
                    hashed(&format!("{who}{client}")),
                    f,
                    Duration::from_secs(60)
                )
                .await
        );
    }
    let mut held = store.sign_ins("alice", 10).await.expect("listed");
    held.sort();
    assert_eq!(held, [("c1".to_owned(), false), ("c2".to_owned(), false)]);
    let revoked = crate::auth::revoked::Revoked::default();
    let n = super::revocations::revoke(&store, &revoked, None, "alice").await;
    assert_eq!(n, Ok(2));
    assert!(store
        .sign_ins("alice", 10)
        .await
        .expect("listed")
        .iter()
        .all(|(_, r)| *r));
    assert_eq!(
        store.sign_ins("bob", 10).await.expect("listed"),
        [("c3".to_owned(), false)]
    );
    let now = crate::state::now_ms();
    assert!(revoked.refuses("alice", now - 1) && !revoked.refuses("alice", now + 1000));
    assert!(!revoked.refuses("bob", now));
    let turn = store
        .rotate(&hashed("alicec1"), &hashed("c1"), &hashed("n"), "c1")
        .await;
    assert_eq!(turn, super::records::Turn::Revoked);
}
