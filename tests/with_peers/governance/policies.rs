//! Each shipped policy file's effects on real asks and calls: `policies/default.toml`,
//! `policies/strict.toml` and `policies/permissive.toml` loaded as `--policy FILE`, in front of
//! the `mcp==1.30.0` upstream (its tools ask mid-call) and the modern mock (it counts calls).

use serde_json::json;

use super::setup::{self, alice, approval_message, approve, calls_of, refused};
use crate::support::call::{self, retry, sample};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_denies_a_legacy_ask_for_context_and_the_call_goes_on() {
    let py1 = peers::py1().await;
    let gw = setup::start(&[("py1", &py1.url)], setup::defaults, &["default.toml"]).await;
    let (url, http) = (gw.url(), call::http());
    // The ask never reaches the client: the upstream hears "rejected" and finishes its call.
    let call = alice(
        "sample_with",
        json!({"include_context": "thisServer", "tag": "gov-default-ctx"}),
    );
    let reply = call.send(&http, &url, json!({})).await;
    let text = reply.text();
    assert!(
        text.starts_with("sample_with: the ask was refused (-1: User rejected"),
        "{text}"
    );
    assert_eq!(
        py1.events("gov-default-ctx"),
        ["start", "asked", "refused -1", "done"]
    );
    // includeContext "none" is fine.
    let call = alice(
        "sample_with",
        json!({"include_context": "none", "tag": "gov-default-none"}),
    );
    let reply = call.send(&http, &url, json!({})).await;
    let (key, ask) = reply
        .input_requests()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(ask["params"]["includeContext"], "none");
    assert_eq!(
        call.send(
            &http,
            &url,
            retry(json!({key: sample("ok", "m")}), &reply.state())
        )
        .await
        .text(),
        "sample_with: ok (model=m)"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_puts_an_approval_round_before_a_legacy_ask_that_offers_tools() {
    let py1 = peers::py1().await;
    let gw = setup::start(&[("py1", &py1.url)], setup::defaults, &["default.toml"]).await;
    let (url, http) = (gw.url(), call::http());
    let call = alice(
        "sample_with",
        json!({"tools": true, "tag": "gov-default-tools"}),
    );
    let first = call.send(&http, &url, json!({})).await;
    // The approval round names the rule, the upstream, the tool and the shape of the ask.
    let msg = approval_message(&first);
    for part in [
        "approve-sampling-with-tools",
        "py1",
        "sample_with",
        "sampling/createMessage",
        "maxTokens 50",
        "1 tool",
    ] {
        assert!(
            msg.contains(part),
            "the approval message should name {part:?}: {msg}"
        );
    }
    // Approved: now the ask itself, with its tools.
    let second = call
        .send(&http, &url, retry(approve(), &first.state()))
        .await;
    let (key, ask) = second
        .input_requests()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(
        ask["params"]["tools"][0]["name"], "lookup",
        "{}",
        second.msg
    );
    let done = call
        .send(
            &http,
            &url,
            retry(json!({key: sample("used no tool", "m")}), &second.state()),
        )
        .await;
    assert_eq!(done.text(), "sample_with: used no tool (model=m)");
    assert_eq!(
        py1.events("gov-default-tools"),
        ["start", "asked", "answered", "done"]
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_puts_an_approval_round_before_a_destructive_tool_reaches_the_upstream() {
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
    let msg = approval_message(&first);
    assert!(
        msg.contains("approve-destructive-tools") && msg.contains("wipe") && msg.contains("modern"),
        "{msg}"
    );
    assert_eq!(
        calls_of(&mock, "wipe").len(),
        0,
        "the upstream saw the call before it was approved"
    );
    let done = wipe
        .send(&http, &url, retry(approve(), &first.state()))
        .await;
    assert_eq!(done.text(), "modern ran wipe");
    let seen = calls_of(&mock, "wipe");
    assert_eq!(seen.len(), 1);
    // The approved call goes up as the client first sent it: no approval state or answers.
    assert!(
        seen[0].params.get("requestState").is_none()
            && seen[0].params.get("inputResponses").is_none(),
        "{}",
        seen[0].body
    );
    // A tool that is not destructive runs at once.
    assert_eq!(
        alice("echo", json!({}))
            .send(&http, &url, json!({}))
            .await
            .text(),
        "modern ran echo"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_puts_an_approval_round_before_a_destructive_legacy_tool_runs() {
    let py1 = peers::py1().await;
    let gw = setup::start(&[("py1", &py1.url)], setup::defaults, &["default.toml"]).await;
    let (url, http) = (gw.url(), call::http());
    let erase = alice(
        "erase",
        json!({"what": "everything", "tag": "gov-default-erase"}),
    );
    let first = erase.send(&http, &url, json!({})).await;
    assert!(approval_message(&first).contains("erase"));
    assert!(
        py1.events("gov-default-erase").is_empty(),
        "the upstream ran the tool before it was approved"
    );
    let done = erase
        .send(&http, &url, retry(approve(), &first.state()))
        .await;
    assert_eq!(done.text(), "erased everything");
    assert_eq!(py1.events("gov-default-erase"), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_denies_a_modern_sampling_ask_over_4096_tokens_and_the_call_ends() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["default.toml"],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let big = alice(
        "shaped",
        json!({"ask": setup::sampling_request("big", 5000)}),
    );
    let reply = big.send(&http, &url, json!({})).await;
    let data = refused(&reply, 400, -31014);
    assert_eq!(data["rule"], "max-tokens-4096");
    assert!(
        reply.msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 4096 tokens"),
        "{}",
        reply.msg
    );
    assert_eq!(calls_of(&mock, "shaped").len(), 1, "no retry went upstream");
    // 4096 itself goes to the client.
    let fits = alice(
        "shaped",
        json!({"ask": setup::sampling_request("fits", 4096)}),
    );
    assert_eq!(
        fits.send(&http, &url, json!({})).await.input_requests()["ask"]["params"]["maxTokens"],
        4096
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_approves_every_sampling_and_tools_not_read_only() {
    let py1 = peers::py1().await;
    let mock = setup::modern_mock().await;
    let legacy = setup::start(&[("py1", &py1.url)], setup::defaults, &["strict.toml"]).await;
    let modern = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["strict.toml"],
    )
    .await;
    let http = call::http();

    // A plain sampling ask of a legacy tool: approved first. The tool itself is not read-only,
    // so the call is approved first too: two approval rounds, then the ask.
    let url = legacy.url();
    let call = alice("ask_once", json!({"text": "s", "tag": "gov-strict-ask"}));
    let r1 = call.send(&http, &url, json!({})).await;
    assert!(approval_message(&r1).contains("approve-tools-not-read-only"));
    assert!(py1.events("gov-strict-ask").is_empty());
    let r2 = call.send(&http, &url, retry(approve(), &r1.state())).await;
    assert!(approval_message(&r2).contains("approve-every-sampling"));
    let r3 = call.send(&http, &url, retry(approve(), &r2.state())).await;
    let key = r3.input_requests().keys().next().unwrap().clone();
    assert_eq!(
        call.send(
            &http,
            &url,
            retry(json!({key: sample("s", "m")}), &r3.state())
        )
        .await
        .text(),
        "ask_once[s] via post: s (model=m)"
    );
    // Sampling that offers tools is denied outright: the upstream hears "rejected".
    let tools = alice(
        "sample_with",
        json!({"tools": true, "tag": "gov-strict-tools"}),
    );
    let r1 = tools.send(&http, &url, json!({})).await;
    let r2 = tools.send(&http, &url, retry(approve(), &r1.state())).await;
    assert!(r2.text().contains("the ask was refused (-1"), "{}", r2.msg);

    // Modern: a read-only tool runs at once, any other is approved first.
    let url = modern.url();
    assert_eq!(
        alice("look", json!({}))
            .send(&http, &url, json!({}))
            .await
            .text(),
        "modern ran look"
    );
    let echo = alice("echo", json!({}));
    let r1 = echo.send(&http, &url, json!({})).await;
    assert!(approval_message(&r1).contains("approve-tools-not-read-only"));
    assert_eq!(calls_of(&mock, "echo").len(), 0);
    assert_eq!(
        echo.send(&http, &url, retry(approve(), &r1.state()))
            .await
            .text(),
        "modern ran echo"
    );
    legacy.stop().await;
    modern.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissive_lets_destructive_tools_and_this_servers_context_through_but_not_all_servers() {
    let py1 = peers::py1().await;
    let mock = setup::modern_mock().await;
    let legacy = setup::start(&[("py1", &py1.url)], setup::defaults, &["permissive.toml"]).await;
    let modern = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["permissive.toml"],
    )
    .await;
    let http = call::http();

    assert_eq!(
        alice("wipe", json!({}))
            .send(&http, &modern.url(), json!({}))
            .await
            .text(),
        "modern ran wipe"
    );
    let url = legacy.url();
    assert_eq!(
        alice("erase", json!({"what": "it"}))
            .send(&http, &url, json!({}))
            .await
            .text(),
        "erased it"
    );
    let this = alice(
        "sample_with",
        json!({"include_context": "thisServer", "tag": "gov-permissive-this"}),
    );
    let r = this.send(&http, &url, json!({})).await;
    assert_eq!(
        r.input_requests().values().next().unwrap()["params"]["includeContext"],
        "thisServer"
    );
    let all = alice(
        "sample_with",
        json!({"include_context": "allServers", "tag": "gov-permissive-all"}),
    );
    assert!(all
        .send(&http, &url, json!({}))
        .await
        .text()
        .contains("the ask was refused (-1"));
    drop(r);
    legacy.stop().await;
    modern.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_declines_a_modern_upstreams_url_elicitation_on_the_clients_behalf() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        setup::defaults,
        &["strict.toml"],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let ask = json!({"method": "elicitation/create", "params": {"mode": "url", "url": "https://pay.example/checkout",
        "message": "pay here", "elicitationId": "e1"}});
    let call =
        alice("shaped", json!({"ask": ask})).caps(json!({"elicitation": {"form": {}, "url": {}}}));
    // "shaped" is not read-only: approved first.
    let r1 = call.send(&http, &url, json!({})).await;
    approval_message(&r1);
    // The upstream's URL elicitation is not shown to the client...
    let r2 = call.send(&http, &url, retry(approve(), &r1.state())).await;
    assert!(
        r2.input_requests().is_empty(),
        "the denied elicitation reached the client: {}",
        r2.msg
    );
    // ...and the retry tells the upstream it was declined.
    let done = call.send(&http, &url, retry(json!({}), &r2.state())).await;
    assert_eq!(done.text(), r#"shaped got {"ask":{"action":"decline"}}"#);
    let seen = calls_of(&mock, "shaped");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].params["requestState"], "shaped-state");
    gw.stop().await;
}
