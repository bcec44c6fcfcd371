//! `[auth.login]` against real parts (issue 32): `oidc-provider` (npm, a certified OpenID
//! provider) as the company's IdP (tests/peers/idp.mjs, Sluice registered there as the
//! confidential client `sluice` with its `/login/callback`), the `sluice` binary as the
//! authorization server and gateway, and the TypeScript SDK's client with an OAuth
//! `authProvider` as the MCP host (tests/peers/login_client.cjs): the SDK finds Sluice's
//! authorization server from the 401, registers, and sends the user to `/authorize`; the
//! script's browser consents at Sluice and signs in at the IdP's forms; the SDK exchanges the
//! code and calls a tool through Sluice as the signed-in user. The same with mcp-remote (over
//! stdio) and the Python SDK's host (tests/peers/py_login_client.py), and the conformance
//! suite's authorization server scenarios.

use std::process::Command;

use serde_json::Value;

use super::token_exchange::{node, Node};
use crate::support::peers::{peer_env, script};
use crate::support::process::{Env, Sluice};

const SECRET_VAR: &str = "SLUICE_TEST_LOGIN_IDP_SECRET";
const SECRET: &str = "idp-client-s3cret-for-sluice-login";

/// A free loopback port (Sluice's issuer must name its port before it listens).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("its address").port()
}

/// The IdP, with Sluice's callback at `port` registered for the client `sluice`.
fn idp(port: u16) -> (Node, String) {
    let mut cmd = node();
    cmd.arg(script("idp.mjs"))
        .args(["--client-secret", SECRET, "--groups", "alice=eng,ops"])
        .args([
            "--redirect-uri",
            &format!("http://127.0.0.1:{port}/login/callback"),
        ])
        .env("SLUICE_OIDC_PROVIDER", peer_env("SLUICE_OIDC_PROVIDER"));
    let idp = Node::start(&mut cmd);
    let ready: Value = serde_json::from_str(&idp.wait("IDP ")).expect("the IDP line's JSON");
    let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
    (idp, issuer)
}

fn config(issuer: &str, upstream: &str) -> String {
    format!(
        r#"listen = "127.0.0.1:0"
prefix = "always"

[auth.login]
idp_issuer = "{issuer}"
idp_client_id = "sluice"
idp_client_secret_env = "{SECRET_VAR}"
idp_scopes = ["groups"]

[[upstream]]
name = "demo"
url = "{upstream}"
"#
    )
}

