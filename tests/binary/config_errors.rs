//! A refused config says where and why, never with the value it refused (issue 28, review F7):
//! a secret on the wrong key, of the wrong type or misspelled is not printed by `sluice check`,
//! `sluice serve`, nor the log line of a failed reload (`SIGHUP`). Each config below holds a
//! canary where a secret could be put by mistake.

use std::time::Duration;

use crate::support::gateway::Gateway;
use crate::support::process::{scratch, strip_ansi, Sluice};

/// Every canary starts so.
const C: &str = "c4n4ry";

/// Configs `sluice check` refuses, each with a canary on the offending line (or beside it), and a
/// word of the error it must still give (where or what).
fn refused() -> Vec<(String, &'static str)> {
    let up = "listen = \"127.0.0.1:0\"\n[[upstream]]\nname = \"u\"\n";
    let http = format!("{up}url = \"http://127.0.0.1:1/mcp\"\n");
    let stdio = format!("{up}command = [\"srv\"]\n");
    let key = "A".repeat(43) + "=";
    vec![
        (format!("[state]\nkeys = \"1:{C}-keys-as-a-string-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n"), "state.keys"),
        (format!("[state]\nkeys = [\"{C}-no-id-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]\n"), "state"),
        (format!("[state]\nkeys = [\"1:{C}-short\"]\n"), "state"),
        (format!("[state]\nkeys = [\"1:{C}-a\" \"2:b\"]\n"), ":2:"),
        (format!("{http}headers = \"Authorization: Bearer {C}-headers-as-a-string\"\n"), "headers"),
        (format!("{http}headers = {{ \"Authorization\" = 5, \"X-Key\" = \"{C}-beside\" }}\n"), "Authorization"),
        (format!("{http}headers = {{ \"X-Api-Key\" = \"{C}-tab\\tx\\u0000\" }}\n"), "X-Api-Key"),
        (format!("{http}headers = {{ \"X-Api-Key\" = \"{C}-newline\\nx\" }}\n"), "X-Api-Key"),
        (format!("{http}era = \"{C}-era\"\n"), "era"),
        (format!("{http}bearer_token_env = [\"{C}-token-in-a-list\"]\n"), "bearer_token_env"),
        (format!("{http}bearer_token = \"{C}-no-such-key\"\n"), ":5:"),
        (format!("{stdio}env = \"TOKEN={C}-env-as-a-string\"\n"), "env"),
        (format!("{stdio}env = {{ TOKEN = 5, A = \"{C}-env-beside\" }}\n"), "TOKEN"),
        (format!("listen = \"127.0.0.1:0\"\n[auth]\napi_keys = [\"{C}-raw-api-key\"]\n"), "auth.api_keys"),
        (format!("{http}[[auth.api_keys]]\nsha256 = \"{C}-raw-key\"\nprincipal = \"a\"\n"), "hash"),
        (format!("listen = \"127.0.0.1:0\"\n[auth.jwt]\nissuer = \"i\"\nhs256_secret = \"{C}-jwt\"\n"), ":4:"),
        (format!("listen = \"127.0.0.1:0\"\nunknown_key_{C} = 1\n"), ":2:"),
        (format!("listen = \"127.0.0.1:0\"\n[timeouts]\nconnect_ms = \"{C}-ms\"\n"), "timeouts.connect_ms"),
        (format!("listen = \"127.0.0.1:0\"\n[telemetry]\notlp_endpoint = \"http://u:{C}-otlp@127.0.0.1:4318\"\nsampling_ratio = \"{C}-r\"\n"), "sampling_ratio"),
        (format!("{up}urls = [\"http://a:{C}-u1@127.0.0.1:1/mcp\", \"nothttp://b:{C}-u2@x\"]\n"), "urls"),
        (format!("{http}[cluster]\nredis_url = \"redis://:{C}-redis@h:6379/x y\"\nid = \"r1\"\nlisten = \"127.0.0.1:0\"\n[state]\nkeys = [\"1:{key}\"]\n"), "cluster"),
        (format!("{http}bearer_token_env = \"{C}-token-where-its-name-belongs\"\n"), "environment variable"),
    ]
}

/// The words of `text` holding a canary.
fn leaked(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| w.contains(C))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_config_is_told_where_and_why_without_the_value_it_refused() {
    for (config, says) in refused() {
        let path = scratch("config-errors").join("sluice.toml");
        std::fs::write(&path, &config).expect("write the config");
        for cmd in ["check", "serve"] {
            let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args([cmd, "--config"])
                .arg(&path)
                .env("NO_COLOR", "1")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output();
            let out = tokio::time::timeout(Duration::from_secs(60), run)
                .await
                .expect("sluice ends")
                .expect("run sluice");
            let said = strip_ansi(&format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            assert_ne!(
                out.status.code(),
                Some(0),
                "`sluice {cmd}` took\n{config}\nand said:\n{said}"
            );
            assert!(
                leaked(&said).is_empty(),
                "`sluice {cmd}` printed {:?} of\n{config}\n{said}",
                leaked(&said)
            );
            assert!(
                said.contains(says),
                "`sluice {cmd}` does not say {says:?} of\n{config}\n{said}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reload_logs_where_and_why_without_the_value_it_refused() {
    let s = Sluice::start(
        &Gateway::hostile()
            .upstream("a", "http://127.0.0.1:9/mcp")
            .text(),
    )
    .await;
    let mut n = 0;
    for (config, _) in refused() {
        std::fs::write(s.config_path(), &config).expect("break the config");
        s.signal("HUP").await;
        n += 1;
        s.logged("config reload failed", n).await;
    }
    let out = s.output();
    assert!(
        leaked(&out).is_empty(),
        "the reload log printed {:?}:\n{out}",
        leaked(&out)
    );
}
