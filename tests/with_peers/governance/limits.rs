//! Size limits of one ask and one answer: `maxTokens` per ask (deny, or clamp to the cap), bytes
//! per input request sent to the client, and bytes per input response sent back.

use serde_json::json;

use super::setup::{self, alice, calls_of, refused};
use crate::support::call::{self, retry, sample};
use crate::support::gateway::Gateway;
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_over_the_cap_is_denied_by_default() {
    let mock = setup::modern_mock().await;
    let py1 = peers::py1().await;
    let modern = setup::start(
        &[("modern", &mock.url())],
        |g: Gateway| g.budget("max_tokens_per_ask", 20),
        &[],
    )
    .await;
    let legacy = setup::start(
        &[("py1", &py1.url)],
        |g: Gateway| g.budget("max_tokens_per_ask", 20),
        &[],
    )
    .await;
    let http = call::http();

    // Modern: a denied sampling ask ends the call with the typed refusal, nothing retried upstream.
    let reply = alice(
        "shaped",
        json!({"ask": setup::sampling_request("big", 500)}),
    )
    .send(&http, &modern.url(), json!({}))
    .await;
    refused(&reply, 400, -31016);
    let message = reply.msg["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("maxTokens 500") && message.contains("budget.max_tokens_per_ask (20)"),
        "{message}"
    );
    assert_eq!(calls_of(&mock, "shaped").len(), 1);

    // Legacy: that ask alone is refused upstream, and the call goes on (py1 asks for 50).
    let call = alice("sample_with", json!({"tag": "gov-maxtokens-deny"}));
    let text = call.send(&http, &legacy.url(), json!({})).await.text();
    assert!(text.contains("the ask was refused (-1"), "{text}");
    assert_eq!(
        py1.events("gov-maxtokens-deny"),
        ["start", "asked", "refused -1", "done"]
    );
    modern.stop().await;
    legacy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_over_the_cap_is_clamped_when_configured() {
    let mock = setup::modern_mock().await;
    let py1 = peers::py1().await;
    let budget = |g: Gateway| {
        g.budget("max_tokens_per_ask", 20)
            .budget("max_tokens_action", "clamp")
    };
    let modern = setup::start(&[("modern", &mock.url())], budget, &[]).await;
    let legacy = setup::start(&[("py1", &py1.url)], budget, &[]).await;
    let http = call::http();

    let shaped = alice(
        "shaped",
        json!({"ask": setup::sampling_request("big", 500)}),
    );
    let reply = shaped.send(&http, &modern.url(), json!({})).await;
    let ask = &reply.input_requests()["ask"];
    assert_eq!(ask["params"]["maxTokens"], 20, "clamped: {}", reply.msg);
    assert_eq!(
        ask["params"]["messages"][0]["content"]["text"], "big",
        "the rest of the ask is untouched"
    );
    let done = shaped
        .send(
            &http,
            &modern.url(),
            retry(json!({"ask": sample("short", "m")}), &reply.state()),
        )
        .await;
    assert!(done.text().contains("short"), "{}", done.msg);

    let call = alice("sample_with", json!({"tag": "gov-maxtokens-clamp"}));
    let reply = call.send(&http, &legacy.url(), json!({})).await;
    let (key, ask) = reply
        .input_requests()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(ask["params"]["maxTokens"], 20, "{}", reply.msg);
    assert_eq!(
        call.send(
            &http,
            &legacy.url(),
            retry(json!({key: sample("ok", "m")}), &reply.state())
        )
        .await
        .text(),
        "sample_with: ok (model=m)"
    );
    modern.stop().await;
    legacy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_response_over_the_byte_limit_is_refused_and_a_smaller_one_still_answers() {
    let py1 = peers::py1().await;
    let mock = setup::modern_mock().await;
    let budget = |g: Gateway| g.budget("max_input_response_bytes", 300);
    let legacy = setup::start(&[("py1", &py1.url)], budget, &[]).await;
    let modern = setup::start(&[("modern", &mock.url())], budget, &[]).await;
    let http = call::http();
    let big = sample(&"x".repeat(1000), "m");

    // Legacy: refused (nothing goes upstream), the exchange stays parked for a proper answer.
    let url = legacy.url();
    let call = alice("ask_once", json!({"text": "size", "tag": "gov-bytes"}));
    let first = call.send(&http, &url, json!({})).await;
    let key = first.input_requests().keys().next().unwrap().clone();
    let reply = call
        .send(
            &http,
            &url,
            retry(json!({&key: big.clone()}), &first.state()),
        )
        .await;
    refused(&reply, 400, -31016);
    assert!(
        reply.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("budget.max_input_response_bytes (300)"),
        "{}",
        reply.msg
    );
    assert_eq!(py1.events("gov-bytes"), ["start"]);
    let done = call
        .send(
            &http,
            &url,
            retry(json!({&key: sample("small", "m")}), &first.state()),
        )
        .await;
    assert_eq!(done.text(), "ask_once[size] via post: small (model=m)");

    // Modern: refused before the retry reaches the upstream.
    let url = modern.url();
    let shaped = alice(
        "shaped",
        json!({"ask": setup::sampling_request("size", 50)}),
    );
    let first = shaped.send(&http, &url, json!({})).await;
    let reply = shaped
        .send(&http, &url, retry(json!({"ask": big}), &first.state()))
        .await;
    refused(&reply, 400, -31016);
    assert_eq!(
        calls_of(&mock, "shaped").len(),
        1,
        "the oversized answer went upstream"
    );
    let done = shaped
        .send(
            &http,
            &url,
            retry(json!({"ask": sample("small", "m")}), &first.state()),
        )
        .await;
    assert!(done.text().contains("small"), "{}", done.msg);
    legacy.stop().await;
    modern.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_request_over_the_byte_limit_refuses_the_call() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        |g: Gateway| g.budget("max_input_request_bytes", 200),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let reply = alice(
        "shaped",
        json!({"ask": setup::sampling_request(&"y".repeat(500), 50)}),
    )
    .send(&http, &url, json!({}))
    .await;
    refused(&reply, 400, -31016);
    assert!(
        reply.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("budget.max_input_request_bytes (200)"),
        "{}",
        reply.msg
    );
    let small = alice("shaped", json!({"ask": setup::sampling_request("y", 50)}))
        .send(&http, &url, json!({}))
        .await;
    assert_eq!(small.input_requests().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_after_an_sse_response_has_started_goes_in_stream() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        |g: Gateway| g.budget("max_tokens_per_ask", 20),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let call = alice(
        "streamed",
        json!({"ask": setup::sampling_request("big", 500)}),
    );
    let resp = call
        .request(&http, &url, json!({}))
        .send()
        .await
        .expect("POST to sluice");
    assert_eq!(resp.status(), 200, "the stream had started");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = resp.text().await.unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["method"], "notifications/progress");
    assert_eq!(
        (events[1]["id"].clone(), events[1]["error"]["code"].clone()),
        (json!(1), json!(-31016)),
        "{text}"
    );
    gw.stop().await;
}
