//! Bridge A over HTTP/2 (`http2 = true`, issue 14): twelve exchanges parked at once on a
//! 2025-11-25 upstream that speaks HTTP/2 only hold twelve sessions, each with its GET stream and
//! its call's stream, and all of them are streams of one TCP connection (over HTTP/1.1 they are
//! 24 connections); each retry then gets its own call's answer on it. The upstream is the Rust
//! mock (tests/support/legacy.rs) served HTTP/2-only: the official SDKs' 2025-11-25 servers
//! here run on HTTP/1.1-only servers (uvicorn), and the modern SDK server over HTTP/2 is in
//! `with_peers/interop/http2.rs`.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::support::call::{http, retry, sample, Call};
use crate::support::gateway::{keys, Gateway, Upstream};
use crate::support::legacy::{self, Step};
use crate::support::modern::{result_text, tool_args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_parked_exchanges_share_one_http2_connection_and_each_retry_gets_its_own_answer() {
    let up = legacy::start_h2_only(json!([tool_args("ask", &["q"])]), |s| {
        let q = s.params["arguments"]["q"].as_str().unwrap_or_default().to_owned();
        let ask = format!("\"ask-{q}\"");
        vec![
            Step::Send(format!(
                r#"{{"jsonrpc":"2.0","id":{ask},"method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":"question {q}"}}}}],"maxTokens":10}}}}"#
            )),
            Step::Await(vec![ask]),
            Step::Send(result_text("{id}", &format!(r#"{{"content":[{{"type":"text","text":"done {q}"}}]}}"#))),
        ]
    })
    .await;
    let upstream = Upstream::new("old", &up.url()).key("era", "2025-11-25").key("http2", true);
    let gw = Gateway::bridge(keys::BRIDGE_A).upstream_spec(upstream).start().await;
    let (url, h) = (gw.url(), http());
    let calls: Vec<Call> = (0..12).map(|i| Call::new("ask", json!({"q": format!("c{i}")})).id(json!(i))).collect();
    let rounds = futures_util::future::join_all(calls.iter().map(|c| c.send(&h, &url, json!({})))).await;
    assert_eq!(gw.gateway.bridge.parked.len(), 12, "all twelve are parked at once");
    assert!(gw.gateway.bridge.pool.open_sessions() >= 12, "each on a session of its own");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1, "the probe, 12 sessions, their GET streams and calls: one connection");
    for (i, round) in rounds.iter().enumerate().rev() {
        let (key, ask) = round.input_requests().iter().next().map(|(k, v)| (k.clone(), v.clone())).expect("one ask");
        assert_eq!(ask["params"]["messages"][0]["content"]["text"], format!("question c{i}"), "{}", round.msg);
        let done = calls[i].send(&h, &url, retry(json!({ key: sample(&format!("answer {i}"), "m") }), &round.state())).await;
        assert_eq!(done.text(), format!("done c{i}"), "{}", done.msg);
    }
    let replies = up.replies();
    assert_eq!(replies.len(), 12, "each ask answered once: {replies:?}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1, "still the one connection");
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}
