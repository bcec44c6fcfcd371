//! The token vault across replicas (issue 31), with real parts: the company IdP
//! (`oidc-provider`, tests/peers/idp.mjs) as the authorization server of an MCP server it
//! protects (the TypeScript SDK's, tests/peers/protected_server.cjs), three replicas sharing
//! one Redis. Alice signs in through replica 1 (its own callback; Sluice registers itself at
//! the IdP by Dynamic Client Registration); replica 2, which never saw her sign in, calls the
//! server as her; once her token is due, twelve calls at once on the three replicas cause one
//! refresh at the IdP (its grant counter); `sluice tokens list` shows her entry without a
//! token, `sluice tokens revoke` drops it and every replica asks her to sign in again within
//! `RECHECK`. No access token (a JWT: `eyJ…`) appears in any replica's output.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::harness::{free_port, Cluster, Redis, Setup, ALICE, BOB};
use crate::support::call::{http, Call};
use crate::support::peers::peer_env;

/// A node peer of tests/peers, started with `args`; gives it and its first line starting with
/// `ready` (the rest of its output is drained).
pub(super) async fn node(
    script: &str,
    args: &[&str],
    ready: &str,
) -> (tokio::process::Child, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/").to_owned() + script;
    let mut child = tokio::process::Command::new(peer_env("SLUICE_NODE22"))
        .arg(path)
        .args(args)
        .env("SLUICE_OIDC_PROVIDER", peer_env("SLUICE_OIDC_PROVIDER"))
        .env("NODE_PATH", peer_env("SLUICE_TS_SDK1"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(rest) = l.strip_prefix(ready) {
                return Some(rest.trim().to_owned());
            }
        }
        None
    })
    .await;
    let line = first
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{script} did not print its {ready} line within 30 s"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, line)
}

