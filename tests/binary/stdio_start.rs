//! A stdio server that cannot start is no mystery (issue 29, point 3), through the binary with
//! real child processes:
//!
//! - the child keeps what package runners need on a corporate network (proxy and CA variables,
//!   `PIP_*`/`npm_config_*`/`UV_*`), unless `inherit_env = false`; `inherit` adds names and
//!   `PREFIX*` patterns; Sluice's own secrets (`state.key_env`, `auth.api_keys_env`, a
//!   `bearer_token_env`, the OTLP headers' variable) never pass, whatever pattern matches them:
//!   a child that prints its environment (`env`) shows exactly the names expected;
//! - the quick form passes variables: `--env NAME=VALUE`, `--env NAME` (Sluice's value),
//!   `--env UPSTREAM:NAME=VALUE` (that upstream only); an `--env` naming a secret is refused;
//! - a start that fails logs the last lines the child wrote to stderr before its handshake,
//!   Debug-escaped and bounded (the last 20); a line it writes after its handshake (where a
//!   client's content could be) never reaches the log.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::support::call::{http, Call};
use crate::support::peers::script;
use crate::support::process::{scratch, Env, Sluice};

/// A state key for `[state] key_env` (`ID:BASE64`, 32 bytes).
const STATE_KEY: &str = "7:c2x1aWNlLXN0ZGlvLWVudi10ZXN0LXN0YXRlLWtleS0zMmI=";

/// What every stdio server inherits (`HOME` and `USER` too, with its own `user`).
const BASE: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];

/// The proxy and CA variables a server inherits by default.
const NETWORK: [&str; 13] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// The package runners' prefixes a server inherits by default (and the XDG directories).
const PREFIXES: [&str; 5] = ["PIP_", "npm_config_", "NPM_CONFIG_", "UV_", "XDG_"];

/// Sluice's environment in these tests: what a corporate network needs, Sluice's secrets, and
/// what is neither.
fn sluice_env() -> Vec<(&'static str, String)> {
    let hash = sluice::auth::api_keys::hash_key("stdio-env-alice-key-0123456789");
    vec![
        ("HTTPS_PROXY", "http://proxy.corp.invalid:3128".into()),
        ("http_proxy", "http://proxy.corp.invalid:3128".into()),
        ("NO_PROXY", "localhost,127.0.0.1".into()),
        ("SSL_CERT_FILE", "/etc/corp/ca.pem".into()),
        ("SSL_CERT_DIR", "/etc/corp/certs".into()),
        ("NODE_EXTRA_CA_CERTS", "/etc/corp/ca.pem".into()),
        ("REQUESTS_CA_BUNDLE", "/etc/corp/ca.pem".into()),
        ("npm_config_cafile", "/etc/corp/ca.pem".into()),
        ("PIP_INDEX_URL", "https://pypi.corp.invalid/simple".into()),
        ("UV_CACHE_DIR", "/var/cache/uv".into()),
        ("SLUICE_TEST_STATE_KEYS", STATE_KEY.into()),
        ("SLUICE_TEST_API_KEYS", format!("{hash}=alice")),
        ("SLUICE_TEST_WEB_TOKEN", "web-token-secret".into()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=otlp-secret".into(),
        ),
        ("SLUICE_TEST_PLAIN", "plain".into()),
        ("AWS_SECRET_ACCESS_KEY", "not-asked-for".into()),
    ]
}

