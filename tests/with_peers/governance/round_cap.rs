//! The loop bomb: an upstream tool that samples forever is cut at `budget.max_rounds` exactly as
//! issue 4 counts it. With `max_rounds = N` the client receives N `input_required` results and
//! the retry answering the N-th gets 400 `-31010`; a legacy upstream sees exactly N asks and its
//! call cancelled, a modern upstream exactly N requests for the call and none after the refusal.

use serde_json::json;

use super::setup::{self, alice, calls_of, refused};
use crate::support::call::{self, retry, sample};
use crate::support::gateway::Gateway;
use crate::support::peers;

const N: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstream_sampling_forever_sees_exactly_n_asks_and_its_call_cancelled() {
    let py1 = peers::py1().await;
    let gw = setup::start(
        &[("py1", &py1.url)],
        |g: Gateway| g.budget("max_rounds", N as i64),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let call = alice("sample_forever", json!({"tag": "gov-loop-legacy"}));

    let mut reply = call.send(&http, &url, json!({})).await;
    for round in 1..=N {
        // Round `round` shows the upstream's `round`-th ask, and nothing else.
        let reqs = reply.input_requests().clone();
        assert_eq!(reqs.len(), 1, "round {round}: one ask: {}", reply.msg);
        let (key, ask) = reqs.iter().next().unwrap();
        assert_eq!(ask["method"], "sampling/createMessage");
        assert_eq!(
            ask["params"]["messages"][0]["content"]["text"],
            format!("round {round}"),
            "round {round}: {}",
            reply.msg
        );
        let state = reply.state();
        reply = call
            .send(
                &http,
                &url,
                retry(
                    json!({key: sample(&format!("answer {round}"), "m")}),
                    &state,
                ),
            )
            .await;
    }
    // The retry answering the N-th round is refused with the typed error...
    let data = refused(&reply, 400, -31010);
    assert_eq!(data["limit"], N);
    let message = reply.msg["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("budget.max_rounds") && message.contains(&N.to_string()),
        "{message}"
    );
    // ...and the upstream's call is cancelled: it answered N-1 asks (the N-th never got its
    // answer, so it never sent an N+1-th) and was told so by `notifications/cancelled`.
    let events = py1.wait_event("gov-loop-legacy", "cancelled").await;
    assert_eq!(
        events,
        [
            "start",
            "answered 1",
            "answered 2",
            "cancel-notified",
            "cancelled"
        ]
    );
    assert_eq!(gw.gateway.bridge.parked.len(), 0, "nothing stays parked");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstream_asking_forever_sees_exactly_n_requests_and_none_after_the_refusal() {
    let mock = setup::modern_mock().await;
    let gw = setup::start(
        &[("modern", &mock.url())],
        |g: Gateway| g.budget("max_rounds", N as i64),
        &[],
    )
    .await;
    let (url, http) = (gw.url(), call::http());
    let call = alice("loop", json!({}));

    let mut reply = call.send(&http, &url, json!({})).await;
    for round in 1..=N {
        let reqs = reply.input_requests().clone();
        assert_eq!(
            reqs["llm"]["params"]["messages"][0]["content"]["text"],
            format!("loop round {round}"),
            "{}",
            reply.msg
        );
        // The client holds Sluice's sealed state, never the upstream's own.
        let state = reply.state();
        assert!(
            !state.starts_with("up-"),
            "the upstream's requestState reached the client: {state}"
        );
        reply = call
            .send(
                &http,
                &url,
                retry(json!({"llm": sample("again", "m")}), &state),
            )
            .await;
    }
    let data = refused(&reply, 400, -31010);
    assert_eq!(data["limit"], N);
    // Exactly N requests for the call, and none after the refusal (Sluice refused before
    // forwarding). Each retry carried the upstream's own state back byte for byte.
    let seen = calls_of(&mock, "loop");
    assert_eq!(
        seen.len(),
        N as usize,
        "the upstream saw {} requests for the call",
        seen.len()
    );
    let states: Vec<_> = seen
        .iter()
        .map(|s| s.params.get("requestState").cloned())
        .collect();
    assert_eq!(states, [None, Some(json!("up-1")), Some(json!("up-2"))]);
    assert!(
        seen[1].body.contains(r#""requestState":"up-1""#),
        "restored byte for byte: {}",
        seen[1].body
    );
    // A later retry with any of the states is refused too and never reaches the upstream.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(calls_of(&mock, "loop").len(), N as usize);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_cap_is_set_per_upstream_and_per_group() {
    // Alice is in group "eng", whose override allows 1 round; Bob gets the global 2.
    let mock = setup::modern_mock().await;
    let budget = |g: Gateway| {
        g.budget("max_rounds", 2)
            .budget_override("eng", &[("max_rounds", 1)])
    };
    let gw = setup::start(&[("modern", &mock.url())], budget, &[]).await;
    let (url, http) = (gw.url(), call::http());
    let answer = json!({"llm": sample("x", "m")});

    let a = alice("loop", json!({}));
    let first = a.send(&http, &url, json!({})).await;
    let capped = a
        .send(&http, &url, retry(answer.clone(), &first.state()))
        .await;
    assert_eq!(refused(&capped, 400, -31010)["limit"], 1);

    let b = setup::bob("loop", json!({}));
    let first = b.send(&http, &url, json!({})).await;
    let second = b
        .send(&http, &url, retry(answer.clone(), &first.state()))
        .await;
    let capped = b.send(&http, &url, retry(answer, &second.state())).await;
    assert_eq!(refused(&capped, 400, -31010)["limit"], 2);
    assert_eq!(calls_of(&mock, "loop").len(), 1 + 2);
    gw.stop().await;
}
