//! The one redaction's rules, word by word (the whole printed config of a config holding a
//! canary in every place is walked in tests/binary/check.rs, through the binary).

use serde_json::json;

use super::*;

#[test]
fn secret_names_are_matched_by_word_case_insensitively() {
    for name in [
        "token",
        "api-key",
        "apikey",
        "API_KEY",
        "access-token",
        "accessToken",
        "client-secret",
        "password",
        "passwd",
        "auth",
        "bearer",
        "credentials",
        "GITHUB_TOKEN",
        "X-Api-Key",
        "Authorization",
        "p",
        "db.password",
        "Cookie",
    ] {
        assert!(secret_name(name), "{name}");
    }
    for name in [
        "url",
        "verbose",
        "port",
        "keep",
        "monkey-patch",
        "P",
        "principal",
        "x",
        "bypassing",
        "hotkeys-off",
    ] {
        assert!(!secret_name(name), "{name}");
    }
}

#[test]
fn every_credential_in_a_list_of_urls_goes_and_the_url_stays_one() {
    assert_eq!(
        redact_url("http://a,http://u:p4ss@b/x"),
        "http://a,http://redacted@b/x"
    );
    assert_eq!(
        redact_url("redis://:p4ss@h:6379/0"),
        "redis://redacted@h:6379/0"
    );
    assert_eq!(
        redact_url("http://h/p?token=t&api_key=k&access_token=a&key=x#frag"),
        "http://h/p?token=redacted&api_key=redacted&access_token=redacted&key=redacted#redacted"
    );
    assert_eq!(
        redact_url("http://h/a@b"),
        "http://h/a@b",
        "an @ in the path is no userinfo"
    );
}

#[test]
fn arguments_after_secret_flags_and_secret_assignments_print_redacted() {
    let mut args = json!([
        "server",
        "--token",
        "T1",
        "--api-key=T2",
        "--Access-Token=T3",
        "-p",
        "T4",
        "GITHUB_TOKEN=T5",
        "Authorization: Bearer T6",
        "--url",
        "http://u:T7@h/x?access_token=T8",
        "--client-secret",
        "--T9",
        "--verbose",
        "--port",
        "8080",
        "/srv/data",
        "mode=fast",
    ]);
    scrub(&mut args);
    let printed = args.to_string();
    for t in ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9"] {
        assert!(!printed.contains(t), "{t} in {printed}");
    }
    assert_eq!(
        args,
        json!([
            "server",
            "--token",
            "redacted",
            "--api-key=redacted",
            "--Access-Token=redacted",
            "-p",
            "redacted",
            "GITHUB_TOKEN=redacted",
            "Authorization: redacted redacted",
            "--url",
            "http://redacted@h/x?access_token=redacted",
            "--client-secret",
            "redacted",
            "--verbose",
            "--port",
            "8080",
            "/srv/data",
            "mode=fast",
        ]),
        "whatever follows a secret flag is its value, a long flag too"
    );
}

#[test]
fn a_member_named_for_a_secret_is_replaced_and_one_naming_its_source_is_not() {
    let mut v = json!({"password": "T1", "client_secret": "T2", "max_tokens_action": "deny", "api_keys_env": "KEYS", "hs256_secret_file": "/f",
        "headers": {"Authorization": "<redacted>"}, "allowed_origins": ["https://u:T3@app"]});
    scrub(&mut v);
    assert_eq!(
        v,
        json!({"password": "redacted", "client_secret": "redacted", "max_tokens_action": "deny", "api_keys_env": "KEYS", "hs256_secret_file": "/f",
            "headers": {"Authorization": "<redacted>"}, "allowed_origins": ["https://redacted@app"]})
    );
}

#[test]
fn free_text_keeps_its_words_and_loses_urls_credentials() {
    let e =
        redact_text("cluster.advertise_url \"http://u:T1@h:1?token=T2\" must be http://host:port");
    assert!(
        !e.contains("T1") && !e.contains("T2") && e.contains("must be http://host:port"),
        "{e}"
    );
    let kept = "HOSTILE_API_KEYS: expected HASH=principal[:groups][:scopes]";
    assert_eq!(
        redact_text(kept),
        kept,
        "an error naming a variable keeps its explanation"
    );
}

/// One command line (its arguments), its secrets (each must go), and what it prints.
type Case = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