/// Sluice's secrets in [`sluice_env`]: named by its config, or its OTLP exporter's.
const SECRETS: [&str; 4] = [
    "SLUICE_TEST_STATE_KEYS",
    "SLUICE_TEST_API_KEYS",
    "SLUICE_TEST_WEB_TOKEN",
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// A command that writes its environment to `dump`, then serves (tests/peers/hostile_stdio.py,
/// in a mode with no hostile behaviour), as a TOML array.
fn env_printer(dump: &Path) -> String {
    let server = format!(
        "exec python3 {} ok {}.marker",
        script("hostile_stdio.py").display(),
        dump.display()
    );
    format!(
        "[\"sh\", \"-c\", {:?}, {:?}]",
        format!("env > \"$0\"; {server}"),
        dump.display().to_string()
    )
}

/// The environment `dump` holds, once the child wrote it; `PWD` (which `sh` sets) left out.
async fn dumped(dump: &Path) -> BTreeMap<String, String> {
    crate::support::eventually(&format!("{} written", dump.display()), || {
        std::fs::read_to_string(dump).is_ok_and(|t| t.contains("PATH="))
    })
    .await;
    let text = std::fs::read_to_string(dump).expect("the environment dump");
    let vars = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
    vars.filter(|(k, _)| k != "PWD").collect()
}

/// Sluice's environment for a test: [`sluice_env`] set, and the test process's own proxy and
/// package-runner variables removed (the machine's own settings are not the test's).
fn env(extra: &[(&str, &str)]) -> Env {
    let mut e = Env::new();
    for (k, _) in std::env::vars() {
        if NETWORK.contains(&k.as_str()) || PREFIXES.iter().any(|p| k.starts_with(p)) {
            e = e.unset(&k);
        }
    }
    for (k, v) in sluice_env() {
        e = e.set(k, &v);
    }
    for (k, v) in extra {
        e = e.set(k, v);
    }
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_inherits_the_proxy_ca_and_package_runner_settings_and_never_sluices_secrets(
) {
    let dir = scratch("stdio-env");
    let (full, bare) = (dir.join("full.env"), dir.join("bare.env"));
    let config = format!(
        r#"listen = "127.0.0.1:0"
prefix = "always"

[state]
key_env = "SLUICE_TEST_STATE_KEYS"

[auth]
api_keys_env = "SLUICE_TEST_API_KEYS"

[[upstream]]
name = "web"
url = "http://127.0.0.1:1/mcp"
bearer_token_env = "SLUICE_TEST_WEB_TOKEN"

[[upstream]]
name = "full"
command = {full_cmd}
era = "2025-11-25"
spare_processes = 0
inherit = ["SLUICE_TEST_*"]

[[upstream]]
name = "bare"
command = {bare_cmd}
era = "2025-11-25"
spare_processes = 0
inherit_env = false
inherit = ["UV_*", "NODE_EXTRA_CA_CERTS"]
"#,
        full_cmd = env_printer(&full),
        bare_cmd = env_printer(&bare),
    );
    let sluice = Sluice::start_env(&config, &env(&[])).await;
    let given: BTreeMap<&str, String> = sluice_env().into_iter().collect();

    // Default: the base, the network settings, and what `inherit` names: no secret, though
    // `SLUICE_TEST_*` matches three of them.
    let got = dumped(&full).await;
    for secret in SECRETS {
        assert!(
            !got.contains_key(secret),
            "{secret} reached the server: {:?}",
            got.keys()
        );
    }
    for name in [
        "HTTPS_PROXY",
        "http_proxy",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
    ]
    .into_iter()
    .chain([
        "npm_config_cafile",
        "PIP_INDEX_URL",
        "UV_CACHE_DIR",
        "SLUICE_TEST_PLAIN",
    ]) {
        assert_eq!(got.get(name), given.get(name), "{name} in {:?}", got.keys());
    }
    let expected = |k: &str| {
        BASE.contains(&k)
            || NETWORK.contains(&k)
            || PREFIXES.iter().any(|p| k.starts_with(p))
            || k == "SLUICE_TEST_PLAIN"
    };
    let unexpected: Vec<&String> = got.keys().filter(|k| !expected(k)).collect();
    assert!(
        unexpected.is_empty(),
        "names the server should not have: {unexpected:?}"
    );

    // inherit_env = false: the base and what `inherit` names, nothing else.
    let got = dumped(&bare).await;
    let unexpected: Vec<&String> = got
        .keys()
        .filter(|k| {
            !BASE.contains(&k.as_str()) && !k.starts_with("UV_") && *k != "NODE_EXTRA_CA_CERTS"
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "inherit_env = false passed {unexpected:?}"
    );
    assert_eq!(got.get("UV_CACHE_DIR"), given.get("UV_CACHE_DIR"));
    assert_eq!(
        got.get("NODE_EXTRA_CA_CERTS"),
        given.get("NODE_EXTRA_CA_CERTS")
    );
    assert!(got.contains_key("PATH"), "{:?}", got.keys());
    drop(sluice);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_form_passes_variables_with_env_and_never_a_secret() {
    let dir = scratch("stdio-env-flag");
    let (one, two) = (dir.join("one.env"), dir.join("two.env"));
    let quick = |dump: &Path| {
        let server = format!(
            "exec python3 {} ok {}.marker",
            script("hostile_stdio.py").display(),
            dump.display()
        );
        format!("stdio:sh -c 'env > \"$0\"; {server}' {}", dump.display())
    };
    let config = "listen = \"127.0.0.1:0\"\nprefix = \"always\"\n";
    let args: Vec<String> = [
        "--upstream".to_owned(),
        format!("one={}", quick(&one)),
        "--upstream".into(),
        format!("two={}", quick(&two)),
        "--env".into(),
        "GIVEN=a value with spaces".into(),
        "--env".into(),
        "COPIED".into(),
        "--env".into(),
        "one:ONLY_ONE=1".into(),
    ]
    .into();
    let env = env(&[("COPIED", "from-sluice"), ("NOT_COPIED", "stays")]);
    let sluice = Sluice::spawn_with(config, &env, &args)
        .await
        .unwrap_or_else(|e| panic!("exit {:?}:\n{}", e.code, e.output));
    sluice.ready().await;
    let (one, two) = (dumped(&one).await, dumped(&two).await);
    for got in [&one, &two] {
        assert_eq!(
            got.get("GIVEN").map(String::as_str),
            Some("a value with spaces"),
            "{got:?}"
        );
        assert_eq!(
            got.get("COPIED").map(String::as_str),
            Some("from-sluice"),
            "{got:?}"
        );
        assert!(!got.contains_key("NOT_COPIED"), "{got:?}");
        assert_eq!(
            got.get("HTTPS_PROXY").map(String::as_str),
            Some("http://proxy.corp.invalid:3128"),
            "the quick form inherits too"
        );
    }
    assert_eq!(one.get("ONLY_ONE").map(String::as_str), Some("1"));
    assert!(
        !two.contains_key("ONLY_ONE"),
        "one:NAME is for upstream one only: {two:?}"
    );
    drop(sluice);

    // Copying one of Sluice's own secrets is refused before anything starts, naming the key.
    let config = "listen = \"127.0.0.1:0\"\n[state]\nkey_env = \"SLUICE_TEST_STATE_KEYS\"\n";
    let args = [
        "--upstream".to_owned(),
        format!("one={}", quick(&dir.join("three.env"))),
        "--env".into(),
        "SLUICE_TEST_STATE_KEYS".into(),
    ];
    let exited = Sluice::spawn_with(config, &env, &args)
        .await
        .err()
        .expect("refused");
    assert_eq!(exited.code, Some(2), "{}", exited.output);
    assert!(
        exited.output.contains("SLUICE_TEST_STATE_KEYS") && exited.output.contains("state.key_env"),
        "{}",
        exited.output
    );
    assert!(
        !exited.output.contains(STATE_KEY),
        "the secret's value was printed: {}",
        exited.output
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_logs_the_last_stderr_lines_escaped_and_bounded() {
    // 30 lines, then one with a BEL byte, then exit before reading anything.
    let lines = r#"i=0; while [ $i -lt 30 ]; do echo "boot-line-$i;" >&2; i=$((i+1)); done; printf 'bell\a;\n' >&2; exit 3"#;
    let config = format!(
        "listen = \"127.0.0.1:0\"\n\n[[upstream]]\nname = \"boot\"\ncommand = [\"sh\", \"-c\", {lines:?}]\nera = \"2025-11-25\"\nspare_processes = 0\n"
    );
    let sluice = Sluice::start_env(&config, &env(&[])).await;
    sluice.logged("a stdio server did not start", 1).await;
    let out = sluice.output();
    let line = out
        .lines()
        .find(|l| l.contains("a stdio server did not start"))
        .expect("the line")
        .to_owned();
    assert!(
        line.contains("upstream=boot") || line.contains("upstream=\"boot\""),
        "{line}"
    );
    // The last 20 lines: 11 to 29, then the BEL line, its byte escaped.
    assert!(
        line.contains("boot-line-11;") && line.contains("boot-line-29;"),
        "{line}"
    );
    assert!(
        !line.contains("boot-line-10;"),
        "more than the last 20 lines: {line}"
    );
    assert!(
        line.contains(r"bell\u{7};"),
        "the BEL byte is escaped: {line}"
    );
    assert!(
        !out.contains('\u{7}'),
        "a raw control byte of the server's reached the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_server_writes_to_stderr_after_its_handshake_never_reaches_the_log() {
    let marker = scratch("stdio-talk").join("talk");
    let cmd = format!(
        "[\"python3\", {:?}, \"talk\", {:?}]",
        script("hostile_stdio.py").display().to_string(),
        marker.display().to_string()
    );
    let config = format!(
        "listen = \"127.0.0.1:0\"\nprefix = \"always\"\n\n[[upstream]]\nname = \"talk\"\ncommand = {cmd}\nera = \"2025-11-25\"\nspare_processes = 0\n"
    );
    let sluice = Sluice::start_env(&config, &env(&[])).await;
    // The call's process (the second) handshakes, writes AFTER-HANDSHAKE and exits unanswered.
    let call = Call::new("talk__take", json!({"x": 1})).caps(json!({}));
    let failed = call.send(&http(), &sluice.url(), json!({})).await;
    assert!(failed.status >= 500, "{failed:?}");
    // The next start fails before its handshake: logged, with what that process wrote.
    let _ = call.send(&http(), &sluice.url(), json!({})).await;
    sluice.logged("a stdio server did not start", 1).await;
    let out = sluice.output();
    assert!(
        out.contains("boot-3;"),
        "the failed start's line is logged: {out}"
    );
    assert!(
        !out.contains("AFTER-HANDSHAKE"),
        "a line written after the handshake reached the log"
    );
    assert!(
        !out.contains("before-2"),
        "the lines of a start that succeeded reached the log"
    );
}