/// Runs the host with `plan`: its summary.
fn host(plan: Value) -> (bool, Value, String) {
    let out = Command::new(peer_env("SLUICE_NODE22"))
        .arg(script("login_client.cjs"))
        .arg(plan.to_string())
        .env("NODE_PATH", peer_env("SLUICE_TS_SDK1"))
        .output()
        .expect("run login_client.cjs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = text.lines().find_map(|l| l.strip_prefix("SUMMARY "));
    let summary = line.map_or(Value::Null, |l| {
        serde_json::from_str(l).expect("SUMMARY JSON")
    });
    (
        out.status.success(),
        summary,
        format!("{text}\n--- stderr\n{err}"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_host_signs_in_through_the_company_idp_and_calls_a_tool() {
    let (_idp, _demo, sluice, port) = front().await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let plan = serde_json::json!({
        "url": url, "user": "alice", "tool": "demo__echo",
        "arguments": {"text": "hello through the login"}, "replay": true,
    });
    let (ok, s, out) = host(plan);
    assert!(ok, "{out}\n--- sluice\n{}", sluice.output());
    let steps = strs(&s["steps"]);
    for step in [
        "unauthorized",
        "registered",
        "sent to authorize",
        "consented at Sluice",
        "signed in at the IdP",
        "tokens saved",
        "connected",
    ] {
        assert!(steps.contains(&step), "no step {step:?}: {steps:?}");
    }
    // Sluice's own token: for its resource, the IdP's user and the groups of their ID token.
    let token = &s["token"];
    assert_eq!(token["iss"], format!("http://127.0.0.1:{port}"), "{s}");
    assert_eq!(token["aud"], format!("http://127.0.0.1:{port}/mcp"), "{s}");
    assert_eq!(token["sub"], "alice", "{s}");
    assert_eq!(token["groups"], serde_json::json!(["eng", "ops"]), "{s}");
    let back = format!("back with a code, iss http://127.0.0.1:{port}");
    assert!(steps.iter().any(|s| *s == back), "{steps:?}");
    assert!(
        s["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "demo__echo"),
        "{s}"
    );
    assert!(
        s["text"]
            .as_str()
            .unwrap_or_default()
            .contains("hello through the login"),
        "{s}"
    );
    // A refresh rotates; the rotated token replayed is refused and revokes the family, so the
    // newest one is refused too.
    let refresh: Vec<(u64, Option<&str>)> = s["refresh"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["status"].as_u64().unwrap(), r["error"].as_str()))
        .collect();
    assert_eq!(
        refresh,
        vec![
            (200, None),
            (400, Some("invalid_grant")),
            (400, Some("invalid_grant"))
        ],
        "{s}"
    );
    assert_eq!(s["refresh"][0]["rotated"], true, "{s}");
    // The call went through as the IdP's user (the audit record's principal).
    sluice.logged(r#""principal":"alice""#, 1).await;
    // … and the record names the client Sluice registered for the host (issue 32 item 3).
    sluice.logged(r#""principal":"alice","client":""#, 1).await;
    // The canary: no code, token, verifier or cookie value of the sign-in in Sluice's output.
    let canaries = strs(&s["canaries"]);
    assert!(canaries.len() >= 7, "{s}");
    sluice.assert_no_leak(&canaries);
    sluice.assert_no_leak(&[SECRET]);
}

/// Starts the IdP, a demo upstream and Sluice with `[auth.login]` on a port of its own; gives
/// them and Sluice's port.
async fn front() -> (
    Node,
    sluice_testkit::demo::upstream::DemoUpstream,
    Sluice,
    u16,
) {
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let port = free_port();
    let (idp, issuer) = idp(port);
    let env = Env::new().set(SECRET_VAR, SECRET);
    let listen = vec!["--listen".to_owned(), format!("127.0.0.1:{port}")];
    let sluice = match Sluice::spawn_with(&config(&issuer, &demo.url()), &env, &listen).await {
        Ok(s) => s,
        Err(e) => panic!("sluice did not start: {}", e.output),
    };
    sluice.ready().await;
    (idp, demo, sluice, port)
}

/// The conformance suite's authorization server scenarios against Sluice: its metadata, and
/// the authorization code grant of a client registered beforehand (Dynamic Client
/// Registration), the browser step done by the host script's browser (consent at Sluice,
/// sign-in at the IdP), back to the suite's own callback server.
#[tokio::test(flavor = "multi_thread")]
async fn the_conformance_suite_s_authorization_server_scenarios_pass_against_sluice() {
    use std::io::BufRead as _;
    let (_idp, _demo, sluice, port) = front().await;
    let issuer = format!("http://127.0.0.1:{port}");
    let callback_port = free_port();
    let callback = format!("http://127.0.0.1:{callback_port}/callback");
    let web = reqwest::Client::new();
    let answer = web
        .post(format!("{issuer}/register"))
        .json(&serde_json::json!({"redirect_uris": [callback], "client_name": "conformance"}))
        .send()
        .await
        .expect("POST /register");
    assert_eq!(answer.status().as_u16(), 201);
    // A browser-based host may register and ask for tokens from its own page (CORS).
    assert_eq!(answer.headers()["access-control-allow-origin"], "*");
    let preflight = web
        .request(reqwest::Method::OPTIONS, format!("{issuer}/token"))
        .header("origin", "http://inspector.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("OPTIONS /token");
    assert_eq!(preflight.status().as_u16(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    let reg: Value = answer.json().await.expect("the registration's JSON");
    // The protected resource metadata names Sluice itself as the authorization server.
    let prm: Value = web
        .get(format!("{issuer}/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .expect("GET the resource metadata")
        .json()
        .await
        .expect("its JSON");
    assert_eq!(
        prm["authorization_servers"],
        serde_json::json!([issuer]),
        "{prm}"
    );
    assert_eq!(prm["resource"], format!("{issuer}/mcp"), "{prm}");
    let client_id = reg["client_id"].as_str().expect("client_id").to_owned();
    let mut cli = Command::new(peer_env("SLUICE_NODE22"))
        .arg(peer_env("SLUICE_CONFORMANCE"))
        .args(["authorization", "--url", &issuer, "--client-id", &client_id])
        .args(["--port", &callback_port.to_string()])
        .args(["--resource", &format!("{issuer}/mcp")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("run the conformance suite");
    let mut lines = std::io::BufReader::new(cli.stdout.take().expect("stdout")).lines();
    let (mut seen, mut browsed) = (Vec::new(), false);
    let authorize = format!("{issuer}/authorize?");
    for line in lines.by_ref().map_while(Result::ok) {
        seen.push(line.clone());
        if line.starts_with(&authorize) {
            let plan = serde_json::json!({"browse": line, "user": "bob", "until": callback});
            let (ok, s, out) = host(plan);
            assert!(ok, "{out}\n--- sluice\n{}", sluice.output());
            assert_eq!(
                s["steps"].as_array().unwrap().last().unwrap(),
                "opened the callback: 200",
                "{s}"
            );
            browsed = true;
        }
    }
    seen.extend(lines.map_while(Result::ok));
    let status = cli.wait().expect("the suite ends");
    let text = seen.join("\n");
    assert!(
        status.success() && browsed,
        "{text}\n--- sluice\n{}",
        sluice.output()
    );
    // Both scenarios ran and passed (a skipped grant would not have sent the browser).
    assert!(text.contains("Total: 3 passed, 0 failed"), "{text}");
    assert!(
        text.contains("authorization-code-grant")
            && text.contains("authorization-server-metadata-endpoint"),
        "{text}"
    );
    sluice.assert_no_leak(&[SECRET]);
}

/// mcp-remote (what Claude Desktop runs for a remote server) signs in to Sluice by itself: it
/// registers, prints the authorization URL (no browser here), takes the code at its own
/// callback, and then relays the host's calls with Sluice's token.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_remote_signs_in_through_the_company_idp_and_relays_a_call() {
    let (_idp, _demo, sluice, port) = front().await;
    let dir = crate::support::process::scratch("login-mcp-remote");
    let plan = serde_json::json!({
        "remote": peer_env("SLUICE_MCP_REMOTE"), "callbackPort": free_port(),
        "configDir": dir, "url": format!("http://127.0.0.1:{port}/mcp"), "user": "carol",
        "tool": "demo__echo", "arguments": {"text": "hello through mcp-remote"},
    });
    let (ok, s, out) = host(plan);
    assert!(ok, "{out}\n--- sluice\n{}", sluice.output());
    let steps = strs(&s["steps"]);
    for step in [
        "mcp-remote printed the URL",
        "consented at Sluice",
        "signed in at the IdP",
        "opened mcp-remote's callback: 200",
        "connected",
    ] {
        assert!(steps.contains(&step), "no step {step:?}: {steps:?}");
    }
    let text = s["text"].as_str().unwrap_or_default();
    assert!(text.contains("hello through mcp-remote"), "{s}");
    sluice.logged(r#""principal":"carol""#, 1).await;
    sluice.assert_no_leak(&[SECRET]);
}

/// The Python SDK's host (`mcp==2.3.0`, its `OAuthClientProvider`) signs in the same way and
/// calls a tool on the 2026-07-28 wire.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_host_signs_in_through_the_company_idp_and_calls_a_tool() {
    let (_idp, _demo, sluice, port) = front().await;
    let plan = serde_json::json!({
        "url": format!("http://127.0.0.1:{port}/mcp"), "user": "dave",
        "tool": "demo__echo", "arguments": {"text": "hello from python"},
    });
    let out = Command::new(peer_env("SLUICE_PY2"))
        .arg(script("py_login_client.py"))
        .arg(plan.to_string())
        .output()
        .expect("run py_login_client.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    let s: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .map(|l| serde_json::from_str(l).expect("SUMMARY JSON"))
        .unwrap_or(Value::Null);
    assert!(
        out.status.success(),
        "{text}\n{err}\n--- sluice\n{}",
        sluice.output()
    );
    let steps = strs(&s["steps"]);
    for step in [
        "registered",
        "sent to authorize",
        "consented at Sluice",
        "signed in at the IdP",
        "back with a code",
        "tokens saved",
        "connected",
    ] {
        assert!(steps.contains(&step), "no step {step:?}: {steps:?}");
    }
    assert!(
        s["text"]
            .as_str()
            .unwrap_or_default()
            .contains("hello from python"),
        "{s}"
    );
    sluice.logged(r#""principal":"dave""#, 1).await;
    let canaries = strs(&s["canaries"]);
    assert!(canaries.len() >= 3, "{s}");
    sluice.assert_no_leak(&canaries);
}

/// The strings of a JSON array the host script reported (its steps, its canaries).
fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("the host reported an array")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}
