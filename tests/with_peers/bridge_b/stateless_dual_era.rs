//! A dual-era upstream whose 2025-11-25 side is stateless (issue 29, point 7): the TypeScript SDK
//! 2.x (`@modelcontextprotocol/server@2.4.0`, `createMcpHandler` with its defaults) answers a
//! 2025-11-25 `initialize` with no `Mcp-Session-Id` and serves every 2025 request on a fresh
//! server instance, which never saw the client's capabilities and so cannot ask it anything.
//! Through Sluice a 2025-11-25 client is served on that server's 2026-07-28 wire instead (bridge
//! B turns its `input_required` round into a real `sampling/createMessage`): the call that fails
//! direct completes. (A dual-era server that keeps 2025-11-25 sessions keeps serving 2025-11-25
//! clients on that wire: `dual_era.rs`.)

use serde_json::{json, Value};

use crate::support::gateway::Gateway;
use crate::support::peers;

/// The `mcp==1.30.0` client (declaring sampling) calling `ts2_upstream.cjs`'s `ask_model` at `url`.
fn plan(url: &str, tool: &str, prompt: &str) -> Value {
    json!({"url": url, "calls": [{"name": tool, "arguments": {"prompt": prompt}, "expect": [format!("model said: ECHO1[{prompt}] (model=fake-llm-py1)")]}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_gets_the_sampling_round_of_a_server_stateless_on_2025_through_sluice_and_not_direct(
) {
    let ts2 = peers::own_ts2("ts2-stateless").await;
    let audit = peers::scratch_file("audit-stateless-dual.jsonl");
    let gw = Gateway::bridge_b()
        .audit_to(&audit)
        .upstream("ts", &ts2.url)
        .start()
        .await;
    let s = gw.gateway.catalog.upstreams[0].status();
    assert!(
        s.wire == sluice::upstream::Wire::Modern
            && s.legacy == sluice::upstream::LegacySide::Stateless,
        "probed as modern, and 2025-11-25 without sessions: {s:?}"
    );

    // Direct: the SDK's stateless 2025 leg cannot send the request; the call fails (isError).
    let direct = peers::py1_client(&plan(&ts2.url, "ask_model", "direct-q")).await;
    assert!(
        !direct.success,
        "direct, the call must fail: {}",
        direct.transcript
    );
    assert_eq!(
        direct.summary["session_id_issued"], false,
        "the server is stateless on 2025: {}",
        direct.transcript
    );
    assert_eq!(
        direct.summary["calls"][0]["is_error"], true,
        "{}",
        direct.transcript
    );
    assert_eq!(
        direct.summary["asked"],
        json!([]),
        "nothing reached the client's sampling callback: {}",
        direct.transcript
    );

    // Through Sluice: the same client, the same tool; its sampling callback answers mid-call.
    let through = peers::py1_client(&plan(&gw.url(), "ts__ask_model", "via-q")).await;
    assert!(
        through.success,
        "through Sluice: {:#}\n{}",
        through.summary["failures"], through.transcript
    );
    let asked: Vec<&str> = through.summary["asked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["prompt"].as_str())
        .collect();
    assert_eq!(asked, ["via-q"], "{}", through.transcript);

    // The audit names the wire the legacy client's call took: the upstream's modern one.
    let eras = || {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| {
                r["client_era"] == "legacy"
                    && r["name"] == "ts__ask_model"
                    && r["upstream_era"].is_string()
            })
            .map(|r| r["upstream_era"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    crate::support::eventually("the legacy call's audit record", || !eras().is_empty()).await;
    assert!(eras().iter().all(|e| e == "modern"), "{:?}", eras());
    gw.stop().await;
}