/// Opens `url` as `user`'s browser would (the IdP's sign-in and consent forms, then the
/// redirect back to Sluice); gives what the callback answered.
async fn browse(url: &str, user: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/idp_user.mjs");
    let out = tokio::process::Command::new(peer_env("SLUICE_NODE22"))
        .args([script, "browse", url, user])
        .output()
        .await
        .expect("run idp_user.mjs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("BROWSED "));
    let line = line.unwrap_or_else(|| {
        panic!(
            "idp_user.mjs browse: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(line).expect("BROWSED JSON")
}

async fn refreshes(counts: &str) -> u64 {
    let c: Value = http()
        .get(counts)
        .send()
        .await
        .expect("IdP counts")
        .json()
        .await
        .expect("JSON");
    c["refresh_token"].as_u64().unwrap_or(0)
}

/// Calls `corp__whoami` on `addr` as Alice; gives the subject the server saw, or the error.
async fn whoami(addr: &str) -> Result<String, Value> {
    whoami_as(addr, ALICE).await
}

/// The same as the principal of API key `key`.
async fn whoami_as(addr: &str, key: &str) -> Result<String, Value> {
    let url = format!("http://{addr}/mcp");
    let r = Call::new("corp__whoami", json!({}))
        .token(key)
        .caps(json!({}));
    let reply = r.send(&http(), &url, json!({})).await;
    let text = reply.msg["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_owned);
    let seen: Option<Value> = text.and_then(|t| serde_json::from_str(&t).ok());
    match seen.as_ref().and_then(|s| s["sub"].as_str()) {
        Some(sub) => Ok(sub.to_owned()),
        None => Err(reply.msg),
    }
}

async fn sluice_tokens(args: &[&str], config: &std::path::Path) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("tokens")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .await
        .expect("run sluice tokens");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sluice tokens {args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sign_in_through_one_replica_serves_every_replica_refreshes_once_and_is_revoked() {
    let redis = Redis::start().await;
    let args = [
        "--access-ttl",
        "10",
        "--sluice-audience",
        "http://127.0.0.1:9/unused",
    ];
    let (_idp, line) = node("idp.mjs", &args, "IDP ").await;
    let idp: Value = serde_json::from_str(&line).expect("IDP JSON");
    let issuer = idp["issuer"].as_str().expect("issuer").to_owned();
    let counts = format!("{issuer}/test/counts");
    let (_server, port) = node("protected_server.cjs", &[&issuer], "LISTENING ").await;
    // Browsers come back through the load balancer, to whichever replica it picks.
    let balancer = free_port();
    let upstream = format!(
        "[[upstream]]\nname = \"corp\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nera = \"2025-11-25\"\n[upstream.auth]\nmode = \"oauth\"\nredirect_uri = \"http://127.0.0.1:{balancer}/oauth/callback\"\n"
    );
    let setup = Setup {
        top: "prefix = \"always\"\n".into(),
        extra: upstream,
        on_redis_error: "closed",
        upstreams: Vec::new(),
        cluster: String::new(),
    };
    let cluster = Cluster::start_on(&redis, &setup, Some(balancer)).await;
    let (r1, r2) = (
        cluster.replica(0).addr.clone(),
        cluster.replica(1).addr.clone(),
    );

    // Signed out: replica 1 answers with the URL to sign in at (no URL elicitation declared);
    // two sign-ins, so that round robin brings at least one back to another replica.
    for (key, user) in [(BOB, "bob"), (ALICE, "alice")] {
        let refused = whoami_as(&r1, key).await.expect_err("signed out");
        assert_eq!(refused["error"]["code"], -31040, "{refused}");
        let url = refused["error"]["data"]["url"].as_str().expect("data.url");
        let back = browse(url, user).await;
        assert_eq!(back["status"], 200, "the callback: {back}");
    }
    let signed = "a user signed in to the upstream";
    let finished = |i: usize| cluster.replica(i).output().matches(signed).count();
    assert_eq!(finished(0) + finished(1) + finished(2), 2);
    assert!(
        finished(0) < 2,
        "both callbacks on the replica that gave the URLs"
    );
    assert_eq!(whoami_as(&r2, BOB).await, Ok("bob".to_owned()));
    // Replica 2 never saw that sign-in: it reads Alice's token from the vault.
    let seen = whoami(&r2).await;
    assert_eq!(
        seen,
        Ok("alice".to_owned()),
        "{}",
        cluster.replica(1).output()
    );
    assert_eq!(whoami(&r1).await, Ok("alice".to_owned()));
    let signed_in = Instant::now();

    let config = cluster.replica(0).config_path();
    let listed = sluice_tokens(&["list"], &config).await;
    let row = listed
        .lines()
        .find(|l| l.starts_with("alice\tcorp\t"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("\tyes\t") && row.contains(&issuer), "{row}");
    assert!(!listed.contains("eyJ"), "a token is listed: {listed}");

    // Due (nine tenths of 10 s): twelve calls at once on three replicas, one refresh.
    let before = refreshes(&counts).await;
    tokio::time::sleep(
        (signed_in + Duration::from_millis(9_300)).saturating_duration_since(Instant::now()),
    )
    .await;
    let calls = (0..12).map(|i| {
        let addr = cluster.replica(i % 3).addr.clone();
        tokio::spawn(async move { whoami(&addr).await })
    });
    for c in calls {
        assert_eq!(c.await.expect("a call"), Ok("alice".to_owned()));
    }
    assert_eq!(refreshes(&counts).await - before, 1, "refreshes at the IdP");

    let revoked = sluice_tokens(&["revoke", "--principal", "alice"], &config).await;
    assert!(revoked.starts_with("revoked 1 token"), "{revoked}");
    // Every replica asks her to sign in again within RECHECK (2 s).
    let deadline = Instant::now() + Duration::from_secs(6);
    for addr in [&r1, &r2] {
        loop {
            match whoami(addr).await {
                Err(e) if e["error"]["code"] == -31040 => break,
                other => assert!(
                    Instant::now() < deadline,
                    "still served after revoke: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for i in 0..3 {
        let out = cluster.replica(i).output();
        assert!(!out.contains("eyJ"), "a JWT in replica {}'s output", i + 1);
    }
}
