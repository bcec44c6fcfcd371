//! `[upstream.auth] mode = "token_exchange"` against real parts (issue 31): `oidc-provider`
//! (npm, a certified OpenID provider) as the company's IdP with the RFC 8693 grant registered
//! (tests/peers/idp.mjs), an MCP server on the TypeScript SDK that takes only the IdP's JWTs
//! issued for itself (tests/peers/protected_server.cjs), and the `sluice` binary between them,
//! its `[auth.jwt]` the IdP's. Users sign in at the IdP's own forms (tests/peers/idp_user.mjs).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::call::{http, Call};
use crate::support::peers::{peer_env, script};
use crate::support::process::{scratch, Env, Sluice};

/// Sluice's resource: the audience of the users' JWTs.
const SLUICE_AUDIENCE: &str = "http://sluice.test/mcp";
const ROBOT_KEY: &str = "robot-api-key-for-token-exchange-tests";
const SECRET_VAR: &str = "SLUICE_TEST_TX_IDP_SECRET";
const SECRET: &str = "idp-client-s3cret-for-sluice";

/// A Node process of the fixture: its stdout lines as they come; it ends when dropped (its
/// stdin closes).
pub(super) struct Node {
    child: Child,
    _stdin: ChildStdin,
    lines: Arc<Mutex<Vec<String>>>,
    next: mpsc::Receiver<String>,
}

impl Node {
    pub(super) fn start(cmd: &mut Command) -> Node {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node");
        let stdin = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, next) = mpsc::channel();
        let all = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                all.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        Node {
            child,
            _stdin: stdin,
            lines,
            next,
        }
    }

    /// The rest of the first line starting with `prefix` (15 s at most).
    pub(super) fn wait(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l[prefix.len()..].to_owned(),
                Ok(_) => {}
                Err(_) => panic!("no line {prefix:?} within 15 s: {:?}", self.lines()),
            }
        }
    }

    pub(super) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn node() -> Command {
    Command::new(peer_env("SLUICE_NODE22"))
}

/// The IdP, its access tokens living `ttl` seconds, writing its JWKS into `dir`; gives it and
/// its issuer.
fn idp(dir: &std::path::Path, ttl: &str) -> (Node, String) {
    let mut cmd = node();
    cmd.arg(script("idp.mjs"))
        .args([
            "--sluice-audience",
            SLUICE_AUDIENCE,
            "--client-secret",
            SECRET,
        ])
        .args(["--access-ttl", ttl, "--jwks-out"])
        .arg(dir.join("jwks.json"))
        .env("SLUICE_OIDC_PROVIDER", peer_env("SLUICE_OIDC_PROVIDER"));
    let idp = Node::start(&mut cmd);
    let ready: Value = serde_json::from_str(&idp.wait("IDP ")).expect("the IDP line's JSON");
    let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
    (idp, issuer)
}

