//! Governance holds for legacy clients: the round cap ends a loop bomb with `-31010` on the
//! client's stream (raw and with the `mcp==1.30.0` client), and every audit record of a legacy
//! client's request names the client era `legacy`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::gateway::Gateway;
use crate::support::legacy_client::{sample, Legacy};
use crate::support::modern;
use crate::support::peers::{self, scratch_file};

const MAX_ROUNDS: usize = 2;

fn governed(audit: &std::path::Path) -> Gateway {
    Gateway::bridge_b()
        .budget("max_rounds", MAX_ROUNDS as i64)
        .audit_to(audit)
}

/// The audit file's records (one JSON object a line), once at least `n` were written.
async fn records(path: &std::path::Path, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Complete lines only: the writer may be mid-line.
        let recs: Vec<Value> = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l:?}: {e}")))
            .collect();
        if recs.len() >= n {
            return recs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than {n} audit records within 2 s: {recs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_cap_ends_a_loop_bomb_with_31010_in_the_legacy_clients_stream_and_audit_says_legacy(
) {
    let audit = scratch_file("audit-raw.jsonl");
    let m = modern::noted().await;
    let gw = governed(&audit).upstream("mock", &m.url()).start().await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({"sampling": {}})).await;
    let mut sse = c
        .stream(
            5,
            "tools/call",
            json!({"name": "mock__forever", "arguments": {"topic": "bomb"}}),
        )
        .await;
    assert_eq!(sse.status, 200);
    let mut asks = 0;
    let last = loop {
        let msg = sse.next_message().await;
        if msg.get("method").is_none() {
            break msg;
        }
        assert_eq!(msg["method"], "sampling/createMessage", "{msg}");
        asks += 1;
        assert!(asks <= MAX_ROUNDS, "more rounds than the cap: {msg}");
        let answered = c.post(&json!({"jsonrpc": "2.0", "id": msg["id"], "result": sample(&format!("idea {asks}"))})).await;
        assert_eq!(answered.status(), 202);
    };
    assert_eq!(
        asks, MAX_ROUNDS,
        "the client is asked exactly max_rounds times"
    );
    assert_eq!(last["id"], 5, "{last}");
    assert_eq!(last["error"]["code"], -31010, "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(&MAX_ROUNDS.to_string()),
        "the message names the limit: {last}"
    );
    sse.ends_within(Duration::from_secs(2))
        .await
        .expect("the stream ends after the error");
    assert_eq!(
        m.count("tools/call forever"),
        MAX_ROUNDS,
        "the capped retry never reached the upstream: {:?}",
        m.events()
    );
    assert_eq!(
        m.count("forever answered 1"),
        MAX_ROUNDS - 1,
        "each retry carried the client's answer: {:?}",
        m.events()
    );

    // initialize, notifications/initialized, tools/call, and one POSTed answer per round.
    let recs = records(&audit, 3 + MAX_ROUNDS).await;
    assert!(
        recs.iter().all(|r| r["client_era"] == "legacy"),
        "every record of a legacy client says so: {recs:#?}"
    );
    let call = recs
        .iter()
        .find(|r| r["method"] == "tools/call")
        .unwrap_or_else(|| panic!("no tools/call record: {recs:#?}"));
    assert_eq!(call["status"], 200, "{call}");
    assert!(
        recs.iter().any(|r| r["method"] == "initialize"),
        "the initialize record: {recs:#?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_1_30_client_gets_the_31010_error_and_modern_clients_stay_modern_in_the_audit() {
    let audit = scratch_file("audit-py1.jsonl");
    let m = modern::noted().await;
    let gw = governed(&audit).upstream("mock", &m.url()).start().await;
    let plan = json!({
        "url": gw.url(),
        "calls": [
            {"name": "mock__forever", "arguments": {"topic": "py1-bomb"}, "expect_error": -31010},
            {"name": "mock__echo", "arguments": {"text": "still fine"}, "expect": ["still fine"]},
        ],
    });
    let run = peers::py1_client(&plan).await;
    assert!(
        run.success,
        "{:#}\n{}",
        run.summary["failures"], run.transcript
    );
    assert_eq!(
        run.summary["asked"].as_array().unwrap().len(),
        MAX_ROUNDS,
        "{}",
        run.transcript
    );
    assert_eq!(
        run.summary["calls"][0]["error"]["code"], -31010,
        "{}",
        run.transcript
    );

    // A modern request on the same gateway is audited as modern.
    let modern = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = crate::support::call::http()
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(modern.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let recs = records(&audit, 1).await;
    let recs = {
        // Wait for the modern record (the last one written).
        let mut recs = recs;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !recs.iter().any(|r| r["client_era"] == "modern")
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
            recs = records(&audit, 1).await;
        }
        recs
    };
    let modern: Vec<_> = recs
        .iter()
        .filter(|r| r["client_era"] == "modern")
        .collect();
    assert_eq!(
        modern.len(),
        1,
        "only the modern tools/list is modern: {recs:#?}"
    );
    assert_eq!(modern[0]["method"], "tools/list");
    let legacy_methods: Vec<_> = recs
        .iter()
        .filter(|r| r["client_era"] == "legacy")
        .filter_map(|r| r["method"].as_str())
        .collect();
    for method in [
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "tools/list",
        "tools/call",
    ] {
        assert!(
            legacy_methods.contains(&method),
            "no legacy record for {method}: {recs:#?}"
        );
    }
    gw.stop().await;
}
