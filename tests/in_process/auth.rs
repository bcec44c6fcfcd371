//! Authentication through Sluice: API keys and JWT bearer tokens, the RFC 9728 resource
//! metadata and its challenges, and per-upstream scopes.

use std::net::SocketAddr;

use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::{json, Value};
use sluice::config::{Config, Overrides};

use crate::support::gateway::{strings, ApiKey, Gateway, Upstream};

const ALICE_KEY: &str = "alice-secret-key-0123456789";
const BOB_KEY: &str = "bob-secret-key-9876543210";

async fn gateway(
    extra: impl FnOnce(Gateway) -> Gateway,
) -> (
    sluice::Running,
    sluice_testkit::demo::upstream::DemoUpstream,
) {
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let up = sluice_testkit::demo::upstream::start("alpha", any)
        .await
        .unwrap();
    let g = Gateway::new()
        .named("test")
        .set("auth", "resource", "http://gw.test/mcp")
        .set(
            "auth",
            "authorization_servers",
            strings(&["https://auth.test"]),
        )
        .api_key(ApiKey::new(ALICE_KEY, "alice").scopes(&["mcp"]))
        .api_key(ApiKey::new(BOB_KEY, "bob"))
        .upstream_spec(Upstream::new("alpha", &up.url()).key("required_scopes", strings(&["mcp"])));
    (extra(g).start().await, up)
}

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {"a": 1, "b": 2},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
}

