//! Ten concurrent calls of one principal, each parked in its own round at once, answered in a
//! shuffled order: every answer reaches its own call (asks never cross between calls).

use rand::seq::SliceRandom;
use serde_json::json;

use super::gateway::{self, retry, sample, Call};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_calls_of_one_principal_each_get_their_own_answer_whatever_the_order() {
    let py1 = peers::py1().await;
    let gw = gateway::start(&[("py1", &py1.url)], gateway::Bridge::default()).await;
    let (url, http) = (gw.url(), gateway::http());
    // Half ask on the call's POST stream, half on their session's GET stream.
    let calls: Vec<Call> = (0..10)
        .map(|i| {
            let via = if i % 2 == 0 { "post" } else { "get" };
            Call::new(
                "ask_once",
                json!({"text": format!("call-{i}"), "via": via, "tag": format!("ten-{i}")}),
            )
            .id(json!(100 + i))
        })
        .collect();

    // Round 1 of all ten, concurrently; nothing is answered before all ten are parked.
    let rounds =
        futures_util::future::join_all(calls.iter().map(|c| c.send(&http, &url, json!({})))).await;
    let mut states = Vec::new();
    for (i, round) in rounds.iter().enumerate() {
        assert_eq!(
            round.msg["id"],
            json!(100 + i),
            "round 1 of call {i} carries its own JSON-RPC id: {}",
            round.msg
        );
        let asks = round.input_requests();
        assert_eq!(asks.len(), 1, "call {i}: one ask: {}", round.msg);
        let (key, ask) = asks.iter().next().expect("one ask");
        assert_eq!(
            ask["method"], "sampling/createMessage",
            "call {i}: {}",
            round.msg
        );
        assert_eq!(
            ask["params"]["messages"][0]["content"]["text"],
            format!("question call-{i}"),
            "call {i} was asked another call's question: {}",
            round.msg
        );
        states.push((key.clone(), round.state()));
    }
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        10,
        "all ten exchanges are parked at once"
    );
    assert!(
        gw.gateway.bridge.pool.open_sessions() >= 10,
        "each call leases a session of its own"
    );

    let mut order: Vec<usize> = (0..10).collect();
    order.shuffle(&mut rand::rng());
    for &i in &order {
        let (key, state) = &states[i];
        let answer =
            json!({ key.as_str(): sample(&format!("answer-for-call-{i}"), &format!("model-{i}")) });
        let done = calls[i].send(&http, &url, retry(answer, state)).await;
        let via = if i % 2 == 0 { "post" } else { "get" };
        assert_eq!(
            done.text(),
            format!("ask_once[call-{i}] via {via}: answer-for-call-{i} (model=model-{i})"),
            "call {i} (answered in the order {order:?}) did not get its own answer"
        );
        assert_eq!(done.msg["id"], json!(100 + i));
    }
    for i in 0..10 {
        assert_eq!(
            py1.events(&format!("ten-{i}")),
            ["start", "done"],
            "upstream events of call {i}"
        );
    }
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        0,
        "the park table is empty again"
    );
    gw.stop().await;
}
