//! `[auth.login]` across replicas (issue 32): two `sluice serve` processes sharing one Redis
//! and the `[state]` keys, the company IdP (`oidc-provider`, tests/peers/idp.mjs), and the
//! TypeScript SDK's OAuth client (tests/peers/login_client.cjs). The host signs in through
//! replica 1 (Sluice's issuer); replica 2, which saw nothing of it, takes its access token as
//! the user and rotates its refresh token (the chain is in Redis); the rotated token presented
//! again at replica 1 revokes the sign-in, so replica 2 refuses the newest one too; an operator's
//! `sluice tokens revoke-sign-ins` ends a later sign-in for both.

use serde_json::{json, Value};

use super::harness::{free_port, Redis};
use super::vault::node;
use crate::support::call::{http, Call};
use crate::support::peers::{peer_env, script};
use crate::support::process::{Env, Sluice};

const SECRET_VAR: &str = "SLUICE_TEST_LOGIN_REPLICAS_SECRET";
const SECRET: &str = "idp-client-s3cret-for-login-replicas";
const OPS: &str = "login-replicas-admin-key-0123456789";

fn config(id: &str, redis: &str, issuer: &str, idp: &str, upstream: &str) -> String {
    format!(
        r#"listen = "127.0.0.1:0"
prefix = "always"

[state]
keys = ["1:{key}"]

[cluster]
redis_url = "{redis}"
id = "{id}"
listen = "127.0.0.1:0"
on_redis_error = "closed"

[auth]
resource = "{issuer}/mcp"

[auth.login]
issuer = "{issuer}"
idp_issuer = "{idp}"
idp_client_id = "sluice"
idp_client_secret_env = "{SECRET_VAR}"

[admin]
listen = "127.0.0.1:0"
keys = [{{ name = "ops", sha256 = "{ops}" }}]

[[upstream]]
name = "demo"
url = "{upstream}"
"#,
        ops = sluice::auth::api_keys::hash_key(OPS),
        key = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio="
    )
}