async fn post(url: &str, token: Option<&str>, body: &Value) -> reqwest::Response {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", body["method"].as_str().unwrap());
    if let Some(n) = body["params"]["name"].as_str() {
        r = r.header("mcp-name", n);
    }
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    r.body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn a_request_without_credentials_gets_401_with_the_resource_metadata_challenge() {
    let (gw, _up) = gateway(|g| g).await;
    let r = post(&gw.url(), None, &call(1, "add")).await;
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"http://gw.test/.well-known/oauth-protected-resource/mcp\""
    );
    let meta: Value = reqwest::get(format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        gw.addr
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(meta["resource"], "http://gw.test/mcp");
    assert_eq!(meta["authorization_servers"], json!(["https://auth.test"]));
    let root: Value = reqwest::get(format!(
        "http://{}/.well-known/oauth-protected-resource",
        gw.addr
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(root, meta);
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_api_key_gets_401_invalid_token() {
    let (gw, _up) = gateway(|g| g).await;
    let r = post(&gw.url(), Some("nope"), &call(1, "add")).await;
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("error=\"invalid_token\""));
    gw.stop().await;
}

#[tokio::test]
async fn an_api_key_principal_with_the_upstream_scope_is_served_and_one_without_gets_403() {
    let (gw, _up) = gateway(|g| g).await;
    let r = post(&gw.url(), Some(ALICE_KEY), &call(1, "add")).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["content"][0]["text"], "3");
    let r = post(&gw.url(), Some(BOB_KEY), &call(2, "add")).await;
    assert_eq!(r.status(), 403);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp\""),
        "{challenge}"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["id"].as_u64(), v["error"]["code"].as_i64()),
        (Some(2), Some(-31003))
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_clients_token_never_reaches_the_upstream() {
    // The demo upstream echoes nothing of headers; instead check with a raw listener.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(tokio::sync::Mutex::new(String::new()));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let seen = seen2.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                seen.lock().await.push_str(&req);
                let body = if req.contains("server/discover") {
                    r#"{"jsonrpc":"2.0","id":"x","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}}"#
                } else if req.contains("tools/list") {
                    r#"{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"add","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"private"}}"#
                } else {
                    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#
                };
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    let mut headers = toml::Table::new();
    headers.insert("X-Upstream-Key".into(), "upstream-cred".into());
    let gw = Gateway::new()
        .named("test")
        .api_key(ApiKey::new(ALICE_KEY, "alice"))
        .upstream_spec(Upstream::new("raw", &format!("http://{addr}/mcp")).key("headers", headers))
        .start()
        .await;
    let r = post(&gw.url(), Some(ALICE_KEY), &call(1, "add")).await;
    assert_eq!(r.status(), 200);
    let seen = seen.lock().await.clone();
    assert!(seen.contains("tools/call"));
    assert!(!seen.contains(ALICE_KEY), "the client's key went upstream");
    assert!(!seen.to_ascii_lowercase().contains("authorization:"));
    assert!(seen
        .to_ascii_lowercase()
        .contains("x-upstream-key: upstream-cred"));
    gw.stop().await;
}

fn jwt(claims: Value) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(b"0123456789abcdef0123456789abcdef").unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn jwt_bearer_tokens_are_checked_for_issuer_audience_and_expiry() {
    let dir = std::env::temp_dir().join(format!("sluice-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("jwt.secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    let jwt_cfg = |g: Gateway| {
        g.set("auth.jwt", "issuer", "https://auth.test")
            .set(
                "auth.jwt",
                "hs256_secret_file",
                secret.display().to_string(),
            )
            .set("auth.jwt", "leeway_ms", 1000)
    };
    let (gw, _up) = gateway(jwt_cfg).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let good = jwt(
        json!({"sub": "carol", "iss": "https://auth.test", "aud": "http://gw.test/mcp", "exp": now + 60, "scope": "mcp"}),
    );
    assert_eq!(
        post(&gw.url(), Some(&good), &call(1, "add")).await.status(),
        200
    );
    for (why, token) in [
        (
            "wrong audience",
            jwt(
                json!({"sub": "carol", "iss": "https://auth.test", "aud": "http://other/mcp", "exp": now + 60, "scope": "mcp"}),
            ),
        ),
        (
            "expired",
            jwt(
                json!({"sub": "carol", "iss": "https://auth.test", "aud": "http://gw.test/mcp", "exp": now - 120, "scope": "mcp"}),
            ),
        ),
        (
            "wrong issuer",
            jwt(
                json!({"sub": "carol", "iss": "https://evil.test", "aud": "http://gw.test/mcp", "exp": now + 60}),
            ),
        ),
    ] {
        let r = post(&gw.url(), Some(&token), &call(2, "add")).await;
        assert_eq!(r.status(), 401, "{why}");
        let challenge = r.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains(
                "resource_metadata=\"http://gw.test/.well-known/oauth-protected-resource/mcp\""
            ),
            "{why}: {challenge}"
        );
    }
    gw.stop().await;
}

#[test]
fn auth_none_is_refused_on_a_non_loopback_listener() {
    let err = Config::from_toml(
        "listen = \"0.0.0.0:8080\"\n",
        "sluice.toml",
        &Overrides::default(),
    )
    .unwrap_err()
    .0;
    assert!(
        err.contains("not loopback") && err.contains("[auth]"),
        "{err}"
    );
}

#[tokio::test]
async fn with_api_keys_only_nothing_advertises_oauth() {
    // No authorization server configured: an OAuth-aware client (mcp-remote, the Inspector)
    // must not be sent looking for a sign-in that does not exist.
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let up = sluice_testkit::demo::upstream::start("alpha", any)
        .await
        .unwrap();
    let gw = Gateway::new()
        .named("test")
        .api_key(ApiKey::new(ALICE_KEY, "alice"))
        .upstream_spec(Upstream::new("alpha", &up.url()))
        .start()
        .await;
    for token in [None, Some("nope")] {
        let r = post(&gw.url(), token, &call(1, "add")).await;
        assert_eq!(r.status(), 401);
        let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains("realm=\"sluice\""),
            "{challenge}"
        );
        assert!(!challenge.contains("resource_metadata"), "{challenge}");
    }
    let paths = [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ];
    for path in paths
        .into_iter()
        .chain(["/register", "/.well-known/openid-configuration"])
    {
        let r = reqwest::get(format!("http://{}{path}", gw.addr))
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
        assert!(r.text().await.unwrap().contains("API key"), "{path}");
    }
    assert_eq!(
        post(&gw.url(), Some(ALICE_KEY), &call(2, "add"))
            .await
            .status(),
        200
    );
    gw.stop().await;
}
