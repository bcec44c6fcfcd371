//! A dual-era upstream (`mcp==2.3.0` speaks 2025-11-25 and 2026-07-28 on one URL) served to
//! each client on its own era (issue 12, item 3): a 2025-11-25 client on the upstream's
//! 2025-11-25 wire (bridge A behind bridge B), so the server's 2025-style tools that ask mid-call
//! work as they would direct; a 2026-07-28 client on its modern wire, answered as direct.

use serde_json::{json, Value};

use crate::support::call::{http, Call};
use crate::support::gateway::Gateway;
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_gets_the_dual_era_servers_2025_style_sampling_and_a_modern_client_what_it_gets_direct(
) {
    let py2 = peers::py2().await;
    let audit = peers::scratch_file("audit-dual.jsonl");
    let gw = Gateway::bridge_b()
        .audit_to(&audit)
        .upstream("py", &py2.url)
        .start()
        .await;
    let s = gw.gateway.catalog.upstreams[0].status();
    assert!(
        s.wire == sluice::upstream::Wire::Modern
            && s.legacy == sluice::upstream::LegacySide::Sessions,
        "probed as modern and 2025-11-25 both, with sessions"
    );

    // The 2025-11-25 SDK client: the tool that calls ctx.session.create_message mid-call gets a
    // real sampling request, as it would direct; the 2026-only tool fails as it does direct.
    let plan = json!({
        "url": gw.url(),
        "calls": [
            {"name": "py__ask_llm_legacy", "arguments": {"prompt": "dual-q"}, "expect": ["legacy sampling said: ECHO1[dual-q] (model=fake-llm-py1)"]},
            {"name": "py__ask_llm", "arguments": {"prompt": "dual-r"}, "expect": ["llm said: ECHO1[dual-r] (model=fake-llm-py1)"]},
            {"name": "py__ask_raw", "arguments": {"prompt": "dual-raw"}, "expect_error": -32603},
        ],
    });
    let through = peers::py1_client(&plan).await;
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
    assert_eq!(asked, ["dual-q", "dual-r"], "{}", through.transcript);
    // The audit names the wire each client was served on.
    let era_of = |client: &str| {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["client_era"] == client && r["name"] == "py__ask_llm_legacy")
            .map(|r| r["upstream_era"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    crate::support::eventually("the legacy call's audit record", || {
        !era_of("legacy").is_empty()
    })
    .await;
    assert!(
        era_of("legacy").iter().all(|e| e == "legacy"),
        "{:?}",
        era_of("legacy")
    );

    // A 2026-07-28 client: the same answers through Sluice as direct, tool by tool (Sluice
    // prefixes the names: the gateway serves `py__` + the upstream's name).
    for (tool, args) in [
        ("ask_llm_legacy", json!({"prompt": "m-q"})),
        ("ask_llm", json!({"prompt": "m-r"})),
        ("echo", json!({"text": "hi"})),
    ] {
        let direct = Call::new(tool, args.clone())
            .send(&http(), &py2.url, json!({}))
            .await;
        let via = Call::new(&format!("py__{tool}"), args)
            .send(&http(), &gw.url(), json!({}))
            .await;
        let shape = |m: &Value| {
            (
                m["error"]["code"].clone(),
                m["result"]["resultType"].clone(),
                m["result"]["isError"].clone(),
                m["result"]["content"][0]["text"].clone(),
                m["result"]["inputRequests"].as_object().map(|o| o.len()),
            )
        };
        assert_eq!(
            shape(&via.msg),
            shape(&direct.msg),
            "{tool}: through Sluice {} vs direct {}",
            via.msg,
            direct.msg
        );
        assert_eq!(via.status, direct.status, "{tool}");
    }
    crate::support::eventually("the modern call's audit record", || {
        !era_of("modern").is_empty()
    })
    .await;
    assert!(
        era_of("modern").iter().all(|e| e == "modern"),
        "{:?}",
        era_of("modern")
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn era_2026_07_28_keeps_every_client_on_the_modern_wire() {
    let py2 = peers::py2().await;
    let up = crate::support::gateway::Upstream::new("py", &py2.url).key("era", "2026-07-28");
    let gw = Gateway::bridge_b().upstream_spec(up).start().await;
    assert!(
        !gw.gateway.catalog.upstreams[0].status().legacy_too(),
        "not asked: the config says 2026-07-28"
    );
    let plan = json!({"url": gw.url(), "calls": [
        {"name": "py__ask_raw", "arguments": {"prompt": "m-raw"}, "expect": ["raw said: ECHO1[m-raw] (state=raw-round-1)"]},
    ]});
    let run = peers::py1_client(&plan).await;
    assert!(
        run.success,
        "{:#}\n{}",
        run.summary["failures"], run.transcript
    );
    gw.stop().await;
}

/// The conformance fixture's `test_reconnection` (mcp==2.3.0): on its 2025-11-25 wire it ends
/// the call's stream mid-call, after an event id, and finishes on the client's `GET` with
/// `Last-Event-ID` (SEP-1699).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ends_its_stream_mid_call_is_taken_up_for_each_era_of_client() {
    use crate::support::legacy_client::{Legacy, Sse};
    const DONE: &str = "Reconnection test completed";
    let fx = peers::own_modern_fixture("fixture-resume").await;
    let gw = Gateway::bridge_b().upstream("fx", &fx.url).start().await;
    assert!(
        gw.gateway.catalog.upstreams[0].status().legacy_too(),
        "the fixture is dual-era"
    );

    // The 2025-11-25 SDK client: Sluice's stream ends where the fixture's did; the SDK takes it up.
    let plan = json!({"url": gw.url(), "calls": [{"name": "fx__test_reconnection", "arguments": {}, "expect": [DONE]}]});
    let run = peers::py1_client(&plan).await;
    assert!(
        run.success,
        "{:#}\n{}",
        run.summary["failures"], run.transcript
    );

    // On the wire: the POST's stream ends without the answer; a GET from its last id brings the
    // rest, the server's log messages before and after its disconnect among them.
    let mut client = Legacy::new(&gw.url());
    client.initialize(json!({})).await;
    let mut post = client
        .stream(
            1,
            "tools/call",
            json!({"name": "fx__test_reconnection", "arguments": {}}),
        )
        .await;
    let (mut seen, mut last) = (Vec::new(), None);
    while let Some(e) = post.next().await {
        last = e.id.clone().or(last);
        seen.push(e.json());
    }
    assert!(
        !seen.iter().any(|m| m["id"] == 1),
        "the POST's stream ended before the answer: {seen:?}"
    );
    let last = last.expect("the POST's events carry ids");
    let mut get = Sse::of(client.resume(&last).await);
    assert_eq!(get.status, 200);
    let answer = loop {
        let m = get.next_message().await;
        if m["id"] == 1 {
            break m;
        }
        seen.push(m);
    };
    assert_eq!(answer["result"]["content"][0]["text"], DONE, "{answer}");
    let logs: Vec<&str> = seen
        .iter()
        .filter_map(|m| m["params"]["data"].as_str())
        .collect();
    assert_eq!(logs, ["Before disconnect", "After reconnect"], "{seen:?}");
    gw.stop().await;

    // A modern client, the fixture served on its 2025-11-25 wire: Sluice takes the stream up
    // itself and answers in one piece (before, the call failed: "closed the stream").
    let up = crate::support::gateway::Upstream::new("fx", &fx.url).key("era", "2025-11-25");
    let gw = Gateway::bridge_b()
        .upstream_spec(up)
        .all_legacy()
        .start()
        .await;
    let done = Call::new("fx__test_reconnection", json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    assert_eq!(done.text(), DONE, "{done:?}");
    gw.stop().await;
}
