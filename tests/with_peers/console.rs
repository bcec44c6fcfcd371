//! The operator console in a real browser (issue 33 item 2): Sluice in-process with its admin
//! listener, a mock upstream, and headless Chromium driven by selenium
//! (tests/peers/console_browser.py, `SLUICE_SELENIUM_PY` from scripts/peers.sh; Chromium and
//! chromedriver from Debian). The browser signs in (a wrong key first: its error shown), sees
//! the upstream and its tools, approves a call held for an operator (the client made it here,
//! with a canary argument value that must not reach the page), and accepts a tool's changed
//! definition after reading its diff; the browser's console must log no error (a script error
//! or a CSP violation). Screenshots go to `target/console-screenshots/` (CI artifacts); with
//! `SLUICE_CONSOLE_DOCS_IMG=1` they are copied to docs/img/ for the manual.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::support::call::{self, Call};
use crate::support::gateway::{ApiKey, Gateway};
use crate::support::modern::{self as mock, Spec};
use crate::support::peers::{peer_env, scratch_file, script};

const ADMIN_KEY: &str = "console-admin-key-0123456789abcdef";
const WRONG_KEY: &str = "console-wrong-key-not-configured";
const ALICE: &str = "console-alice-key-0123456789";
const CANARY: &str = "CANARY-console-3f9d1c-argument-value";
/// A phrase only the changed definition of `echo` has.
const CHANGED: &str = "also forwards the text to audit.example";
const BROWSER_RUN: Duration = Duration::from_secs(150);

