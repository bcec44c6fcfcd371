//! Legacy sessions on the raw wire, in front of the Rust mock upstream: sealed ids bound to their
//! principal, idle expiry, DELETE, the 405/400 answers without a session, what Sluice answers
//! itself (exactly `{}`), no modern stamping on relayed results, and the LRU bound.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::gateway::{Gateway, ALICE_KEY, BOB_KEY};
use crate::support::legacy_client::{has_result_type, Legacy};
use crate::support::modern::{self, Noted};

async fn with_mock(setup: Gateway) -> (sluice::Running, Noted) {
    let m = modern::noted().await;
    let gw = setup.upstream("mock", &m.url()).start().await;
    (gw, m)
}

fn not_found(status: u16, msg: &Value, what: &str) {
    assert_eq!(status, 404, "{what}: {msg}");
    assert_eq!(msg["error"]["code"], -32600, "{what}: {msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_another_principals_session_ids_get_404() {
    let (gw, _m) = with_mock(Gateway::bridge_b().two_keys()).await;
    let mut alice = Legacy::new(&gw.url()).token(ALICE_KEY);
    alice.initialize(json!({})).await;
    let sid = alice.sid();
    assert!(sid.len() >= 32, "an unguessable id: {sid}");
    assert_eq!(
        alice.call(1, "ping", json!({})).await,
        (200, json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
    );

    // Forged: one character changed, a well-formed id never minted, garbage.
    let mut flipped = sid.clone();
    let last = flipped.pop().unwrap();
    flipped.push(if last == 'A' { 'B' } else { 'A' });
    // A well-formed id (key id 1, nonce, tag) Sluice never minted, and the earlier s1. form.
    let never = format!("s2.{}", "A".repeat(44));
    let old_form = format!("s1.{}", "A".repeat(43));
    assert!(
        sid.starts_with("s2.") && sid.len() == never.len(),
        "the id's form: {sid}"
    );
    for forged in [
        flipped.as_str(),
        never.as_str(),
        old_form.as_str(),
        "not-a-session",
        "s2.",
        "s1.",
    ] {
        let (status, msg) = alice.with_session(forged).call(2, "ping", json!({})).await;
        not_found(status, &msg, &format!("forged id {forged:?}"));
        assert_eq!(msg["id"], 2, "{msg}");
        let (status, msg) = alice
            .with_session(forged)
            .call(3, "tools/list", json!({}))
            .await;
        not_found(status, &msg, &format!("forged id {forged:?} on tools/list"));
    }

    // Bob holds alice's id: 404 on POST; GET and DELETE find no session of his (405), and
    // his DELETE does not end hers.
    let bob = Legacy::new(&gw.url()).token(BOB_KEY).with_session(&sid);
    let (status, msg) = bob.call(4, "ping", json!({})).await;
    not_found(status, &msg, "another principal's id");
    let (status, msg) = bob
        .call(
            5,
            "tools/call",
            json!({"name": "mock__echo", "arguments": {"text": "x"}}),
        )
        .await;
    not_found(status, &msg, "another principal's id on tools/call");
    assert_eq!(bob.get().await.status(), 405);
    assert_eq!(bob.delete().await.status(), 405);
    assert_eq!(
        alice.call(6, "ping", json!({})).await.0,
        200,
        "alice's session survived bob's DELETE"
    );

    // No credentials at all: 401 before any session lookup.
    let anonymous = Legacy::new(&gw.url()).with_session(&sid);
    assert_eq!(
        anonymous
            .post(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
            .await
            .status(),
        401
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_idle_session_expires_and_its_id_then_gets_404() {
    let (gw, _m) = with_mock(Gateway::bridge_b().bridge_key("client_session_idle_ms", 800)).await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({})).await;
    // Sluice's session clock is tokio's: paused, it moves only when the test advances it.
    tokio::time::pause();
    // Use keeps it alive past one idle period.
    for id in 1..=4 {
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(
            c.call(id, "ping", json!({})).await.0,
            200,
            "ping {id}, 250 ms after the last use"
        );
    }
    tokio::time::advance(Duration::from_millis(1200)).await;
    let (status, msg) = c.call(5, "ping", json!({})).await;
    not_found(status, &msg, "an expired session");
    assert_eq!(c.get().await.status(), 405, "GET with an expired session");
    // The client starts over.
    c.initialize(json!({})).await;
    assert_eq!(c.call(6, "ping", json!({})).await.0, 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_session_and_its_id_then_gets_404() {
    let (gw, _m) = with_mock(Gateway::bridge_b()).await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({})).await;
    let get = c.get().await;
    assert_eq!(get.status(), 200, "the standalone GET stream");
    assert!(get.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let deleted = c.delete().await;
    assert!(
        deleted.status().is_success(),
        "DELETE answered {}",
        deleted.status()
    );
    let (status, msg) = c.call(1, "ping", json!({})).await;
    not_found(status, &msg, "a deleted session");
    let (status, msg) = c
        .call(
            2,
            "tools/call",
            json!({"name": "mock__echo", "arguments": {"text": "x"}}),
        )
        .await;
    not_found(status, &msg, "a deleted session on tools/call");
    assert_eq!(c.get().await.status(), 405);
    assert_eq!(
        c.delete().await.status(),
        405,
        "a second DELETE finds nothing"
    );
    assert!(gw.gateway.rt.legacy_sessions.is_empty());
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_get_and_delete_are_405_and_a_response_object_is_400() {
    let (gw, _m) = with_mock(Gateway::bridge_b()).await;
    let c = Legacy::new(&gw.url());
    for resp in [c.get().await, c.delete().await] {
        assert_eq!(resp.status(), 405);
        assert_eq!(resp.headers()["allow"], "POST");
    }
    let resp = c
        .post(&json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}}))
        .await;
    assert_eq!(resp.status(), 400);
    let msg: Value = resp.json().await.unwrap();
    assert_eq!(
        (msg["error"]["code"].clone(), msg["id"].clone()),
        (json!(-32600), json!("srv-1")),
        "{msg}"
    );
    let resp = c
        .post(&json!({"jsonrpc": "2.0", "id": "srv-2", "error": {"code": -1, "message": "no"}}))
        .await;
    assert_eq!(resp.status(), 400);
    // A request that is neither initialize nor on a session is modern, and gets the modern
    // checks: no _meta envelope, -32602.
    let (status, msg) = c.call(3, "tools/list", json!({})).await;
    assert_eq!(
        (status, &msg["error"]["code"]),
        (400, &json!(-32602)),
        "{msg}"
    );
    // A response object on a valid session that answers nothing pending still gets 202.
    let mut s = Legacy::new(&gw.url());
    s.initialize(json!({})).await;
    assert_eq!(
        s.post(&json!({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}))
            .await
            .status(),
        202
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_answers_are_exactly_empty_and_relayed_results_carry_no_result_type() {
    let (gw, _m) = with_mock(Gateway::bridge_b()).await;
    let mut c = Legacy::new(&gw.url());
    let init = c.initialize(json!({"sampling": {}})).await;
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["serverInfo"]["name"], "sluice", "{init}");
    assert!(
        init["capabilities"]["tools"].is_object() && init["capabilities"]["logging"].is_object(),
        "{init}"
    );
    assert!(!has_result_type(&init), "{init}");
    let mut id = 10;
    for (method, params) in [
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "debug"})),
        ("resources/subscribe", json!({"uri": "mock://doc"})),
        ("resources/unsubscribe", json!({"uri": "mock://doc"})),
    ] {
        id += 1;
        let (status, msg) = c.call(id, method, params).await;
        assert_eq!(
            (status, msg),
            (200, json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            "{method} answered exactly {{}}"
        );
    }
    let (status, listed) = c.call(20, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<_> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["mock__echo", "mock__forever", "mock__hang"]);
    assert!(!has_result_type(&listed), "{listed}");
    let (status, called) = c
        .call(
            21,
            "tools/call",
            json!({"name": "mock__echo", "arguments": {"text": "plain"}}),
        )
        .await;
    assert_eq!(status, 200, "{called}");
    assert_eq!(called["id"], 21, "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "plain", "{called}");
    assert!(
        !has_result_type(&called),
        "the upstream's resultType was stripped: {called}"
    );
    assert!(
        called["result"].get("_meta").is_none(),
        "the modern serverInfo stamp was stripped: {called}"
    );

    // Older versions the SDKs still speak are negotiated as asked; unknown ones get the latest.
    for (asked, got) in [
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}});
        let msg: Value = Legacy::new(&gw.url())
            .post(&body)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(
            msg["result"]["protocolVersion"], got,
            "asked {asked}: {msg}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn sessions_are_bounded_and_the_least_recently_used_goes_first() {
    // The defaults: 1000 sessions, 30 minutes idle.
    let defaults = sluice::config::Config::from_toml(
        "listen = \"127.0.0.1:0\"\n",
        "defaults.toml",
        &Default::default(),
    )
    .unwrap();
    assert_eq!(defaults.bridge.max_client_sessions, 1000);
    assert_eq!(
        defaults.bridge.client_session_idle,
        Duration::from_secs(30 * 60)
    );

    let (gw, _m) = with_mock(Gateway::bridge_b().bridge_key("max_client_sessions", 2)).await;
    let (mut a, mut b, mut c) = (
        Legacy::new(&gw.url()),
        Legacy::new(&gw.url()),
        Legacy::new(&gw.url()),
    );
    // Paused: each use is 5 ms after the last on Sluice's (tokio's) clock, whatever the machine does.
    tokio::time::pause();
    a.initialize(json!({})).await;
    tokio::time::advance(Duration::from_millis(5)).await;
    b.initialize(json!({})).await;
    tokio::time::advance(Duration::from_millis(5)).await;
    // a is used after b: b is now the least recently used.
    assert_eq!(a.call(1, "ping", json!({})).await.0, 200);
    tokio::time::advance(Duration::from_millis(5)).await;
    c.initialize(json!({})).await;
    assert_eq!(gw.gateway.rt.legacy_sessions.len(), 2, "the bound holds");
    let (status, msg) = b.call(2, "ping", json!({})).await;
    not_found(status, &msg, "the evicted least recently used session");
    assert_eq!(
        a.call(3, "ping", json!({})).await.0,
        200,
        "the recently used session stays"
    );
    assert_eq!(c.call(4, "ping", json!({})).await.0, 200, "the new session");
    // Next out: a was touched before c.
    tokio::time::advance(Duration::from_millis(5)).await;
    assert_eq!(c.call(5, "ping", json!({})).await.0, 200);
    tokio::time::advance(Duration::from_millis(5)).await;
    b.initialize(json!({})).await;
    assert_eq!(a.call(6, "ping", json!({})).await.0, 404);
    assert_eq!(c.call(7, "ping", json!({})).await.0, 200);
    assert_eq!(b.call(8, "ping", json!({})).await.0, 200);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_whole_on_sse_takes_no_place_among_a_principals_open_streams() {
    let (gw, _m) =
        with_mock(Gateway::bridge_b().set("limits", "max_streams_per_principal", 1)).await;
    let mut client = Legacy::new(&gw.url());
    client.initialize(json!({})).await;
    let held = client.get().await;
    assert_eq!(
        held.status(),
        200,
        "the standalone stream: the principal's one open stream"
    );
    let (status, msg) = client.call(1, "tools/list", json!({})).await;
    assert_eq!(
        status, 200,
        "a list, answered whole on SSE, needs no open stream: {msg}"
    );
    assert!(
        msg["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{msg}"
    );
    let (status, msg) = client
        .call(
            2,
            "tools/call",
            json!({"name": "mock__echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(
        (status, msg["error"]["code"].clone()),
        (429, json!(-31018)),
        "a call's stream does: {msg}"
    );
    drop(held);
    gw.stop().await;
}
