//! Every audit record is one line in any reader (issue 28, review F11): a principal an IdP
//! chose holding U+2028, U+2029, NEL (U+0085), another C1 control or a bidirectional control is
//! written JSON-escaped, so the record decodes to the same text and no reader splits or
//! reorders it; a tool name holding them is not a name and is recorded as `_OTHER` (F12).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::gateway::{ApiKey, Gateway};
use crate::support::modern::Spec;
use crate::support::rpc::{body, call, http};

const KEY: &str = "audit-lines-key-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_with_line_separators_is_written_escaped_on_one_audit_line() {
    let up = Spec::new("a").start().await;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("audit-lines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let sink = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&sink);
    let principal = "a\u{2028}FORGED\u{2029}y\u{85}z\u{202e}w\u{2066}v\u{9b}u";
    let gw = Gateway::new()
        .audit_to(&sink)
        .api_key(ApiKey::new(KEY, principal))
        .upstream("a", &up.url())
        .healthy()
        .start()
        .await;
    let name = "a__x\u{2028}FORGED";
    // The mock runs any tool it is asked for: this one is served and audited.
    let answer = call(
        &http(),
        &gw.url(),
        &body(
            1,
            "tools/call",
            json!({"name": name, "arguments": {}}),
            json!({}),
        ),
        Some(KEY),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    // The writer is a separate task writing a file: polled until the record is there.
    let deadline = Instant::now() + Duration::from_secs(5);
    let raw = loop {
        let raw = std::fs::read_to_string(&sink).unwrap_or_default();
        if raw.ends_with('\n') && raw.contains("tools/call") {
            break raw;
        }
        assert!(
            Instant::now() < deadline,
            "no audit record within 5 s: {raw:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    for c in [
        '\u{2028}', '\u{2029}', '\u{85}', '\u{202e}', '\u{2066}', '\u{9b}',
    ] {
        assert!(
            !raw.contains(c),
            "U+{:04X} written as it is: {raw:?}",
            c as u32
        );
    }
    let record = raw
        .lines()
        .find(|l| l.contains("tools/call"))
        .expect("the call's record");
    assert!(
        record.contains("a\\u2028FORGED\\u2029y\\u0085z\\u202ew\\u2066v\\u009bu"),
        "{record}"
    );
    let v: Value = serde_json::from_str(record).expect("one JSON record");
    assert_eq!(
        v["principal"], principal,
        "the record decodes to the principal as it was named"
    );
    assert_eq!(
        v["name"], "_OTHER",
        "a name holding line separators is not recorded"
    );
}

/// What may carry content or a credential never reaches the record (issue 28, review F12): a
/// URI no upstream serves is not recorded at all (what of a served one is kept: the unit tests
/// of `mcp/recorded.rs`), a sentence is no tool name, and a method Sluice does not know is
/// `_OTHER` unless it reads as a method name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uri_or_method_carrying_content_is_recorded_without_it() {
    let up = Spec::new("a").start().await;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("audit-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let sink = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&sink);
    let gw = Gateway::new()
        .audit_to(&sink)
        .api_key(ApiKey::new(KEY, "alice"))
        .upstream("a", &up.url())
        .healthy()
        .start()
        .await;
    let sent = [
        (
            "resources/read",
            json!({"uri": "data:text/plain,SECRET-ONE"}),
        ),
        (
            "resources/read",
            json!({"uri": "https://bob:SECRET-TWO@host/x"}),
        ),
        (
            "resources/read",
            json!({"uri": "https://host/a;sid=SECRET-THREE/b?k=SECRET-FOUR"}),
        ),
        (
            "tools/call",
            json!({"name": "a__the secret is SECRET-SIX", "arguments": {}}),
        ),
        ("the secret is SECRET-FIVE", json!({})),
        ("x-acme/op.v2", json!({})),
    ];
    for (i, (method, params)) in sent.iter().enumerate() {
        let _ = call(
            &http(),
            &gw.url(),
            &body(i as u64 + 1, method, params.clone(), json!({})),
            Some(KEY),
        )
        .await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let records: Vec<Value> = loop {
        let raw = std::fs::read_to_string(&sink).unwrap_or_default();
        let records: Vec<Value> = raw
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if records.len() >= sent.len() {
            assert!(
                !raw.contains("SECRET"),
                "content reached the audit log: {raw}"
            );
            break records;
        }
        assert!(
            Instant::now() < deadline,
            "{} audit records not written within 5 s: {raw:?}",
            sent.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let named: Vec<(Value, Value)> = records
        .iter()
        .map(|r| (r["method"].clone(), r["name"].clone()))
        .collect();
    // No upstream serves these URIs: they name nothing, and nothing of them is recorded.
    let reads: Vec<_> = named
        .iter()
        .filter(|(m, _)| m == "resources/read")
        .collect();
    assert!(
        reads.len() == 3 && reads.iter().all(|(_, n)| n.is_null()),
        "{named:?}"
    );
    // The only upstream is asked for any tool: routed, but a sentence is no name.
    assert!(
        named.contains(&(json!("tools/call"), json!("_OTHER"))),
        "{named:?}"
    );
    assert!(named.contains(&(json!("_OTHER"), Value::Null)), "{named:?}");
    assert!(
        named.contains(&(json!("x-acme/op.v2"), Value::Null)),
        "{named:?}"
    );
}