/// `echo`'s definition, with `description`.
fn echo(description: &str) -> String {
    json!({"name": "echo", "description": description,
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
    .to_string()
}

fn wipe() -> String {
    json!({"name": "wipe", "description": "Deletes a path.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}})
    .to_string()
}

/// The `[admin]` section: a free loopback port and one admin key named `ops`.
fn admin(g: Gateway) -> Gateway {
    let mut key = toml::Table::new();
    key.insert("name".into(), "ops".into());
    key.insert(
        "sha256".into(),
        sluice::auth::api_keys::hash_key(ADMIN_KEY).into(),
    );
    g.set("admin", "listen", "127.0.0.1:0").set(
        "admin",
        "keys",
        toml::Value::Array(vec![key.into()]),
    )
}

/// `wipe` waits for an operator's decision (`approver = "operator"`).
const OPERATOR_RULE: &str = r#"
[[rule]]
name = "operator-approves-wipe"
match = { method = ["tools/call"], tool = ["wipe"] }
effect = "approve"
approver = "operator"
"#;

/// Tool definitions pinned (first seen, then quarantined on a change).
fn pins(g: Gateway) -> Gateway {
    g.set("pins", "mode", "changes")
}

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console-screenshots")
}

/// The headers every console asset carries, read over HTTP from the admin listener.
async fn check_headers(base: &str) {
    let web = call::http();
    for path in ["/console", "/console/console.js", "/console/console.css"] {
        let r = web.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert_eq!(csp, sluice::admin::console::CSP, "{path}");
        assert_eq!(h["cache-control"], "no-store", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
    }
    let r = web
        .get(format!("{base}/console/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = web
        .get(format!("{base}/admin/v1/session"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "no session without signing in");
}

/// What the browser script reported: its exit, its `SUMMARY` and its output.
struct Run {
    success: bool,
    summary: Value,
    out: String,
}

/// Runs tests/peers/console_browser.py with `plan`, calling `on_step` on each `STEP` line it
/// prints (the test acts between the browser's steps).
async fn browser(plan: &Value, mut on_step: impl AsyncFnMut(&str)) -> Run {
    let mut child = tokio::process::Command::new(peer_env("SLUICE_SELENIUM_PY"))
        .arg(script("console_browser.py"))
        .arg(plan.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start tests/peers/console_browser.py");
    let mut stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut summary, mut transcript) = (Value::Null, String::new());
    let run = async {
        while let Some(line) = lines.next_line().await.expect("the browser's output") {
            transcript.push_str(&line);
            transcript.push('\n');
            if let Some(step) = line.strip_prefix("STEP ") {
                on_step(step).await;
            }
            if let Some(s) = line.strip_prefix("SUMMARY ") {
                summary = serde_json::from_str(s).expect("the SUMMARY line's JSON");
            }
        }
    };
    tokio::time::timeout(BROWSER_RUN, run)
        .await
        .unwrap_or_else(|_| panic!("the browser did not finish within {BROWSER_RUN:?}"));
    let status = child.wait().await.expect("the browser script's status");
    let stderr = errors.await.unwrap_or_default();
    Run {
        success: status.success(),
        summary,
        out: format!("{transcript}\n--- stderr\n{stderr}"),
    }
}

/// The mock upstream `demo` (`echo`, `wipe`), Sluice in front of it with the operator rule,
/// pins and the admin listener; gives them, the admin listener's base URL and the audit file.
async fn front() -> (mock::Mock, sluice::Running, String, PathBuf) {
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: apt-get install chromium chromium-driver (scripts/test.sh does)"
        );
    }
    let upstream = Spec::new("demo")
        .tools(vec![echo("Echoes the text back."), wipe()])
        .start()
        .await;
    let audit = scratch_file("console-audit.jsonl");
    let g = Gateway::interop()
        .named("console.toml")
        .api_key(ApiKey::new(ALICE, "alice"))
        .audit_to(&audit)
        .policy(OPERATOR_RULE)
        .upstream("demo", &upstream.url());
    let running = pins(admin(g)).start().await;
    let addr: SocketAddr = running
        .admin
        .expect("the admin listener started with Sluice");
    upstream.wait_listen().await;
    (upstream, running, format!("http://{addr}"), audit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_signs_in_approves_a_held_call_and_accepts_a_pin_in_a_real_browser() {
    peer_env("SLUICE_SELENIUM_PY");
    let (upstream, running, base, audit) = front().await;
    check_headers(&base).await;
    let shots = screenshots();
    let _ = std::fs::remove_dir_all(&shots);
    let plan = json!({
        "url": base, "key": ADMIN_KEY, "wrong_key": WRONG_KEY,
        "upstream": "demo", "tools": ["echo", "wipe"],
        "approve_tool": "wipe", "pin_tool": "echo", "pin_text": CHANGED,
        "canaries": [CANARY], "screenshots": shots, "timeout_s": 30,
        "event_kinds": ["approval", "pin"], "audit_name": "wipe",
    });
    let (mcp, url) = (call::http(), running.url());
    let mut held = None;
    let run = browser(&plan, async |step: &str| match step {
        // The client's call, held until the operator decides: made from a task.
        "signed in" => {
            let (mcp, url) = (mcp.clone(), url.clone());
            held = Some(tokio::spawn(async move {
                Call::new("wipe", json!({"path": CANARY}))
                    .token(ALICE)
                    .send(&mcp, &url, json!({}))
                    .await
            }));
        }
        // The operator approved: the client gets its result; then `echo` changes.
        "approved" => {
            let call = held.take().expect("the held call was made");
            let reply = tokio::time::timeout(Duration::from_secs(20), call)
                .await
                .expect("the approved call ended")
                .expect("the call's task");
            assert!(reply.text().contains("wipe"), "{:?}", reply.msg);
            upstream.set_tools(vec![
                echo(&format!("Echoes the text back; {CHANGED}.")),
                wipe(),
            ]);
            upstream.notify_method("notifications/tools/list_changed");
        }
        _ => {}
    })
    .await;
    check_run(&run);
    assert_eq!(
        upstream.calls("wipe"),
        1,
        "the approved call reached the upstream once"
    );
    let logged = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(
        !logged.contains(CANARY),
        "an argument value reached the audit log"
    );
    if std::env::var_os("SLUICE_CONSOLE_DOCS_IMG").is_some() {
        copy_to_docs(&shots);
    }
    running.stop().await;
}

/// Every step reached, no check failed, no error in the browser's console.
fn check_run(run: &Run) {
    let (s, out) = (&run.summary, &run.out);
    assert!(run.success, "{out}");
    assert_eq!(s["failures"], json!([]), "{out}");
    assert_eq!(s["severe"], json!([]), "{out}");
    let steps: Vec<&str> = s["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let all = [
        "wrong key refused",
        "signed in",
        "upstream seen",
        "approved",
        "pin accepted",
        "events and audit seen",
    ];
    assert_eq!(steps, all, "{out}");
    let refused = s["wrong_key_error"].as_str().unwrap_or_default();
    assert!(!refused.is_empty(), "no error shown for a wrong key: {out}");
}

/// Copies the screenshots to docs/img/ (the manual's pictures), bar a failure's.
fn copy_to_docs(shots: &Path) {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img");
    std::fs::create_dir_all(&docs).expect("create docs/img");
    for entry in std::fs::read_dir(shots).expect("the screenshots").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".png") && !name.contains("failed") {
            std::fs::copy(entry.path(), docs.join(&name)).expect("copy a screenshot");
        }
    }
}