/// The MCP server the IdP protects; gives it and its URL.
fn protected(issuer: &str) -> (Node, String) {
    let mut cmd = node();
    cmd.arg(script("protected_server.cjs"))
        .arg(issuer)
        .env("NODE_PATH", peer_env("SLUICE_TS_SDK1"));
    let server = Node::start(&mut cmd);
    let port = server.wait("LISTENING ");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// `user` signs in at the IdP for Sluice: their access token (a JWT with audience Sluice).
fn sign_in(issuer: &str, user: &str) -> String {
    let out = node()
        .arg(script("idp_user.mjs"))
        .args(["login", issuer, user, SLUICE_AUDIENCE])
        .output()
        .expect("run idp_user.mjs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("TOKENS "));
    let line = line.unwrap_or_else(|| {
        panic!(
            "{user} was not signed in: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let tokens: Value = serde_json::from_str(line).expect("TOKENS JSON");
    tokens["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned()
}

fn config(issuer: &str, jwks: &std::path::Path, upstream: &str) -> String {
    let robot = sluice::auth::api_keys::hash_key(ROBOT_KEY);
    format!(
        r#"listen = "127.0.0.1:0"
prefix = "always"

[timeouts]
connect_ms = 2000
response_ms = 10000

[auth]
resource = "{SLUICE_AUDIENCE}"

[[auth.api_keys]]
sha256 = "{robot}"
principal = "robot"

[auth.jwt]
issuer = "{issuer}"
jwks_file = "{}"

[[upstream]]
name = "internal"
url = "{upstream}"

[upstream.auth]
mode = "token_exchange"
issuer = "{issuer}"
client_id = "sluice"
client_secret_env = "{SECRET_VAR}"
scopes = ["mcp:tools"]
"#,
        jwks.display()
    )
}

/// Calls `internal__whoami` through Sluice with `token`: the status and the answer.
async fn whoami(sluice: &Sluice, token: &str) -> (u16, Value) {
    let r = Call::new("internal__whoami", json!({}))
        .token(token)
        .caps(json!({}))
        .request(&http(), &sluice.url(), json!({}))
        .send()
        .await
        .expect("POST to sluice");
    (r.status().as_u16(), r.json().await.expect("a JSON answer"))
}

/// The grants of `grant_type` the IdP gave so far.
async fn granted(issuer: &str, grant_type: &str) -> u64 {
    let counts: Value = reqwest::get(format!("{issuer}/test/counts"))
        .await
        .expect("GET /test/counts")
        .json()
        .await
        .expect("counts JSON");
    counts[grant_type].as_u64().unwrap_or(0)
}

/// The token exchanges the IdP granted so far.
async fn exchanges(issuer: &str) -> u64 {
    granted(issuer, "urn:ietf:params:oauth:grant-type:token-exchange").await
}

#[tokio::test(flavor = "multi_thread")]
async fn each_user_reaches_the_internal_server_as_themselves_with_an_exchanged_token() {
    let dir = scratch("token-exchange");
    let (_idp, issuer) = idp(&dir, "300");
    let (server, upstream) = protected(&issuer);
    let alice = sign_in(&issuer, "alice");
    let bob = sign_in(&issuer, "bob");

    // The users' own JWTs are not for the server: it refuses them.
    let direct = http()
        .post(&upstream)
        .bearer_auth(&alice)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("POST to the server");
    assert_eq!(
        direct.status().as_u16(),
        401,
        "the server took Sluice's token"
    );

    let env = Env::new().set(SECRET_VAR, SECRET);
    let sluice = Sluice::start_env(&config(&issuer, &dir.join("jwks.json"), &upstream), &env).await;
    for (user, token) in [("alice", &alice), ("bob", &bob), ("alice", &alice)] {
        let (status, v) = whoami(&sluice, token).await;
        assert_eq!(status, 200, "{v}\n{}", sluice.output());
        let text = v["result"]["content"][0]["text"].as_str().expect("text");
        let seen: Value = serde_json::from_str(text).expect("whoami's JSON");
        assert_eq!(seen["sub"], user, "{seen}");
        assert_eq!(seen["aud"], upstream.as_str(), "{seen}");
        assert_eq!(seen["client_id"], "sluice", "{seen}");
        assert_eq!(seen["scope"], "mcp:tools", "{seen}");
    }
    // One exchange per user: the second call of alice used the token held for her JWT.
    assert_eq!(exchanges(&issuer).await, 2);
    // Every token the server let in was one the IdP gave Sluice, never a user's own.
    let saw: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("SAW "))
        .collect();
    assert!(
        !saw.is_empty() && saw.iter().all(|l| l.ends_with(" sluice")),
        "{saw:?}"
    );
    assert!(
        saw.iter().any(|l| l == "SAW alice sluice") && saw.iter().any(|l| l == "SAW bob sluice")
    );

    // Alice's client signs her in again: her new JWT is exchanged anew.
    let alice_again = sign_in(&issuer, "alice");
    let (status, v) = whoami(&sluice, &alice_again).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(exchanges(&issuer).await, 3);

    // An API key has no JWT to exchange: refused, saying what it needs, nothing sent.
    let before = server.lines().len();
    let (status, v) = whoami(&sluice, ROBOT_KEY).await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["error"]["code"], -31042, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("company IdP's token"), "{v}");
    assert_eq!(server.lines().len(), before, "a request reached the server");

    // Neither the users' JWTs nor any exchanged token is in Sluice's trace-level output.
    sluice.assert_no_leak(&[&alice, &bob, &alice_again, SECRET]);
    let out = sluice.output();
    let jwt = out.split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)));
    let leaked: Vec<&str> = jwt
        .filter(|w| w.starts_with("eyJ") && w.matches('.').count() >= 2)
        .collect();
    assert!(leaked.is_empty(), "a JWT in sluice's output: {leaked:?}");
    // The log read is the one that tells of the exchanges (trace level: nothing was filtered).
    assert!(out.contains("exchanged the principal's token"), "{out}");
    // The audit records of the calls name the mode.
    assert!(out.contains(r#""upstream_auth":"token_exchange""#), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_exchange_is_told_by_its_oauth_error_and_nothing_reaches_the_server() {
    let dir = scratch("token-exchange-refused");
    let (_idp, issuer) = idp(&dir, "300");
    let (server, upstream) = protected(&issuer);
    let alice = sign_in(&issuer, "alice");
    let env = Env::new().set(SECRET_VAR, "not-the-secret");
    let sluice = Sluice::start_env(&config(&issuer, &dir.join("jwks.json"), &upstream), &env).await;
    let (status, v) = whoami(&sluice, &alice).await;
    assert_eq!(status, 503, "{v}");
    let reason = v["error"]["data"]["down"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("refused the token exchange: invalid_client (HTTP 401)"),
        "{v}"
    );
    assert!(
        server.lines().iter().all(|l| !l.starts_with("SAW ")),
        "{:?}",
        server.lines()
    );
    sluice.assert_no_leak(&[&alice, "not-the-secret"]);
}

/// The same IdP as the authorization server of an `oauth` upstream (the fixture other tests
/// use): Sluice registers itself (Dynamic Client Registration), a user signs in at the IdP's
/// forms, and Sluice refreshes the user's token with the refresh token the IdP gave.
#[tokio::test(flavor = "multi_thread")]
async fn the_idp_serves_an_oauth_upstream_sign_in_and_its_refresh_tokens() {
    let dir = scratch("idp-oauth");
    let (_idp, issuer) = idp(&dir, "10");
    let (_server, upstream) = protected(&issuer);
    let text = format!(
        "listen = \"127.0.0.1:0\"\nprefix = \"always\"\n\n[timeouts]\nresponse_ms = 10000\n\n[[upstream]]\nname = \"internal\"\nurl = \"{upstream}\"\n\n[upstream.auth]\nmode = \"oauth\"\nscopes = [\"mcp:tools\"]\n"
    );
    let sluice = Sluice::start(&text).await;
    let call = || async {
        let r = Call::new("internal__whoami", json!({}))
            .caps(json!({}))
            .request(&http(), &sluice.url(), json!({}))
            .send()
            .await
            .expect("POST to sluice");
        (r.status().as_u16(), r.json::<Value>().await.expect("JSON"))
    };
    let (status, v) = call().await;
    assert_eq!((status, &v["error"]["code"]), (403, &json!(-31040)), "{v}");
    let url = v["error"]["data"]["url"].as_str().expect("data.url");
    let out = node()
        .arg(script("idp_user.mjs"))
        .args(["browse", url, "carol"])
        .output()
        .expect("run idp_user.mjs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("BROWSED {\"status\":200"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Calls until Sluice has refreshed carol's token (it is due nine tenths into its 10 s).
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (status, v) = call().await;
        assert_eq!(status, 200, "{v}\n{}", sluice.output());
        let seen: Value =
            serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            (&seen["sub"], &seen["aud"]),
            (&json!("carol"), &json!(upstream)),
            "{seen}"
        );
        if granted(&issuer, "refresh_token").await >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no refresh within 40 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(granted(&issuer, "authorization_code").await, 1);
}
