//! Approval rounds: accepted (the call or ask goes on), declined (typed refusal `-31015`; the
//! upstream never sees the call, or its ask is refused), and impossible (a client that did not
//! declare elicitation gets 400 `-32021` naming it). Approval states are single use.

use serde_json::json;

use super::setup::{self, alice, approval_message, approve, calls_of, decline, refused};
use crate::support::call::{self, retry, sample};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_accepted_lets_the_call_go_on_once() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["default.toml"],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let wipe = alice("wipe", json!({}));
    let first = wipe.send(&http, &url, json!({})).await;
    let state = first.state();
    assert_eq!(
        wipe.send(&http, &url, retry(approve(), &state))
            .await
            .text(),
        "modern ran wipe"
    );
    // The same approval replayed is refused: it was used.
    let replay = wipe.send(&http, &url, retry(approve(), &state)).await;
    assert_eq!(refused(&replay, 400, -32602)["reason"], "unknown_exchange");
    // Retrying a fresh round without an answer asks again (that round's state is used up by it);
    // answering without the state starts over.
    let second = wipe.send(&http, &url, json!({})).await;
    let again = wipe
        .send(&http, &url, retry(json!({}), &second.state()))
        .await;
    approval_message(&again);
    let used = wipe
        .send(&http, &url, retry(approve(), &second.state()))
        .await;
    assert_eq!(
        refused(&used, 400, -32602)["reason"],
        "unknown_exchange",
        "a state that asked again is used"
    );
    let fresh = wipe
        .send(&http, &url, json!({"inputResponses": approve()}))
        .await;
    approval_message(&fresh);
    assert_eq!(
        calls_of(&mock, "wipe").len(),
        1,
        "exactly the one approved call reached the upstream"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_declined_or_cancelled_is_refused_and_the_upstream_never_sees_the_call() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["default.toml"],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let wipe = alice("wipe", json!({}));
    for answer in [
        decline(),
        json!({"sluice_approval": {"action": "cancel"}}),
        json!({"sluice_approval": {"action": "accept", "content": {"approve": false}}}),
    ] {
        let first = wipe.send(&http, &url, json!({})).await;
        let reply = wipe
            .send(&http, &url, retry(answer.clone(), &first.state()))
            .await;
        let data = refused(&reply, 400, -31015);
        assert_eq!(data["rule"], "approve-destructive-tools", "{answer}");
        assert!(
            reply.msg["error"]["message"]
                .as_str()
                .unwrap()
                .contains("declined"),
            "{}",
            reply.msg
        );
        // The declined state cannot be turned into an accept afterwards.
        let late = wipe
            .send(&http, &url, retry(approve(), &first.state()))
            .await;
        assert_eq!(
            refused(&late, 400, -32602)["reason"],
            "unknown_exchange",
            "{answer}"
        );
    }
    assert_eq!(
        calls_of(&mock, "wipe").len(),
        0,
        "a declined call reached the upstream"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_declined_for_a_legacy_ask_refuses_the_ask_and_ends_the_call() {
    let py1 = peers::py1().await;
    let gw = setup::start(&[("py1", &py1.url)], setup::defaults, &["default.toml"]).await;
    let (url, http) = (gw.url(), call::http());
    let call = alice(
        "sample_with",
        json!({"tools": true, "tag": "gov-decline-ask"}),
    );
    let first = call.send(&http, &url, json!({})).await;
    approval_message(&first);
    let reply = call
        .send(&http, &url, retry(decline(), &first.state()))
        .await;
    assert_eq!(
        refused(&reply, 400, -31015)["rule"],
        "approve-sampling-with-tools"
    );
    // The upstream's ask was answered with an error (never with a model's answer) and its call
    // ended: it either saw the error or was cancelled first.
    let events = setup::wait_any(py1, "gov-decline-ask", &["done", "cancelled"]).await;
    assert!(
        events.starts_with(&["start".to_owned(), "asked".to_owned()]),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e == "answered"), "{events:?}");
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_impossible_without_the_elicitation_capability() {
    let mock = setup::modern_mock().await;
    let py1 = peers::py1().await;
    let modern = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["default.toml"],
    )
    .await;
    let legacy = setup::start(&[("py1", &py1.url)], setup::defaults, &["default.toml"]).await;
    let http = call::http();

    // A destructive tool: refused before it reaches the upstream.
    let reply = alice("wipe", json!({}))
        .caps(json!({"sampling": {}}))
        .send(&http, &modern.url(), json!({}))
        .await;
    let data = refused(&reply, 400, -32021);
    assert_eq!(data, json!({"requiredCapabilities": {"elicitation": {}}}));
    assert!(
        reply.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("elicitation"),
        "{}",
        reply.msg
    );
    assert_eq!(calls_of(&mock, "wipe").len(), 0);

    // A legacy ask that needs approval: refused, and the upstream's call cancelled.
    let call = alice("sample_with", json!({"tools": true, "tag": "gov-noelicit"}))
        .caps(json!({"sampling": {"tools": {}}}));
    let reply = call.send(&http, &legacy.url(), json!({})).await;
    assert_eq!(
        refused(&reply, 400, -32021),
        json!({"requiredCapabilities": {"elicitation": {}}})
    );
    let events = py1.wait_event("gov-noelicit", "cancelled").await;
    assert!(events.contains(&"cancel-notified".to_owned()), "{events:?}");
    modern.stop().await;
    legacy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstreams_ask_needing_approval_is_held_until_the_user_approves() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["default.toml"],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    // Sampling that offers tools: the default policy wants approval before the client sees it.
    let mut ask = setup::sampling_request("with tools", 100);
    ask["params"]["tools"] = json!([{"name": "search", "inputSchema": {"type": "object"}}]);
    let call = alice("shaped", json!({"ask": ask}))
        .caps(json!({"elicitation": {}, "sampling": {"tools": {}}}));
    let r1 = call.send(&http, &url, json!({})).await;
    assert!(
        approval_message(&r1).contains("approve-sampling-with-tools"),
        "{}",
        r1.msg
    );
    assert!(
        !r1.input_requests().contains_key("ask"),
        "the ask is held back until approved: {}",
        r1.msg
    );
    // Approved: the held ask is shown, without another upstream request.
    let before = calls_of(&mock, "shaped").len();
    let r2 = call.send(&http, &url, retry(approve(), &r1.state())).await;
    assert_eq!(
        r2.input_requests()["ask"]["params"]["tools"][0]["name"],
        "search",
        "{}",
        r2.msg
    );
    assert_eq!(
        calls_of(&mock, "shaped").len(),
        before,
        "approving costs the upstream nothing"
    );
    // Answering it reaches the upstream with its own state.
    let done = call
        .send(
            &http,
            &url,
            retry(json!({"ask": sample("ok", "m")}), &r2.state()),
        )
        .await;
    assert!(done.text().starts_with("shaped got"), "{}", done.msg);
    assert_eq!(
        calls_of(&mock, "shaped").last().unwrap().params["requestState"],
        "shaped-state"
    );
    // Declined: typed refusal; without elicitation: -32021.
    let r1 = call.send(&http, &url, json!({})).await;
    refused(
        &call.send(&http, &url, retry(decline(), &r1.state())).await,
        400,
        -31015,
    );
    let blind = alice("shaped", json!({"ask": ask})).caps(json!({"sampling": {"tools": {}}}));
    let e = refused(&blind.send(&http, &url, json!({})).await, 400, -32021);
    assert_eq!(e["requiredCapabilities"], json!({"elicitation": {}}));
    gw.stop().await;
}
