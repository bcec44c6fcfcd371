//! Per-upstream resilience (issue 15, its third part): an upstream's several `urls` balanced
//! behind breakers, a dead endpoint ejected and readmitted when it returns, an upstream that
//! keeps failing refused fast, and `max_in_flight` shedding. Against the project's conformance
//! fixture (`mcp==2.3.0`), processes the tests kill and start again on the same port.

use serde_json::{json, Value};

use crate::support::call::{http, Call, Reply};
use crate::support::gateway::{Gateway, Upstream};
use crate::support::peers::{self, own_modern_fixture, own_modern_fixture_at};
use sluice::Running;

const SIMPLE: &str = "This is a simple text response for testing.";

fn gateway() -> Gateway {
    Gateway::new()
        .named("resilience.toml")
        .top("prefix", "always")
}

async fn simple(url: &str) -> Reply {
    Call::new("fx__test_simple_text", json!({}))
        .caps(json!({}))
        .send(&http(), url, json!({}))
        .await
}

fn breakers(gw: &Running) -> Vec<&'static str> {
    gw.gateway.catalog.upstreams[0]
        .balancer
        .endpoints
        .states()
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

async fn get(gw: &Running, path: &str) -> String {
    let at = gw.url().replace("/mcp", path);
    http()
        .get(&at)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_of_two_endpoints_killed_calls_keep_succeeding_and_it_is_readmitted_when_it_returns(
) {
    let a = own_modern_fixture("res-a").await;
    let b = own_modern_fixture("res-b").await;
    let up = Upstream::replicas("fx", &[&a.url, &b.url])
        .key("breaker_failures", 2)
        .key("breaker_open_ms", 300);
    let gw = gateway().upstream_spec(up).healthy().start().await;
    let url = gw.url();
    for _ in 0..4 {
        assert_eq!(simple(&url).await.text(), SIMPLE);
    }
    let port = port_of(&a.url);
    a.kill();
    // Its requests were never sent (no connection): each goes to the other endpoint instead.
    for _ in 0..8 {
        assert_eq!(simple(&url).await.text(), SIMPLE);
    }
    assert_eq!(
        breakers(&gw),
        ["open", "closed"],
        "the dead endpoint is ejected"
    );
    let ready: Value = serde_json::from_str(&get(&gw, "/readyz").await).expect("readyz JSON");
    assert_eq!(
        ready["upstreams"][0]["endpoints"][0]["breaker"], "open",
        "{ready}"
    );
    assert_eq!(
        ready["upstreams"][0]["endpoints"][1]["breaker"], "closed",
        "{ready}"
    );

    // Back on its port: once its open time is over, a trial request readmits it.
    let _a = own_modern_fixture_at("res-a2", port).await;
    crate::support::eventually_async("the endpoint is readmitted", || async {
        assert_eq!(simple(&url).await.text(), SIMPLE);
        breakers(&gw) == ["closed", "closed"]
    })
    .await;
    let metrics = get(&gw, "/metrics").await;
    for event in ["ejected", "readmitted", "retried"] {
        let line = metrics.lines().find(|l| {
            l.starts_with("sluice_upstream_resilience_total")
                && l.contains(&format!("event=\"{event}\""))
        });
        assert!(
            line.is_some_and(|l| !l.ends_with(" 0")),
            "{event} counted:\n{metrics}"
        );
    }
    drop(b);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_keeps_failing_opens_its_breaker_and_its_callers_get_a_fast_error() {
    let a = own_modern_fixture("res-fail-a").await;
    let b = own_modern_fixture("res-fail-b").await;
    let up = Upstream::replicas("fx", &[&a.url, &b.url])
        .key("breaker_failures", 1)
        .key("breaker_open_ms", 60_000);
    let gw = gateway().upstream_spec(up).healthy().start().await;
    let url = gw.url();
    assert_eq!(simple(&url).await.text(), SIMPLE);
    a.kill();
    b.kill();
    // The first call finds neither (it is tried on both, never sent): each breaker opens.
    let r = simple(&url).await;
    assert_eq!(r.status, 502, "no connection: {r:?}");
    assert_eq!(breakers(&gw), ["open", "open"]);
    let resp = Call::new("fx__test_simple_text", json!({}))
        .caps(json!({}))
        .request(&http(), &url, json!({}))
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 503);
    let retry: u64 = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    let msg: Value = resp.json().await.expect("a JSON-RPC error");
    let text = msg["error"]["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("upstream 'fx' is failing") && text.contains("breaker is open"),
        "{msg}"
    );
    assert!(
        msg["error"]["data"]["retryAfterMs"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 60_000),
        "{msg}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_in_flight_a_request_is_shed_with_503_and_retry_after() {
    let fx = peers::own_modern_fixture("res-busy").await;
    let gw = gateway()
        .upstream_spec(Upstream::new("fx", &fx.url).key("max_in_flight", 1))
        .healthy()
        .start()
        .await;
    let url = gw.url();
    // One call in flight: its progress has arrived, its answer not yet.
    let mut body = Call::new("fx__test_tool_with_progress", json!({}))
        .caps(json!({}))
        .body(json!({}));
    body["params"]["_meta"]["progressToken"] = json!("busy");
    let mut first = http()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "fx__test_tool_with_progress")
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    let chunk = first
        .chunk()
        .await
        .expect("a chunk")
        .expect("the first event");
    assert!(
        String::from_utf8_lossy(&chunk).contains("notifications/progress"),
        "{chunk:?}"
    );
    let shed = Call::new("fx__test_simple_text", json!({}))
        .caps(json!({}))
        .request(&http(), &url, json!({}))
        .send()
        .await
        .expect("POST");
    assert_eq!(shed.status().as_u16(), 503);
    assert_eq!(
        shed.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let msg: Value = shed.json().await.expect("a JSON-RPC error");
    assert!(
        msg["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_in_flight")),
        "{msg}"
    );
    while first.chunk().await.expect("the rest").is_some() {}
    // Its place is freed once Sluice is done with the first answer's stream (just after the
    // client read its last event).
    crate::support::eventually_async("the place is free again", || async {
        simple(&url).await.status == 200
    })
    .await;
    assert_eq!(simple(&url).await.text(), SIMPLE);
    gw.stop().await;
}
