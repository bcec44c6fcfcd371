//! Budgets are per principal: one API key that spends its sampling budget gets 429 with
//! `Retry-After` and `data.retryAfterMs` (`-31012`) while another key's budget is untouched; one
//! that opens more parked exchanges than `max_parked_per_principal` is refused (400 `-31011`)
//! while another principal is served.

use serde_json::{json, Value};

use super::setup::{self, alice, bob, refused};
use crate::support::call::{self, retry, sample, Call};
use crate::support::gateway::Gateway;
use crate::support::peers;

/// Sends `call` and gives the status, the `Retry-After` header and the JSON-RPC message.
pub(super) async fn send_with_headers(
    call: &Call,
    http: &reqwest::Client,
    url: &str,
    extra: Value,
) -> (u16, Option<String>, Value) {
    let resp = call
        .request(http, url, extra)
        .send()
        .await
        .expect("POST to sluice");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let msg: Value = resp.json().await.expect("a JSON answer");
    (status, retry_after, msg)
}

/// Asserts a spent window budget: 429, `Retry-After` in whole seconds rounded up from
/// `data.retryAfterMs`, and `code`.
pub(super) fn assert_window_spent(
    status: u16,
    retry_after: Option<String>,
    msg: &Value,
    code: i64,
) {
    assert_eq!(
        (status, msg["error"]["code"].as_i64()),
        (429, Some(code)),
        "{msg}"
    );
    let ms = msg["error"]["data"]["retryAfterMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("data.retryAfterMs: {msg}"));
    assert!(ms > 0 && ms <= 60_000, "retryAfterMs {ms}");
    let header: u64 = retry_after
        .expect("a Retry-After header")
        .parse()
        .expect("Retry-After in seconds");
    assert_eq!(
        header,
        ms.div_ceil(1000).max(1),
        "Retry-After agrees with data.retryAfterMs"
    );
    assert!(
        msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry in"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_spending_its_sampling_budget_gets_429_and_another_keys_budget_is_untouched() {
    // Two sampling asks per minute, both at once at most.
    let mock = setup::modern_mock().await;
    let budget = |g: Gateway| {
        g.budget("sampling_per_window", 2)
            .budget("sampling_burst", 2)
            .budget("window_ms", 60000)
            .budget("max_rounds", 10)
    };
    let gw = setup::start(&[("modern", &mock.url())], budget, &[]).await;
    let (url, http) = (gw.url(), call::http());
    let answer = json!({"llm": sample("x", "m")});

    // Alice: two rounds with one sampling ask each, then the third ask is over her budget.
    let a = alice("loop", json!({}));
    let r1 = a.send(&http, &url, json!({})).await;
    let r2 = a
        .send(&http, &url, retry(answer.clone(), &r1.state()))
        .await;
    let (status, retry_after, msg) =
        send_with_headers(&a, &http, &url, retry(answer.clone(), &r2.state())).await;
    assert_window_spent(status, retry_after, &msg, -31012);
    // A fresh call of Alice's is refused as well: the window is hers, not the call's.
    let (status, retry_after, msg) = send_with_headers(&a, &http, &url, json!({})).await;
    assert_window_spent(status, retry_after, &msg, -31012);

    // Bob's budget is untouched: his asks go through.
    let b = bob("loop", json!({}));
    let r1 = b.send(&http, &url, json!({})).await;
    let r2 = b
        .send(&http, &url, retry(answer.clone(), &r1.state()))
        .await;
    assert_eq!(
        r2.input_requests()["llm"]["params"]["messages"][0]["content"]["text"],
        "loop round 2"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstreams_ask_over_the_budget_gets_429_and_its_call_is_cancelled() {
    let py1 = peers::py1().await;
    let budget = |g: Gateway| {
        g.budget("sampling_per_window", 1)
            .budget("sampling_burst", 1)
            .budget("window_ms", 60000)
    };
    let gw = setup::start(&[("py1", &py1.url)], budget, &[]).await;
    let (url, http) = (gw.url(), call::http());
    let first = alice("ask_once", json!({"text": "a", "tag": "gov-budget-1"}));
    let r = first.send(&http, &url, json!({})).await;
    let key = r.input_requests().keys().next().unwrap().clone();
    let done = first
        .send(
            &http,
            &url,
            retry(json!({key: sample("fine", "m")}), &r.state()),
        )
        .await;
    assert_eq!(done.text(), "ask_once[a] via post: fine (model=m)");

    let second = alice("ask_once", json!({"text": "b", "tag": "gov-budget-2"}));
    let (status, retry_after, msg) = send_with_headers(&second, &http, &url, json!({})).await;
    assert_window_spent(status, retry_after, &msg, -31012);
    // The upstream's ask was refused and its call did not complete.
    let events = setup::wait_any(py1, "gov-budget-2", &["cancelled", "error McpError"]).await;
    assert!(!events.iter().any(|e| e == "done"), "{events:?}");

    // Bob's first ask of the window goes through.
    let b = bob("ask_once", json!({"text": "c", "tag": "gov-budget-3"}));
    assert_eq!(
        b.send(&http, &url, json!({})).await.input_requests().len(),
        1
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_asked_for_are_summed_per_window_per_principal() {
    // 120 tokens a minute: one ask of 100 fits, a second does not (429, -31013); one ask of 500
    // never fits a window (400, -31013).
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        |g: Gateway| {
            g.budget("tokens_per_window", 120)
                .budget("window_ms", 60000)
        },
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let ask = |n: u64| json!({"ask": setup::sampling_request("tokens", n)});
    assert_eq!(
        alice("shaped", ask(100))
            .send(&http, &url, json!({}))
            .await
            .input_requests()
            .len(),
        1
    );
    let (status, retry_after, msg) =
        send_with_headers(&alice("shaped", ask(100)), &http, &url, json!({})).await;
    assert_window_spent(status, retry_after, &msg, -31013);
    assert_eq!(
        bob("shaped", ask(100))
            .send(&http, &url, json!({}))
            .await
            .input_requests()
            .len(),
        1,
        "Bob's tokens are his own"
    );
    let never = bob("shaped", ask(500)).send(&http, &url, json!({})).await;
    assert_eq!(refused(&never, 400, -31013)["maxTokens"], 500);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_over_its_parked_cap_is_refused_while_another_is_served() {
    let py1 = peers::py1().await;
    let gw = setup::start(
        &[("py1", &py1.url)],
        |g: Gateway| g.budget("max_parked_per_principal", 2),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let ask =
        |who: fn(&str, Value) -> Call, tag: &str| who("ask_once", json!({"text": tag, "tag": tag}));

    // Alice parks two exchanges (each waits for her answer); her third is refused.
    let a1 = ask(alice, "gov-parked-a1");
    let a2 = ask(alice, "gov-parked-a2");
    let s1 = a1.send(&http, &url, json!({})).await;
    let s2 = a2.send(&http, &url, json!({})).await;
    assert_eq!(gw.gateway.bridge.parked.count_for("alice"), 2);
    let third = ask(alice, "gov-parked-a3")
        .send(&http, &url, json!({}))
        .await;
    let data = refused(&third, 400, -31011);
    assert_eq!(data, json!({"limit": 2, "perPrincipal": true}));
    assert!(
        third.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_parked_per_principal"),
        "{}",
        third.msg
    );
    // The refused exchange was not left running upstream.
    py1.wait_event("gov-parked-a3", "cancel-notified").await;

    // Bob is served while Alice is at her cap.
    let b = ask(bob, "gov-parked-b1");
    let sb = b.send(&http, &url, json!({})).await;
    let key = sb.input_requests().keys().next().unwrap().clone();
    assert_eq!(
        b.send(
            &http,
            &url,
            retry(json!({&key: sample("bob", "m")}), &sb.state())
        )
        .await
        .text(),
        "ask_once[gov-parked-b1] via post: bob (model=m)"
    );

    // Once Alice answers one, she may park again.
    let done = a1
        .send(
            &http,
            &url,
            retry(json!({&key: sample("one", "m")}), &s1.state()),
        )
        .await;
    assert_eq!(
        done.text(),
        "ask_once[gov-parked-a1] via post: one (model=m)"
    );
    let again = ask(alice, "gov-parked-a4")
        .send(&http, &url, json!({}))
        .await;
    assert_eq!(again.input_requests().len(), 1);
    drop(s2);
    gw.stop().await;
}