async fn refresh(token_url: &str, token: &str, client: &str) -> (u16, Value) {
    let mut form = String::new();
    for (k, v) in [
        ("grant_type", "refresh_token"),
        ("refresh_token", token),
        ("client_id", client),
    ] {
        let v: String = v
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        form.push_str(&format!(
            "{}{k}={v}",
            if form.is_empty() { "" } else { "&" }
        ));
    }
    let r = http()
        .post(token_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .expect("POST /token");
    (r.status().as_u16(), r.json().await.expect("JSON"))
}

/// The host signs in through `issuer` (replica 1) as alice and calls a tool: its summary, with
/// its tokens.
async fn sign_in(issuer: &str, r1: &Sluice) -> Value {
    let plan = json!({"url": format!("{issuer}/mcp"), "user": "alice", "tool": "demo__echo",
        "arguments": {"text": "via r1"}, "reveal": true});
    let out = tokio::process::Command::new(peer_env("SLUICE_NODE22"))
        .arg(script("login_client.cjs"))
        .arg(plan.to_string())
        .env("NODE_PATH", peer_env("SLUICE_TS_SDK1"))
        .output()
        .await
        .expect("run login_client.cjs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let s: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .map(|l| serde_json::from_str(l).expect("SUMMARY JSON"))
        .unwrap_or_else(|| panic!("{text} {}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{s}\n--- r1\n{}", r1.output());
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sign_in_through_one_replica_holds_on_the_other_and_a_replay_revokes_it_on_both() {
    let redis = Redis::start().await;
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream");
    let port = free_port();
    let issuer = format!("http://127.0.0.1:{port}");
    let callback = format!("{issuer}/login/callback");
    let args = ["--client-secret", SECRET, "--redirect-uri", &callback];
    let (_idp, line) = node("idp.mjs", &args, "IDP ").await;
    let idp: Value = serde_json::from_str(&line).expect("IDP JSON");
    let idp = idp["issuer"].as_str().expect("issuer").to_owned();
    let env = Env::new().set(SECRET_VAR, SECRET);
    let mut replicas = Vec::new();
    for (id, listen) in [("r1", Some(port)), ("r2", None)] {
        let text = config(id, &redis.url(), &issuer, &idp, &demo.url());
        let args: Vec<String> = listen.map_or_else(Vec::new, |p| {
            vec!["--listen".into(), format!("127.0.0.1:{p}")]
        });
        let s = match Sluice::spawn_with(&text, &env, &args).await {
            Ok(s) => s,
            Err(e) => panic!("{id} did not start: {}", e.output),
        };
        s.ready().await;
        replicas.push(s);
    }
    let (r1, r2) = (&replicas[0], &replicas[1]);

    // The host signs in through replica 1.
    let s = sign_in(&issuer, r1).await;
    let access = s["tokens"]["access"].as_str().expect("access").to_owned();
    let first = s["tokens"]["refresh"].as_str().expect("refresh").to_owned();
    let client = s["tokens"]["client_id"]
        .as_str()
        .expect("client_id")
        .to_owned();

    // Replica 2 takes the token replica 1 issued, as alice.
    let reply = Call::new("demo__echo", json!({"text": "via r2"}))
        .token(&access)
        .caps(json!({}))
        .send(&http(), &format!("http://{}/mcp", r2.addr), json!({}))
        .await;
    let echoed = reply.msg["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        echoed.contains("via r2"),
        "{}\n--- r2\n{}",
        reply.msg,
        r2.output()
    );
    // Its audit record names alice (written by the audit task: waited for).
    r2.logged(r#""principal":"alice""#, 1).await;

    // The refresh token rotates at replica 2; the rotated one replayed at replica 1 revokes
    // the sign-in, so replica 2 refuses the newest one.
    let (status, next) = refresh(&format!("http://{}/token", r2.addr), &first, &client).await;
    assert_eq!(status, 200, "{next}\n--- r2\n{}", r2.output());
    let second = next["refresh_token"].as_str().expect("rotated").to_owned();
    assert_ne!(second, first);
    let (status, replay) = refresh(&format!("{issuer}/token"), &first, &client).await;
    assert_eq!(
        (status, replay["error"].as_str()),
        (400, Some("invalid_grant")),
        "{replay}"
    );
    let (status, revoked) = refresh(&format!("http://{}/token", r2.addr), &second, &client).await;
    assert_eq!(
        (status, revoked["error"].as_str()),
        (400, Some("invalid_grant")),
        "{revoked}"
    );

    // An operator ends alice's sign-ins (a new one here): its refresh token is refused at once.
    let again = sign_in(&issuer, r1).await;
    let fresh = again["tokens"]["refresh"]
        .as_str()
        .expect("refresh")
        .to_owned();
    let client2 = again["tokens"]["client_id"]
        .as_str()
        .expect("client_id")
        .to_owned();
    let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "tokens",
            "revoke-sign-ins",
            "--principal",
            "alice",
            "--config",
        ])
        .arg(r1.config_path())
        .output()
        .await
        .expect("run sluice tokens revoke-sign-ins");
    let said = String::from_utf8_lossy(&cli.stdout).into_owned();
    assert!(
        cli.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(said.starts_with("revoked 2 sign-in(s) of alice"), "{said}");
    let (status, ended) = refresh(&format!("http://{}/token", r2.addr), &fresh, &client2).await;
    assert_eq!(
        (status, ended["error"].as_str()),
        (400, Some("invalid_grant")),
        "{ended}"
    );
    assert!(
        ended["error_description"]
            .as_str()
            .unwrap_or_default()
            .contains("revoked"),
        "{ended}"
    );

    // Through r2's admin API an operator lists alice's sign-ins and ends a new one: its access
    // token is refused at once on r2 and within two seconds on r1, its refresh token too.
    let third = sign_in(&issuer, r1).await;
    let access3 = third["tokens"]["access"]
        .as_str()
        .expect("access")
        .to_owned();
    let admin = admin_url(r2);
    let listed: Value = http()
        .get(format!("{admin}/admin/v1/sign-ins?principal=alice"))
        .bearer_auth(OPS)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("JSON");
    let live: Vec<&Value> = listed["sign_ins"]
        .as_array()
        .expect("sign_ins")
        .iter()
        .filter(|s| s["revoked"] == false)
        .collect();
    assert_eq!(live.len(), 1, "{listed}");
    assert_eq!(live[0]["client"], third["tokens"]["client_id"], "{listed}");
    assert!(
        !listed.to_string().contains(&access3),
        "no token in the listing"
    );
    let ended: Value = http()
        .post(format!("{admin}/admin/v1/sign-ins/revoke"))
        .bearer_auth(OPS)
        .json(&json!({"principal": "alice"}))
        .send()
        .await
        .expect("revoke")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        (&ended["revoked"], &ended["operator"]),
        (&json!(1), &json!("ops")),
        "{ended}"
    );
    let call = |at: String| {
        let token = access3.clone();
        async move {
            Call::new("demo__echo", json!({"text": "after"}))
                .token(&token)
                .caps(json!({}))
                .send(&http(), &at, json!({}))
                .await
        }
    };
    let here = call(format!("http://{}/mcp", r2.addr)).await;
    assert_eq!(here.status, 401, "{}", here.msg);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let there = call(format!("{issuer}/mcp")).await;
        if there.status == 401 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "r1 still takes the token: {}",
            there.msg
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // No code, token, verifier or cookie of the sign-in in either replica's output.
    let canaries: Vec<String> = s["canaries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    let mut all: Vec<&str> = canaries.iter().map(String::as_str).collect();
    all.extend([
        second.as_str(),
        fresh.as_str(),
        access3.as_str(),
        SECRET,
        OPS,
    ]);
    for r in [r1, r2] {
        r.assert_no_leak(&all);
    }
}

/// A replica's admin listener, from its startup line.
fn admin_url(r: &Sluice) -> String {
    let out = crate::support::process::strip_ansi(&r.output());
    let addr = out
        .lines()
        .find(|l| l.contains("admin listener up"))
        .and_then(|l| l.split("admin=").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .expect("the admin listener's line")
        .to_owned();
    format!("http://{addr}")
}