/// Each of these printed a secret before the redaction read the whole command line word by word
/// (each checked alone against the redaction before it).
const VARIANTS: &[Case] = &[
    (
        &["sh", "-c", "npx -y server --api-key S1 --auth-token=S2"],
        &["S1", "S2"],
        &[
            "sh",
            "-c",
            "npx -y server --api-key redacted --auth-token=redacted",
        ],
    ),
    (
        &["sh", "-c", "export GITHUB_TOKEN=S1 && run --password S2"],
        &["S1", "S2"],
        &[
            "sh",
            "-c",
            "export GITHUB_TOKEN=redacted && run --password redacted",
        ],
    ),
    (
        &["bash", "-c", "'srv --token S1'"],
        &["S1"],
        &["bash", "-c", "'srv --token redacted'"],
    ),
    (
        &["srv", "-k", "S1", "-t", "S2", "-P", "S3"],
        &["S1", "S2", "S3"],
        &["srv", "-k", "redacted", "-t", "redacted", "-P", "redacted"],
    ),
    (
        &[
            "srv",
            "--pw",
            "S1",
            "--pat",
            "S2",
            "--sig=S3",
            "--session",
            "S4",
        ],
        &["S1", "S2", "S3", "S4"],
        &[
            "srv",
            "--pw",
            "redacted",
            "--pat",
            "redacted",
            "--sig=redacted",
            "--session",
            "redacted",
        ],
    ),
    (
        &["mysql", "-pS1", "-uroot"],
        &["S1"],
        &["mysql", "-predacted", "-uredacted"],
    ),
    (
        &["curl", "-u", "admin:S1"],
        &["S1"],
        &["curl", "-u", "redacted"],
    ),
    (
        &["srv", "--dsn", "admin:S1@db:5432/x"],
        &["S1"],
        &["srv", "--dsn", "admin:redacted@db:5432/x"],
    ),
    (
        &["srv", "Authorization=Bearer S1"],
        &["S1"],
        &["srv", "Authorization=redacted redacted"],
    ),
    (
        &["srv", "Authorization=Bearer", "S1"],
        &["S1"],
        &["srv", "Authorization=redacted", "redacted"],
    ),
    (
        &["srv", "--header=Authorization: Bearer S1"],
        &["S1"],
        &["srv", "--header=Authorization: redacted redacted"],
    ),
    (
        &["srv", "-H", "Authorization:", "Basic", "S1"],
        &["S1"],
        &["srv", "-H", "Authorization:", "redacted", "redacted"],
    ),
    (
        &["srv", "--conn", "Host=db;Username=u;Password=S1"],
        &["S1"],
        &["srv", "--conn", "Host=db;Username=u;Password=redacted"],
    ),
    (
        &["srv", "--opts", "user=u&pwd=S1,token=S2"],
        &["S1", "S2"],
        &["srv", "--opts", "user=u&pwd=redacted,token=redacted"],
    ),
    (
        &["srv", "--config", r#"{"apiKey":"S1","name":"n"}"#],
        &["S1"],
        &["srv", "--config", r#"{"apiKey":"redacted","name":"n"}"#],
    ),
    (
        &["srv", "--config", r#"{ "client_secret" : "S\"1", "x": 1 }"#],
        &["S\\"],
        &[
            "srv",
            "--config",
            r#"{ "client_secret" : "redacted", "x": 1 }"#,
        ],
    ),
    (
        &["sh", "-c", r#"run --json '{\"accessToken\":\"S1\"}'"#],
        &["S1"],
        &["sh", "-c", r#"run --json '{\"accessToken\":\"redacted\"}'"#],
    ),
    (
        &["srv", "--apikey\tS1", "--token\nS2"],
        &["S1", "S2"],
        &["srv", "--apikey\tredacted", "--token\nredacted"],
    ),
    (
        &["srv", "--token", "--S1"],
        &["S1"],
        &["srv", "--token", "redacted"],
    ),
    (
        &[
            "srv",
            "ghp_S1abcdefgh",
            "xoxb-S2abcdefgh",
            "sk-S3abcdefghij",
        ],
        &["S1", "S2", "S3"],
        &["srv", "redacted", "redacted", "redacted"],
    ),
    (
        &[
            "srv",
            "--webhook",
            "https://hooks.example.com/services/T0/B0/S1x9KfQ2mZ8pL4rT7vW3nY6b",
        ],
        &["S1x9"],
        &[
            "srv",
            "--webhook",
            "https://hooks.example.com/services/T0/B0/redacted",
        ],
    ),
];

/// Redacted before, and still (their words read differently now).
const KEPT: &[Case] = &[
    (
        &["srv", "--password:S1", "TOKEN: S2"],
        &["S1", "S2"],
        &["srv", "--password:redacted", "TOKEN: redacted"],
    ),
    (
        &["srv", "mongodb://admin:S1@h1,h2:27017/db"],
        &["S1"],
        &["srv", "mongodb://redacted@h1,h2:27017/db"],
    ),
];

#[test]
fn a_command_line_is_read_word_by_word_and_every_secret_in_it_goes() {
    for (line, secrets, shown) in VARIANTS.iter().chain(KEPT) {
        let mut v = json!(line);
        scrub(&mut v);
        let printed = v.to_string();
        for s in *secrets {
            assert!(!printed.contains(s), "{s} of {line:?} printed: {printed}");
        }
        assert_eq!(v, json!(shown), "{line:?}");
    }
}

#[test]
fn a_command_line_without_secrets_prints_as_written() {
    for line in [
        &[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/srv/data",
        ][..],
        &["sh", "-c", "exec python3 server.py --port 8080 --verbose"],
        &[
            "docker",
            "run",
            "-i",
            "--rm",
            "-v",
            "/data:/data:ro",
            "-e",
            "MODE=fast",
            "image:1.2",
        ],
        &["git", "clone", "git@github.com:org/repo.git"],
        &[
            "srv",
            "--url",
            "http://127.0.0.1:9000/mcp",
            "--name",
            "tokenizer",
        ],
        &[
            "srv",
            r#"{"model":"m","max_tokens":5}"#,
            "host:8080",
            "a=b;c=d",
        ],
    ] {
        let mut v = json!(line);
        scrub(&mut v);
        assert_eq!(v, json!(line));
    }
}
