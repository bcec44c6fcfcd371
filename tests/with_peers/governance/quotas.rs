//! Per-tool call quotas (`[[quota]]`, issue 16 item 2): counted per principal on the routed
//! tool, once per call (a round's retry continues a counted call), refused with 429 `-31017`,
//! `Retry-After` and `data.retryAfterMs`, the same through bridge A, where the refused call
//! never reaches the legacy upstream.

use serde_json::{json, Value};
use toml::Table;

use super::budgets::{assert_window_spent, send_with_headers};
use super::setup::{self, alice, bob, calls_of};
use crate::support::call::{self, retry, sample, Call};
use crate::support::gateway::Gateway;
use crate::support::peers;

/// A `[[quota]]` for group `eng` on `upstream`'s tools matching `tool`: `calls` a minute.
fn quota(name: &str, upstream: &str, tool: &str, calls: i64) -> impl FnOnce(Gateway) -> Gateway {
    let mut t = Table::new();
    t.insert("name".into(), name.into());
    t.insert("group".into(), toml::Value::Array(vec!["eng".into()]));
    t.insert("upstream".into(), toml::Value::Array(vec![upstream.into()]));
    t.insert("tool".into(), toml::Value::Array(vec![tool.into()]));
    t.insert("calls_per_window".into(), calls.into());
    t.insert("window_ms".into(), 60_000.into());
    move |g: Gateway| {
        g.top("quota", toml::Value::Array(vec![toml::Value::Table(t)]))
            .budget("max_rounds", 10)
    }
}

/// Sends `call` fresh and asserts the quota `name` of `limit` calls refused it: 429 `-31017`,
/// `Retry-After` agreeing with `data.retryAfterMs`, the quota named in `data`.
async fn assert_quota_spent(
    call: &Call,
    http: &reqwest::Client,
    url: &str,
    name: &str,
    limit: u64,
) {
    let (status, retry_after, msg) = send_with_headers(call, http, url, json!({})).await;
    assert_window_spent(status, retry_after, &msg, -31017);
    assert_eq!(
        (
            msg["error"]["data"]["quota"].as_str(),
            msg["error"]["data"]["limit"].as_u64()
        ),
        (Some(name), Some(limit)),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_quota_holds_exactly_per_principal_and_a_rounds_retry_is_not_another_call() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        quota("loops", "modern", "lo*", 2),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let answer: Value = json!({"llm": sample("x", "m")});

    // Alice (group eng): two calls of `loop`, each with two retries of its rounds, go through.
    for _ in 0..2 {
        let a = alice("loop", json!({}));
        let r1 = a.send(&http, &url, json!({})).await;
        let r2 = a
            .send(&http, &url, retry(answer.clone(), &r1.state()))
            .await;
        let r3 = a
            .send(&http, &url, retry(answer.clone(), &r2.state()))
            .await;
        assert_eq!(
            r3.msg["result"]["resultType"], "input_required",
            "{}",
            r3.msg
        );
    }
    let before = calls_of(&mock, "loop").len();
    assert_eq!(
        before, 6,
        "two calls of three requests each reached the upstream"
    );
    // The third call is over her quota and never reaches the upstream.
    assert_quota_spent(&alice("loop", json!({})), &http, &url, "loops", 2).await;
    assert_eq!(calls_of(&mock, "loop").len(), before);
    // Another tool of hers, and Bob (no group), are not counted by it.
    let echo = alice("echo", json!({})).send(&http, &url, json!({})).await;
    assert_eq!(echo.msg["result"]["resultType"], "complete", "{}", echo.msg);
    for _ in 0..3 {
        let b = bob("loop", json!({})).send(&http, &url, json!({})).await;
        assert_eq!(b.msg["result"]["resultType"], "input_required", "{}", b.msg);
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_quota_holds_through_bridge_a_and_the_refused_call_never_reaches_the_legacy_server()
{
    let py1 = peers::py1().await;
    let gw = setup::start(
        &[("py1", &py1.url)],
        quota("asks", "py1", "ask_once", 1),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let first = alice("ask_once", json!({"text": "a", "tag": "quota-1"}));
    let r = first.send(&http, &url, json!({})).await;
    let key = r.input_requests().keys().next().expect("one ask").clone();
    let done = first
        .send(
            &http,
            &url,
            retry(json!({key: sample("fine", "m")}), &r.state()),
        )
        .await;
    assert_eq!(done.text(), "ask_once[a] via post: fine (model=m)");

    assert_quota_spent(
        &alice("ask_once", json!({"text": "b", "tag": "quota-2"})),
        &http,
        &url,
        "asks",
        1,
    )
    .await;
    // Bob's call goes on, and the server saw his but never Alice's second.
    let b = bob("ask_once", json!({"text": "c", "tag": "quota-3"}))
        .send(&http, &url, json!({}))
        .await;
    assert!(!b.input_requests().is_empty(), "{}", b.msg);
    setup::wait_any(py1, "quota-3", &["start"]).await;
    assert!(
        py1.events("quota-2").is_empty(),
        "the refused call reached the upstream: {:?}",
        py1.events("quota-2")
    );
    gw.stop().await;
}
