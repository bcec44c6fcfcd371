//! The identical-call breaker (`[loop_breaker]`, issue 34 item 4): one principal calling one
//! tool with the same canonical arguments past the limit is refused with 429 `-31021`,
//! `Retry-After` and `data.retryAfterMs`, before the upstream; on the 2026-07-28 path, through
//! bridge A (a 2025-11-25 upstream) and for a 2025-11-25 client (bridge B), one count per
//! principal across all three; other arguments, tools and principals are counted apart, and
//! an override of 0 leaves a tool uncounted. Two upstreams: names are prefixed, and the
//! refusal names the upstream's own tool.

use serde_json::json;
use toml::Table;

use super::budgets::{assert_window_spent, send_with_headers};
use super::setup::{self, alice, bob, calls_of, ALICE};
use crate::support::call;
use crate::support::gateway::Gateway;
use crate::support::legacy_client::Legacy;
use crate::support::peers;

/// `[loop_breaker]` with `max` identical calls a minute, off (an override of 0) for `look`.
fn breaker(max: i64) -> impl FnOnce(Gateway) -> Gateway {
    let mut off = Table::new();
    off.insert("tool".into(), toml::Value::Array(vec!["lo?k".into()]));
    off.insert("max_identical_calls".into(), 0.into());
    let mut t = Table::new();
    t.insert("max_identical_calls".into(), max.into());
    t.insert("window_ms".into(), 60_000.into());
    t.insert(
        "override".into(),
        toml::Value::Array(vec![toml::Value::Table(off)]),
    );
    move |g: Gateway| g.top("loop_breaker", toml::Value::Table(t))
}

async fn assert_repeated(c: &call::Call, http: &reqwest::Client, url: &str, tool: &str) {
    let (status, retry_after, msg) = send_with_headers(c, http, url, json!({})).await;
    assert_window_spent(status, retry_after, &msg, -31021);
    let data = &msg["error"]["data"];
    assert_eq!(
        (data["tool"].as_str(), data["limit"].as_u64()),
        (Some(tool), Some(3)),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_past_the_limit_are_refused_before_the_upstream_on_every_path() {
    let mock = setup::modern_mock().await;
    let py1 = peers::py1().await;
    let ups = [("modern", mock.url()), ("py1", py1.url.clone())];
    let ups: Vec<(&str, &str)> = ups.iter().map(|(n, u)| (*n, u.as_str())).collect();
    let gw = setup::start(&ups, breaker(3), &[]).await;
    let (url, http) = (gw.url(), call::http());

    // 2026-07-28: three identical calls (keys in any order, any spacing) go through.
    for args in [json!({"a": 1, "b": [1, 2]}), json!({"b": [1, 2], "a": 1})] {
        let r = alice("modern__echo", args)
            .send(&http, &url, json!({}))
            .await;
        assert_eq!(r.msg["result"]["resultType"], "complete", "{}", r.msg);
    }
    // The third, from a 2025-11-25 client of Alice's (bridge B): the same principal's count.
    let mut legacy = Legacy::with(&http, &url, Some(ALICE));
    legacy.initialize(json!({})).await;
    let third = json!({"name": "modern__echo", "arguments": {"b": [1, 2], "a": 1}});
    let (_, r) = legacy.call(3, "tools/call", third.clone()).await;
    assert!(r.get("result").is_some(), "{r}");
    let seen = calls_of(&mock, "echo").len();
    assert_repeated(
        &alice("modern__echo", json!({"a": 1, "b": [1, 2]})),
        &http,
        &url,
        "echo",
    )
    .await;
    let (_, r) = legacy.call(4, "tools/call", third).await;
    assert_eq!(r["error"]["code"], -31021, "bridge B refuses it too: {r}");
    assert_eq!(
        calls_of(&mock, "echo").len(),
        seen,
        "no refused call reached the upstream"
    );

    // Other arguments, another principal: counted apart.
    let other = alice("modern__echo", json!({"a": 2}))
        .send(&http, &url, json!({}))
        .await;
    assert_eq!(
        other.msg["result"]["resultType"], "complete",
        "{}",
        other.msg
    );
    let b = bob("modern__echo", json!({"a": 1, "b": [1, 2]}))
        .send(&http, &url, json!({}))
        .await;
    assert_eq!(b.msg["result"]["resultType"], "complete", "{}", b.msg);

    // Bridge A (a 2025-11-25 upstream): the fourth never reaches the server.
    for i in 0..3 {
        let tag = format!("loops-{i}");
        let r = alice("py1__erase", json!({"what": "x", "tag": "loops"}))
            .send(&http, &url, json!({}))
            .await;
        assert_eq!(r.text(), "erased x", "call {tag}: {}", r.msg);
    }
    let before = py1.events("loops").len();
    assert_repeated(
        &alice("py1__erase", json!({"tag": "loops", "what": "x"})),
        &http,
        &url,
        "erase",
    )
    .await;
    assert_eq!(
        py1.events("loops").len(),
        before,
        "the refused call reached the server"
    );

    // An override of 0 leaves a tool uncounted (one polled on purpose).
    for _ in 0..5 {
        let r = alice("modern__look", json!({"at": "status"}))
            .send(&http, &url, json!({}))
            .await;
        assert_eq!(r.msg["result"]["resultType"], "complete", "{}", r.msg);
    }
    gw.stop().await;
}
