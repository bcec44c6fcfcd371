//! The relying party and the metadata document fetch against a mock IdP on loopback (a
//! fixed ES256 test key): what an ID token must hold (issuer, audience, nonce, the principal
//! claim), the claim mapping, the `iss` of the answer, and a client's metadata document
//! (its `client_id`, its size, http refused unless allowed, cached).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::clients;
use super::idp::Idp;
use super::store::Store;
use crate::config::LoginConfig;
use crate::upstream::client::HttpClient;

/// A test-only key (generated for these tests; it signs nothing else).
const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEvEZM54cv7W9W3j0
/vlnbvDjX7WPXwz08Zz8Q++nT/qhRANCAAQ2P/FYmh3UCh/7MH0AOWKZ2S8saR2N
pIJ0FDE9H4nbfbXY5E1JHE83qCLHQ68kV4Eo6EYoJ8M2mxYlqHdxdwh5
-----END PRIVATE KEY-----
";
const X: &str = "Nj_xWJod1Aof-zB9ADlimdkvLGkdjaSCdBQxPR-J230";
const Y: &str = "tdjkTUkcTzeoIsdDryRXgSjoRignwzabFiWod3F3CHk";

/// What the mock answers: the ID token's claims, the discovery's issuer, a document.
#[derive(Default)]
struct Script {
    claims: Value,
    issuer: Option<String>,
    document: String,
    fetched: usize,
}

type Shared = Arc<Mutex<Script>>;

fn answer(base: &str, s: &Shared, path: &str) -> Value {
    let mut s = s.lock().unwrap();
    match path {
        "/.well-known/openid-configuration" => json!({
            "issuer": s.issuer.clone().unwrap_or(base.to_owned()),
            "authorization_endpoint": format!("{base}/auth"),
            "token_endpoint": format!("{base}/token"),
            "jwks_uri": format!("{base}/jwks"),
            "authorization_response_iss_parameter_supported": true,
        }),
        "/jwks" => {
            json!({"keys": [{"kty": "EC", "crv": "P-256", "x": X, "y": Y, "kid": "k1", "alg": "ES256", "use": "sig"}]})
        }
        "/token" => {
            let mut h = Header::new(Algorithm::ES256);
            h.kid = Some("k1".into());
            let key = EncodingKey::from_ec_pem(KEY.as_bytes()).unwrap();
            json!({"access_token": "at", "token_type": "Bearer", "id_token": encode(&h, &s.claims, &key).unwrap()})
        }
        _ => {
            s.fetched += 1;
            serde_json::from_str(&s.document).unwrap_or(Value::String(s.document.clone()))
        }
    }
}

/// The mock on a loopback port: its base URL and script.
async fn mock() -> (String, Shared) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let script: Shared = Arc::default();
    let (b, s) = (base.clone(), script.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (b, s) = (b.clone(), s.clone());
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let v = answer(&b, &s, req.uri().path());
                let body = Full::new(Bytes::from(v.to_string()));
                let r = Response::builder().header("content-type", "application/json");
                async move { r.body(body.boxed()) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, svc));
        }
    });
    (base, script)
}

fn cfg(idp: &str) -> LoginConfig {
    LoginConfig {
        issuer: "http://127.0.0.1:8080".into(),
        idp_issuer: idp.into(),
        idp_client_id: "sluice".into(),
        idp_client_secret_env: None,
        idp_scopes: vec!["openid".into()],
        principal_claim: "email".into(),
        groups_claim: "roles".into(),
        access_token_ttl_ms: 600_000,
        refresh_token_ttl_ms: 3_600_000,
        dynamic_registration: true,
        client_metadata_documents: true,
        allow_loopback_metadata: true,
    }
}

fn http() -> HttpClient {
    let d = std::time::Duration::from_secs(2);
    HttpClient::new(d, d, 1 << 20, 1 << 16, d)
}

fn claims(base: &str, aud: &str, nonce: &str) -> Value {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    json!({"iss": base, "aud": aud, "sub": "u1", "email": "alice@example.com", "email_verified": true, "roles": ["eng", "ops"], "nonce": nonce, "exp": exp})
}

