//! Class 4: a config that names a secret, key or file Sluice cannot use does not start with the
//! protection off. `sluice check` and `sluice serve` both exit 2 and name the variable or file:
//! an `api_keys_env` that is unset, empty or only commas; a `[state] key_env` unset or empty; a
//! JWT secret that is empty or shorter than 32 bytes (from the environment or a file); a JWKS
//! file with no keys; a policy file with no rules; an upstream `bearer_token_env` that is empty;
//! an audit sink in a directory that does not exist; a stdio upstream's `cwd` that is not a
//! directory, or its `stderr` file in one that does not exist; `[metrics] require_auth` without `[auth]`
//! (regression guard: refused before issue 10). A non-loopback listener whose only credential
//! source is an unset `api_keys_env` must not start. Before the fixes each of these (but the
//! last-but-one) loaded with the missing protection silently off.

use crate::support::gateway::{Gateway, Upstream};
use crate::support::process::{check, Env, Sluice};

/// An upstream that is never reached (`serve` starts without it).
fn base() -> Gateway {
    Gateway::hostile().upstream("far", "http://127.0.0.1:9/mcp")
}

/// Asserts `sluice check` and `sluice serve` both refuse `conf` with exit code 2 and a message
/// naming `names` (every one of them).
async fn refused(what: &str, conf: &Gateway, env: &Env, names: &[&str]) {
    let text = conf.text();
    let mut wrong = Vec::new();
    let c = check(&text, env).await;
    let said = format!("{}{}", c.stdout, c.stderr);
    if c.code != Some(2) || !names.iter().all(|n| c.stderr.contains(n)) {
        wrong.push(format!(
            "`sluice check` must exit 2 naming {names:?}; it exited {:?} and printed:\n{said}",
            c.code
        ));
    }
    match Sluice::spawn(&text, env).await {
        Ok(s) => wrong.push(format!(
            "`sluice serve` started on {} with the protection off",
            s.addr
        )),
        Err(e) => {
            if e.code != Some(2) || !names.iter().all(|n| e.output.contains(n)) {
                wrong.push(format!(
                    "`sluice serve` must exit 2 naming {names:?}; it exited {:?} and printed:\n{}",
                    e.code, e.output
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{what}:\n{}\nconfig:\n{text}",
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_keys_env_that_is_unset_empty_or_only_commas_stops_check_and_serve() {
    let conf = base().set("auth", "api_keys_env", "HOSTILE_API_KEYS");
    refused(
        "api_keys_env unset",
        &conf,
        &Env::new().unset("HOSTILE_API_KEYS"),
        &["HOSTILE_API_KEYS"],
    )
    .await;
    refused(
        "api_keys_env empty",
        &conf,
        &Env::new().set("HOSTILE_API_KEYS", ""),
        &["HOSTILE_API_KEYS"],
    )
    .await;
    refused(
        "api_keys_env only commas",
        &conf,
        &Env::new().set("HOSTILE_API_KEYS", ",,"),
        &["HOSTILE_API_KEYS"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_key_env_that_is_unset_or_empty_stops_check_and_serve() {
    let conf = base()
        .without("state")
        .set("state", "key_env", "HOSTILE_STATE_KEY");
    refused(
        "state.key_env unset",
        &conf,
        &Env::new().unset("HOSTILE_STATE_KEY"),
        &["HOSTILE_STATE_KEY"],
    )
    .await;
    refused(
        "state.key_env empty",
        &conf,
        &Env::new().set("HOSTILE_STATE_KEY", ""),
        &["HOSTILE_STATE_KEY"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_secret_that_is_empty_or_short_or_a_jwks_without_keys_stops_check_and_serve() {
    let jwt = |k: &str, v: &str| {
        base()
            .set("auth.jwt", "issuer", "https://issuer.example")
            .set("auth.jwt", k, v)
    };
    let from_env = jwt("hs256_secret_env", "HOSTILE_JWT_SECRET");
    refused(
        "hs256_secret_env empty",
        &from_env,
        &Env::new().set("HOSTILE_JWT_SECRET", ""),
        &["HOSTILE_JWT_SECRET"],
    )
    .await;
    refused(
        "hs256_secret_env of 10 bytes",
        &from_env,
        &Env::new().set("HOSTILE_JWT_SECRET", "0123456789"),
        &["HOSTILE_JWT_SECRET"],
    )
    .await;
    let c = base();
    let empty = c.file("empty-secret", "");
    let from_file = jwt("hs256_secret_file", &empty);
    refused(
        "hs256_secret_file empty",
        &from_file,
        &Env::new(),
        &[&empty],
    )
    .await;
    let jwks = c.file("jwks.json", r#"{"keys": []}"#);
    let no_keys = jwt("jwks_file", &jwks);
    refused("jwks_file without keys", &no_keys, &Env::new(), &[&jwks]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_file_without_rules_stops_check_and_serve() {
    let conf = base().policy("# every rule was commented out\n");
    let path = conf
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("policies = [\""))
        .and_then(|l| l.split('"').next())
        .unwrap()
        .to_owned();
    refused("a policy file with no rules", &conf, &Env::new(), &[&path]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_bearer_token_env_set_to_empty_stops_check_and_serve() {
    let conf = Gateway::hostile().upstream_spec(
        Upstream::new("far", "http://127.0.0.1:9/mcp").key("bearer_token_env", "HOSTILE_UP_TOKEN"),
    );
    refused(
        "bearer_token_env empty",
        &conf,
        &Env::new().set("HOSTILE_UP_TOKEN", ""),
        &["HOSTILE_UP_TOKEN"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_sink_in_a_missing_directory_stops_check_and_serve() {
    let c = base();
    let sink = format!(
        "{}/no-such-directory/audit.jsonl",
        c.file("x", "").trim_end_matches("/x")
    );
    let conf = c.set("audit", "sink", sink.as_str());
    refused(
        "audit sink in a missing directory",
        &conf,
        &Env::new(),
        &["no-such-directory"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_require_auth_without_auth_stops_check_and_serve() {
    // Regression guard: refused before issue 10.
    refused(
        "require_auth without [auth]",
        &base().set("metrics", "require_auth", true),
        &Env::new(),
        &["require_auth"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_listener_whose_api_keys_env_is_unset_does_not_start() {
    let mut conf = base().set("auth", "api_keys_env", "HOSTILE_API_KEYS");
    conf = conf.top("listen", "0.0.0.0:0");
    let text = conf.text().replacen("listen = \"127.0.0.1:0\"\n", "", 1);
    let env = Env::new().unset("HOSTILE_API_KEYS");
    match Sluice::spawn(&text, &env).await {
        Ok(s) => panic!(
            "sluice started on {} with auth off (api_keys_env unset):\n{}",
            s.addr,
            s.output()
        ),
        Err(e) => {
            assert_eq!(e.code, Some(2), "{}", e.output);
            assert!(
                e.output.contains("HOSTILE_API_KEYS"),
                "the message names the variable:\n{}",
                e.output
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_upstream_whose_cwd_or_stderr_directory_is_missing_stops_check_and_serve() {
    let c = Gateway::hostile();
    let missing = format!(
        "{}/no-such-directory",
        c.file("x", "").trim_end_matches("/x")
    );
    let cwd = c
        .clone()
        .upstream_spec(Upstream::stdio("files", &["true"]).key("cwd", missing.as_str()));
    refused(
        "stdio cwd missing",
        &cwd,
        &Env::new(),
        &["files", "no-such-directory", "cwd"],
    )
    .await;
    let stderr = Gateway::hostile().upstream_spec(
        Upstream::stdio("files", &["true"]).key("stderr", format!("file:{missing}/err.log")),
    );
    refused(
        "stdio stderr directory missing",
        &stderr,
        &Env::new(),
        &["files", "no-such-directory", "stderr"],
    )
    .await;
}
