//! `notifications/cancelled` from a legacy client cancels the upstream request: a 2025-11-25
//! upstream behind bridge A sees `notifications/cancelled` for its call, a 2026-07-28 upstream
//! sees its request's connection dropped, and the client's stream ends without an answer.

use std::time::Duration;

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::legacy_client::{sample, Legacy};
use crate::support::modern;
use crate::support::peers::{self};

fn cancelled(id: u64) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "the user changed their mind"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_clients_cancel_reaches_a_2025_upstream_behind_bridge_a() {
    let py1 = peers::py1().await;
    let gw = Gateway::bridge_b().upstream("py1", &py1.url).start().await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({"sampling": {}})).await;
    let mut sse = c
        .stream(
            31,
            "tools/call",
            json!({"name": "py1__slow", "arguments": {"ms": 10_000, "tag": "bb-cancel-slow"}}),
        )
        .await;
    assert_eq!(sse.status, 200);
    py1.wait_event("bb-cancel-slow", "start").await;
    assert_eq!(c.post(&cancelled(31)).await.status(), 202);
    let events = py1.wait_event("bb-cancel-slow", "cancelled").await;
    assert_eq!(
        events,
        ["start", "cancel-notified", "cancelled"],
        "the upstream got notifications/cancelled for its call"
    );
    // The cancelled request gets no answer: its stream just ends.
    let first = sse.next().await.expect("the priming event");
    assert!(first.data.is_empty(), "{first:?}");
    sse.ends_within(Duration::from_secs(2))
        .await
        .expect("the cancelled call's stream ends without an answer");
    // The session is still usable.
    assert_eq!(c.call(32, "ping", json!({})).await.0, 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_clients_cancel_drops_the_request_to_a_2026_upstream() {
    let m = modern::noted().await;
    let gw = Gateway::bridge_b().upstream("mock", &m.url()).start().await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({})).await;
    let mut sse = c
        .stream(
            7,
            "tools/call",
            json!({"name": "mock__hang", "arguments": {"tag": "h1"}}),
        )
        .await;
    m.wait_event("start h1").await;
    // A cancel naming another request changes nothing.
    assert_eq!(c.post(&cancelled(8)).await.status(), 202);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        m.count("closed h1"),
        0,
        "an unrelated cancel dropped the request: {:?}",
        m.events()
    );
    assert_eq!(c.post(&cancelled(7)).await.status(), 202);
    m.wait_event("closed h1").await;
    let _priming = sse.next().await;
    sse.ends_within(Duration::from_secs(2))
        .await
        .expect("the cancelled call's stream ends without an answer");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_the_client_is_being_asked_ends_the_rounds() {
    let m = modern::noted().await;
    let gw = Gateway::bridge_b().upstream("mock", &m.url()).start().await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({"sampling": {}})).await;
    let mut sse = c
        .stream(
            9,
            "tools/call",
            json!({"name": "mock__forever", "arguments": {"topic": "cancel"}}),
        )
        .await;
    let ask = sse.next_message().await;
    assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
    assert_eq!(c.post(&cancelled(9)).await.status(), 202);
    sse.ends_within(Duration::from_secs(2))
        .await
        .expect("the stream ends once the call is cancelled");
    // A late answer to the abandoned ask is still accepted and goes nowhere; no retry went up.
    let late = c
        .post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": sample("late")}))
        .await;
    assert_eq!(late.status(), 202);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        m.count("tools/call forever"),
        1,
        "no retry after the cancel: {:?}",
        m.events()
    );
    gw.stop().await;
}
