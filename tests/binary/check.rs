//! `sluice check`, through the binary (issue 28 class 7, issue 29 point 10).
//!
//! - No secret in any place a config can hold one reaches its output (stdout and stderr, with
//!   and without `--principal`): header values, a bearer variable's value, URL userinfo, query
//!   tokens and fragments, stdio arguments read word by word (a `-c` string, JSON, connection
//!   strings, `user:pw@host`) (upstream `url`/`urls`, `auth.resource`, authorization servers,
//!   `allowed_origins`, `cluster.redis_url` and `advertise_url`, the OTLP endpoint), the OTLP
//!   headers' variable, stdio `env` values and arguments after secret-named flags (`--token V`,
//!   `--api-key=V`, `-p V`, `NAME_TOKEN=V`, `Authorization: Bearer V`), the JWT secret, API
//!   keys and state keys (configured and from their variables).
//! - The first line is the verdict (`ok: …` with the upstreams, the auth and the warnings
//!   counted, or `refused: <the first error>`); the missing state keys are warned about only off
//!   loopback; the effective config follows its header line and loads again.
//! - `--principal` gives each tool's fate (hidden, denied by which rule and why, needs approval
//!   by which rule, allowed, and the quota that counts it), and warns when no credential names
//!   the principal.

use std::time::Duration;

use crate::support::gateway::strings;
use crate::support::modern::{destructive, tool, Spec};
use crate::support::process::{scratch, strip_ansi};

/// Every canary starts so: one search finds them all.
const C: &str = "c4n4ry";

/// What one run printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// `sluice check --config <config> ARGS` with `env` set.
async fn check(config: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let path = scratch("check").join("sluice.toml");
    std::fs::write(&path, config).expect("write the config");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["check", "--config"])
        .arg(&path)
        .args(args)
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    cmd.stdin(std::process::Stdio::null())
        .envs(env.iter().copied());
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("sluice check ends")
        .expect("run sluice check");
    let text = |b: &[u8]| strip_ansi(&String::from_utf8_lossy(b));
    Run {
        code: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
    }
}

/// A state key (`ID:BASE64`, 33 bytes) whose Base64 is itself a canary.
fn state_key(id: u8, tag: &str) -> String {
    let b64 = format!("{C}{tag}");
    format!("{id}:{b64}{}", "A".repeat(44 - b64.len()))
}

