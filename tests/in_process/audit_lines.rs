//! Every audit record is one line in any reader (issue 28, review F11): a name a client chose
//! holding U+2028, U+2029, NEL (U+0085), another C1 control or a bidirectional control is
//! written JSON-escaped, so the record decodes to the same text and no reader splits or
//! reorders it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::gateway::{ApiKey, Gateway};
use crate::support::modern::Spec;
use crate::support::rpc::{body, call, http};

const KEY: &str = "audit-lines-key-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_line_separators_is_written_escaped_on_one_audit_line() {
    let up = Spec::new("a").start().await;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-lines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let sink = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&sink);
    let gw = Gateway::new().audit_to(&sink).api_key(ApiKey::new(KEY, "alice")).upstream("a", &up.url()).healthy().start().await;
    let name = "a__x\u{2028}FORGED\u{2029}y\u{85}z\u{202e}w\u{2066}v\u{9b}u";
    // The mock runs any tool it is asked for: this one is served and audited.
    let answer = call(&http(), &gw.url(), &body(1, "tools/call", json!({"name": name, "arguments": {}}), json!({})), Some(KEY)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    // The writer is a separate task writing a file: polled until the record is there.
    let deadline = Instant::now() + Duration::from_secs(5);
    let raw = loop {
        let raw = std::fs::read_to_string(&sink).unwrap_or_default();
        if raw.ends_with('\n') && raw.contains("tools/call") {
            break raw;
        }
        assert!(Instant::now() < deadline, "no audit record within 5 s: {raw:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    for c in ['\u{2028}', '\u{2029}', '\u{85}', '\u{202e}', '\u{2066}', '\u{9b}'] {
        assert!(!raw.contains(c), "U+{:04X} written as it is: {raw:?}", c as u32);
    }
    let record = raw.lines().find(|l| l.contains("tools/call")).expect("the call's record");
    assert!(record.contains("x\\u2028FORGED\\u2029y\\u0085z\\u202ew\\u2066v\\u009bu"), "{record}");
    let v: Value = serde_json::from_str(record).expect("one JSON record");
    assert_eq!(v["name"], name, "the record decodes to the name the client sent");
}
