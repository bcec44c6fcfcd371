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
    for name in ["url", "verbose", "port", "keep", "monkey-patch", "P", "principal", "x", "bypassing", "hotkeys-off"] {
        assert!(!secret_name(name), "{name}");
    }
}

#[test]
fn every_credential_in_a_list_of_urls_goes_and_the_url_stays_one() {
    assert_eq!(redact_url("http://a,http://u:p4ss@b/x"), "http://a,http://redacted@b/x");
    assert_eq!(redact_url("redis://:p4ss@h:6379/0"), "redis://redacted@h:6379/0");
    assert_eq!(
        redact_url("http://h/p?token=t&api_key=k&access_token=a&key=x#frag"),
        "http://h/p?token=redacted&api_key=redacted&access_token=redacted&key=redacted#redacted"
    );
    assert_eq!(redact_url("http://h/a@b"), "http://h/a@b", "an @ in the path is no userinfo");
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
    for t in ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"] {
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
            "Authorization: redacted",
            "--url",
            "http://redacted@h/x?access_token=redacted",
            "--client-secret",
            "--T9",
            "--verbose",
            "--port",
            "8080",
            "/srv/data",
            "mode=fast",
        ]),
        "a long flag after a secret flag is a flag, not its value"
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
    let e = redact_text("cluster.advertise_url \"http://u:T1@h:1?token=T2\" must be http://host:port");
    assert!(!e.contains("T1") && !e.contains("T2") && e.contains("must be http://host:port"), "{e}");
    let kept = "HOSTILE_API_KEYS: expected HASH=principal[:groups][:scopes]";
    assert_eq!(redact_text(kept), kept, "an error naming a variable keeps its explanation");
}