#[tokio::test]
async fn an_id_token_is_taken_only_for_sluice_with_the_nonce_sent() {
    let (base, s) = mock().await;
    let (idp, http) = (Idp::new(&cfg(&base), None), http());
    s.lock().unwrap().claims = claims(&base, "sluice", "n1");
    let user = idp.finish(&http, "code", "verifier", "n1").await.unwrap();
    assert_eq!(user.principal, "alice@example.com");
    assert_eq!(user.groups, vec!["eng", "ops"]);
    // An address the IdP did not verify is not a principal.
    let mut unverified = claims(&base, "sluice", "n1");
    unverified["email_verified"] = json!(false);
    s.lock().unwrap().claims = unverified;
    let Err(e) = idp.finish(&http, "code", "verifier", "n1").await else {
        panic!("an unverified email was taken as a principal");
    };
    assert!(e.contains("email_verified"), "{e}");
    s.lock().unwrap().claims = claims(&base, "sluice", "n1");
    let e = idp
        .finish(&http, "code", "verifier", "n2")
        .await
        .err()
        .unwrap();
    assert!(e.contains("nonce"), "{e}");
    s.lock().unwrap().claims = claims(&base, "another-client", "n1");
    assert!(idp.finish(&http, "code", "verifier", "n1").await.is_err());
    s.lock().unwrap().claims = claims("http://elsewhere.example", "sluice", "n1");
    assert!(idp.finish(&http, "code", "verifier", "n1").await.is_err());
    let mut no_email = claims(&base, "sluice", "n1");
    no_email.as_object_mut().unwrap().remove("email");
    s.lock().unwrap().claims = no_email;
    let e = idp
        .finish(&http, "code", "verifier", "n1")
        .await
        .err()
        .unwrap();
    assert!(e.contains("principal_claim"), "{e}");
}

#[tokio::test]
async fn the_idp_answer_must_come_from_the_configured_issuer() {
    let (base, s) = mock().await;
    let (idp, http) = (Idp::new(&cfg(&base), None), http());
    assert!(idp.iss_ok(&http, Some(&base)).await.is_ok());
    assert!(idp
        .iss_ok(&http, Some("http://evil.example"))
        .await
        .is_err());
    assert!(
        idp.iss_ok(&http, None).await.is_err(),
        "the IdP says it sends iss"
    );
    // A discovery document naming another issuer is refused.
    s.lock().unwrap().issuer = Some("http://other.example".into());
    let fresh = Idp::new(&cfg(&base), None);
    let e = fresh
        .authorize_url(&http, "st", "n", "v")
        .await
        .err()
        .unwrap();
    assert!(e.contains("names issuer"), "{e}");
}

#[tokio::test]
async fn a_metadata_document_must_name_itself_and_stay_small() {
    let (base, s) = mock().await;
    let (store, http) = (Store::default(), http());
    let url = format!("{base}/client.json");
    let doc = json!({"client_id": url, "client_name": "Doc", "redirect_uris": ["http://127.0.0.1:5000/cb"]});
    s.lock().unwrap().document = doc.to_string();
    assert!(
        clients::document(&store, &http, &url, false).await.is_err(),
        "http refused"
    );
    assert_eq!(s.lock().unwrap().fetched, 0, "refused before any fetch");
    let c = clients::document(&store, &http, &url, true).await.unwrap();
    assert_eq!(c.redirect_uris, vec!["http://127.0.0.1:5000/cb"]);
    clients::document(&store, &http, &url, true).await.unwrap();
    assert_eq!(s.lock().unwrap().fetched, 1, "cached");
    let other = format!("{base}/other.json");
    assert!(
        clients::document(&store, &http, &other, true)
            .await
            .is_err(),
        "names another client_id"
    );
    let big = format!("{base}/big.json");
    let pad = "x".repeat(clients::MAX_DOCUMENT);
    let doc = json!({"client_id": big, "client_name": pad, "redirect_uris": ["http://127.0.0.1:5000/cb"]});
    s.lock().unwrap().document = doc.to_string();
    let e = clients::document(&store, &http, &big, true)
        .await
        .err()
        .unwrap();
    assert!(e.contains("more than"), "{e}");
}