/// A config holding a canary in every place a secret can be put.
fn secrets() -> (String, Vec<(String, String)>) {
    let hash = sluice::auth::api_keys::hash_key;
    let args = [
        "/bin/true",
        "--token",
        "c4n4ry-a1",
        "--api-key=c4n4ry-a2",
        "--Password",
        "c4n4ry-a3",
        "-p",
        "c4n4ry-a4",
        "--client-secret=c4n4ry-a5",
        "--url",
        "http://u:c4n4ry-a6@h/x?access_token=c4n4ry-a7",
        "GITHUB_TOKEN=c4n4ry-a8",
        "Authorization: Bearer c4n4ry-a9",
        "--auth",
        "c4n4ry-a10",
        "--bearer",
        "c4n4ry-a11",
        "--credentials",
        "c4n4ry-a12",
        "--apikey",
        "c4n4ry-a13",
        "--access-token",
        "c4n4ry-a14",
        "--passwd",
        "c4n4ry-a15",
        "--secret",
        "c4n4ry-a16",
        "--key",
        "c4n4ry-a17",
        "--ACCESS_TOKEN=c4n4ry-a18",
        "-k",
        "c4n4ry-a19",
        "sh -c 'srv --api-key c4n4ry-a20 --pw c4n4ry-a21'",
        r#"{"apiKey":"c4n4ry-a22"}"#,
        "admin:c4n4ry-a23@db:5432/x",
        "Host=db;Password=c4n4ry-a24",
        "--header=Authorization: Bearer c4n4ry-a25",
        "--token",
        "--c4n4ry-a26",
    ];
    let config = format!(
        r#"listen = "127.0.0.1:0"
allowed_origins = ["https://u:c4n4ry-origin@app.example"]

[timeouts]
connect_ms = 300
response_ms = 1500

[state]
keys = {key}
key_env = "CHECK_STATE_KEYS"

[auth]
resource = "http://u:c4n4ry-resource@127.0.0.1:8080/mcp?token=c4n4ry-resource-q"
authorization_servers = ["https://u:c4n4ry-as@as.example/?client_secret=c4n4ry-as-q"]
api_keys_env = "CHECK_API_KEYS"
api_keys = [{{ sha256 = "{alice}", principal = "alice" }}]

[auth.jwt]
issuer = "https://issuer.example"
hs256_secret_env = "CHECK_JWT_SECRET"

[cluster]
redis_url = "redis://:c4n4ry-redis@127.0.0.1:9/0"
id = "c1"
listen = "127.0.0.1:0"
advertise_url = "http://u:c4n4ry-advertise@127.0.0.1:9100"

[telemetry]
otlp_endpoint = "http://u:c4n4ry-otlp@127.0.0.1:9/v1/traces?api_key=c4n4ry-otlp-q#c4n4ry-otlp-f"

[[upstream]]
name = "h"
url = "http://u:c4n4ry-userinfo@127.0.0.1:9/mcp?token=c4n4ry-q1&api_key=c4n4ry-q2&access_token=c4n4ry-q3&key=c4n4ry-q4#access_token=c4n4ry-frag"
headers = {{ "X-Api-Key" = "c4n4ry-header", Authorization = "Bearer c4n4ry-bearer-header" }}
bearer_token_env = "CHECK_UP_TOKEN"

[[upstream]]
name = "r"
urls = ["http://127.0.0.1:9/a?api_key=c4n4ry-urls1", "http://u:c4n4ry-urls2@127.0.0.1:9/b"]

[[upstream]]
name = "s"
command = {command}
env = {{ GITHUB_TOKEN = "c4n4ry-env", PLAIN = "c4n4ry-env2" }}
start_ms = 5000
"#,
        key = strings(&[state_key(1, "K1")]),
        alice = hash("c4n4ry-apikey"),
        command = strings(&args),
    );
    let env = [
        ("CHECK_STATE_KEYS", state_key(2, "K2")),
        ("CHECK_API_KEYS", format!("{}=bob", hash("c4n4ry-apikey2"))),
        (
            "CHECK_JWT_SECRET",
            "c4n4ry-jwt-secret-0123456789abcdef".to_owned(),
        ),
        ("CHECK_UP_TOKEN", "c4n4ry-bearer-env".to_owned()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=c4n4ry-otlp-header".to_owned(),
        ),
    ];
    (
        config,
        env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_no_secret_from_any_place_a_config_can_hold_one_with_or_without_a_principal() {
    let (config, env) = secrets();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    for args in [
        &[][..],
        &["--principal", "alice"][..],
        &[
            "--principal",
            "alice",
            "--group",
            "c4n4ry-group-is-no-secret",
        ][..],
    ] {
        let run = check(&config, args, &env).await;
        assert_eq!(
            run.code,
            Some(0),
            "the config is valid ({args:?}):\n{}",
            run.all()
        );
        let said = run.all().replace("c4n4ry-group-is-no-secret", "");
        let leaked: Vec<&str> = said
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| w.contains(C))
            .collect();
        assert!(
            leaked.is_empty(),
            "`sluice check {args:?}` printed secrets {leaked:?}:\n{said}"
        );
        assert!(
            run.stdout.starts_with(
                "ok: config valid, 3 upstreams (1 stdio), auth api_keys (2 principals) and jwt"
            ),
            "{}",
            run.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_its_verdict_first_warns_of_state_keys_only_off_loopback_and_prints_a_config_that_loads(
) {
    // A loopback gateway with two HTTP upstreams and no auth (deploy/sluice.example.toml is checked
    // by tests/replicas/deploy_docker.rs with its variables set).
    let example = LOOPBACK.to_owned();
    let run = check(&example, &[], &[]).await;
    assert_eq!(run.code, Some(0), "{}", run.all());
    let first = run.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "ok: config valid, 2 upstreams (0 stdio), no auth (every caller is the principal \"local\"; loopback only), no warnings"
    );
    assert!(
        !run.all().contains("state keys"),
        "a loopback gateway is not warned about its state keys:\n{}",
        run.all()
    );
    let printed = run
        .stdout
        .split_once(sluice::inspect::CONFIG_HEADER)
        .expect("the config's header line")
        .1;
    let again = check(printed, &[], &[]).await;
    assert_eq!(
        again.stdout.lines().next(),
        Some(first),
        "the printed config loads again:\n{}",
        again.all()
    );

    // Off loopback (with a credential), without keys: one warning, its consequence said once.
    let deployed = example.replace("127.0.0.1:8080", "0.0.0.0:0")
        + &format!(
            "\n[auth]\napi_keys = [{{ sha256 = \"{}\", principal = \"ops\" }}]\n",
            sluice::auth::api_keys::hash_key("k")
        );
    let run = check(&deployed, &[], &[]).await;
    assert!(
        run.stdout.starts_with("ok: config valid, 2 upstreams (0 stdio), auth api_keys (1 principal), 1 warning\nwarning: no [state] keys"),
        "{}",
        run.all()
    );
    assert_eq!(
        run.all()
            .matches("a restart fails every round in progress")
            .count(),
        1,
        "{}",
        run.all()
    );
    let keyed = deployed + &format!("\n[state]\nkeys = [\"{}\"]\n", state_key(1, "x"));
    assert!(check(&keyed, &[], &[]).await.stdout.starts_with(
        "ok: config valid, 2 upstreams (0 stdio), auth api_keys (1 principal), no warnings\n"
    ));

    // Refused: the first error is the verdict, and the exit code 2.
    let run = check(
        &example.replace("http://127.0.0.1:9000/mcp", "ftp://u:c4n4ry-x@h/mcp"),
        &[],
        &[],
    )
    .await;
    assert_eq!(run.code, Some(2));
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("refused: ")
            && first.contains("expected an http:// or https:// URL")
            && !run.all().contains(C),
        "{}",
        run.all()
    );
}

const LOOPBACK: &str = r#"
listen = "127.0.0.1:8080"
path = "/mcp"

[timeouts]
response_ms = 30000

[[upstream]]
name = "weather"
url = "http://127.0.0.1:9000/mcp"

[[upstream]]
name = "files"
url = "http://127.0.0.1:9001/mcp"
headers = { "X-Api-Key" = "replace-me" }
"#;

const RULES: &str = r#"
[[rule]]
name = "eng-sees-admin"
match = { group = ["eng"], tool = ["admin_*"] }
effect = "show"

[[rule]]
name = "admin-tools-hidden"
match = { tool = ["admin_*"] }
effect = "hide"

[[rule]]
name = "no-rm"
match = { method = ["tools/call"], tool = ["rm"] }
effect = "deny"
reason = "files are never removed through the gateway"

[[rule]]
name = "approve-destructive"
match = { method = ["tools/call"], destructive = true }
effect = "approve"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_principal_gives_each_tools_fate_and_warns_when_no_credential_names_the_principal() {
    let alpha = Spec::new("alpha")
        .tools(vec![
            tool("search"),
            tool("admin_reset"),
            tool("rm"),
            destructive("drop_table").to_string(),
        ])
        .start()
        .await;
    let dir = scratch("check-fates");
    let policy = dir.join("rules.toml");
    std::fs::write(&policy, RULES).expect("write the policy");
    let hash = sluice::auth::api_keys::hash_key;
    let config = format!(
        "listen = \"127.0.0.1:0\"\nprefix = \"always\"\npolicies = [{policy:?}]\n\n[timeouts]\nconnect_ms = 300\nresponse_ms = 2000\n\n\
         [auth]\napi_keys = [{{ sha256 = \"{}\", principal = \"alice\", groups = [\"eng\"] }}, {{ sha256 = \"{}\", principal = \"bob\", groups = [\"sales\"] }}]\n\n\
         [[quota]]\nname = \"search-quota\"\ntool = [\"search\"]\ncalls_per_window = 10\nwindow_ms = 60000\n\n\
         [[upstream]]\nname = \"alpha\"\nurl = \"{}\"\n\n[[upstream]]\nname = \"gone\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
        hash("alice-key"),
        hash("bob-key"),
        alpha.url()
    );
    let alice = check(&config, &["--principal", "alice"], &[]).await;
    assert_eq!(alice.code, Some(0), "{}", alice.all());
    let out = &alice.stdout;
    assert!(
        out.starts_with(
            "ok: config valid, 2 upstreams (0 stdio), auth api_keys (2 principals), no warnings\nprincipal \"alice\", groups [\"eng\"]\n"
        ),
        "{out}"
    );
    for fate in [
        r#"shown  "alpha__search"  (no rule); call: allowed (no rule), quota "search-quota": 10 calls per 60000 ms (burst 10), then -31017"#,
        r#"shown  "alpha__admin_reset"  (show rule "eng-sees-admin"); call: allowed (no rule), no quota"#,
        r#"shown  "alpha__rm"  (no rule); call: denied (rule "no-rm": "files are never removed through the gateway")"#,
        r#"shown  "alpha__drop_table"  (no rule); call: needs approval first (rule "approve-destructive": an approval round the user answers), no quota"#,
        r#"upstream "gone": down (the log says why): its items are not known"#,
    ] {
        assert!(out.contains(fate), "alice's report lacks {fate:?}:\n{out}");
    }
    let bob = check(&config, &["--principal", "bob"], &[]).await.stdout;
    assert!(bob.contains(r#"hidden "alpha__admin_reset"  (hide rule "admin-tools-hidden"); call: answered as an unknown tool"#), "{bob}");
    let mallory = check(&config, &["--principal", "mallory"], &[]).await;
    assert!(
        mallory.stdout.starts_with("ok: config valid, 2 upstreams (0 stdio), auth api_keys (2 principals), 1 warning\nwarning: no credential names the principal \"mallory\""),
        "{}",
        mallory.all()
    );
    assert!(
        mallory
            .stdout
            .contains(r#"(the API keys name ["alice", "bob"])"#),
        "{}",
        mallory.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_schema_prints_the_config_files_json_schema_with_every_section() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("schema")
        .output()
        .await
        .expect("run sluice schema");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(
        schema,
        sluice::config::schema(),
        "the library's schema, as is"
    );
    for section in [
        "listen", "limits", "timeouts", "upstream", "bridge", "state", "auth", "budget", "quota",
        "cluster",
    ] {
        assert!(
            schema["properties"][section]["description"].is_string(),
            "{section} is documented"
        );
    }
    assert_eq!(
        schema["additionalProperties"], false,
        "an unknown key is refused, as the loader does"
    );
}

#[tokio::test]
async fn check_refuses_an_admin_key_that_is_an_mcp_key_from_the_environment() {
    let hash = sluice::auth::api_keys::hash_key("check-overlap-key-0123456789");
    let config = format!(
        "[auth]\napi_keys_env = \"SLUICE_TEST_OVERLAP\"\n\n[admin]\nkeys = [{{ name = \"ops\", sha256 = \"{hash}\" }}]\n\n[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n"
    );
    let value = format!("{hash}=alice");
    let run = check(&config, &[], &[("SLUICE_TEST_OVERLAP", value.as_str())]).await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("refused:"), "{}", run.stdout);
    assert!(run.stdout.contains("also an MCP API key"), "{}", run.stdout);
}
