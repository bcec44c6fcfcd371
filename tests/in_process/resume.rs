//! SEP-1699 through Sluice in front of the Rust mock 2025-11-25 upstream, whose call stream ends
//! after an event id every time (a server that never answers): Sluice takes it up again with
//! `Last-Event-ID` at most 16 times, then the call fails saying so; a 2025-11-25 client sees each
//! early end on its own stream and takes it up with its own `Last-Event-ID`, to the same error;
//! a `Last-Event-ID` naming no stream of the session gets 405 saying why.

use serde_json::{json, Value};

use crate::support::call::{http, Call};
use crate::support::gateway::Gateway;
use crate::support::legacy::{self, Step};
use crate::support::legacy_client::{Legacy, Sse};
use crate::support::modern::tool_args;

async fn never_answers() -> legacy::Legacy {
    legacy::start(json!([tool_args("never", &[])]), |_| vec![Step::Primed(5)]).await
}

const GIVEN_UP: &str = "ended the call's stream 16 times before answering";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ends_a_calls_stream_for_ever_is_taken_up_16_times_then_the_call_fails() {
    let up = never_answers().await;
    let gw = Gateway::e2e()
        .upstream("flaky", &up.url())
        .all_legacy()
        .start()
        .await;
    let reply = Call::new("flaky__never", json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    let msg = reply.msg["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("upstream 'flaky'") && msg.contains(GIVEN_UP),
        "{reply:?}"
    );
    let resumed: Vec<Value> = up
        .seen("GET Last-Event-ID")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        resumed.len(),
        16,
        "one GET per early end, no more: {resumed:?}"
    );
    assert_eq!(resumed[0], "5", "the first from the POST's last event id");
    assert!(
        resumed[1..].iter().all(|id| id == "7"),
        "then from each resumed stream's own: {resumed:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_sees_each_early_end_and_takes_its_stream_up_with_last_event_id() {
    let up = never_answers().await;
    let cfg = Gateway::e2e();
    let audit = std::path::PathBuf::from(cfg.file("resume-audit.jsonl", ""));
    let gw = cfg
        .audit_to(&audit)
        .upstream("flaky", &up.url())
        .all_legacy()
        .start()
        .await;
    let mut client = Legacy::new(&gw.url());
    client.initialize(json!({})).await;
    let mut stream = client
        .stream(
            1,
            "tools/call",
            json!({"name": "flaky__never", "arguments": {}}),
        )
        .await;
    assert_eq!(stream.status, 200);
    let (mut ended_early, mut answer) = (0, None);
    // At most one stream per early end of the upstream's, and the POST's own.
    for _ in 0..=17 {
        let mut last = None;
        while let Some(e) = stream.next().await {
            last = e.id.clone().or(last);
            if !e.json().is_null() {
                answer = Some(e.json());
            }
        }
        if answer.is_some() {
            break;
        }
        ended_early += 1;
        let last = last.expect("every event carries an id");
        stream = Sse::of(client.resume(&last).await);
        assert_eq!(stream.status, 200, "taking up from {last}");
    }
    let answer = answer.expect("the call's answer on a taken-up stream");
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(GIVEN_UP),
        "{answer}"
    );
    assert_eq!(
        ended_early, 16,
        "the client saw each of the upstream's early ends"
    );
    // The call's last record is the GET's that received its answer: it names the call and
    // carries how it ended.
    let calls = || -> Vec<Value> {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let all = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        all.filter(|r| r["client_era"] == "legacy" && r["name"] == "flaky__never")
            .collect()
    };
    crate::support::eventually("the answering GET's audit record", || {
        calls().iter().any(|r| r["error_code"].is_i64())
    })
    .await;
    let records = calls();
    assert!(
        records.iter().all(|r| r["method"] == "tools/call"),
        "{records:?}"
    );
    assert_eq!(
        records.len(),
        17,
        "the POST's and each taking-up GET's: {records:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_event_id_naming_no_stream_of_the_session_gets_405_saying_why() {
    let up = never_answers().await;
    let gw = Gateway::e2e()
        .upstream("flaky", &up.url())
        .all_legacy()
        .start()
        .await;
    let mut client = Legacy::new(&gw.url());
    client.initialize(json!({})).await;
    for last in ["1-0", "99-3", "garbage", ""] {
        let resp = client.resume(last).await;
        assert_eq!(resp.status(), 405, "{last:?}");
        let text = resp.text().await.unwrap_or_default();
        assert!(
            text.contains("no stream of this session to resume from that Last-Event-ID"),
            "{last:?}: {text}"
        );
    }
    gw.stop().await;
}
