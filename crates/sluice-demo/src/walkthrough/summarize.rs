//! The walkthrough's bridge A steps: the legacy upstream's two-round tool, `summarize_repo`,
//! called on the modern wire, each of its sampling asks an `input_required` round.
//!
//! Takes the client and the steps so far; gives one checked step per fact: the capability the
//! asks need, each round, a retry that changed the request, the result, the ids, a replayed
//! state, and a round-1 answer the tool refuses. Refuses nothing.

use serde_json::{json, Value};

use super::client::{sampled, Answer, Client};
use super::Steps;

/// The tool, as Sluice lists it.
const TOOL: &str = "repo__summarize_repo";

/// The audience every call but the changed retry asks for.
const AUDIENCE: &str = "new contributors";

/// The model's answer to round 1.
const PICKED: &str = r#"["README.md", "src/server.rs", "src/store.rs"]"#;

/// The model's answer to round 2.
const SUMMARY: &str = "tinykv is a small in-memory key-value store spoken to over a line-based TCP protocol. Start in src/server.rs for the commands and src/store.rs for the data and snapshots.";

/// A `tools/call` of the tool for `audience` declaring `caps`, with `extra` params members.
async fn summarize_call(c: &Client, id: u64, caps: Value, audience: &str, extra: Value) -> Answer {
    c.call(id, TOOL, json!({"audience": audience}), caps, extra)
        .await
}

fn sampling() -> Value {
    json!({"sampling": {}})
}

/// The method and the first line of the prompt of the round's ask keyed `key`.
fn first_line(a: &Answer, key: &str) -> String {
    let ask = &a.body["result"]["inputRequests"][key];
    let prompt = ask
        .pointer("/params/messages/0/content/text")
        .and_then(Value::as_str)
        .unwrap_or("");
    format!(
        "{} \"{}…\"",
        ask["method"].as_str().unwrap_or("?"),
        prompt.lines().next().unwrap_or("")
    )
}

/// Runs the steps of the two-round tool.
pub(super) async fn run(c: &Client, s: &mut Steps) {
    needs_sampling(c, s).await;
    let first = first_round(c, s).await;
    let retry1 = second_round(c, s, &first).await;
    let (last, answer2) = result(c, s, &retry1).await;
    let ids = [&first.body["id"], &retry1.body["id"], &last.body["id"]];
    s.check(
        "the three requests of the call have different ids, and each answer carries its own",
        ids == [&json!(21), &json!(23), &json!(24)],
        format!("ids {} → {} → {}", ids[0], ids[1], ids[2]),
    );
    let a = summarize_call(c, 25, sampling(), AUDIENCE, answer2).await;
    s.check(
        "replaying the last requestState finds no exchange: -32602 with data.reason unknown_exchange",
        a.status == 400 && a.error_code() == Some(-32602) && a.body.pointer("/error/data/reason") == Some(&json!("unknown_exchange")),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );
    wrong_files(c, s).await;
}

/// Without the sampling capability the tool's ask cannot be relayed.
async fn needs_sampling(c: &Client, s: &mut Steps) {
    let a = summarize_call(c, 20, json!({}), AUDIENCE, json!({})).await;
    s.check(
        "repo__summarize_repo without the sampling capability gets -32021 with exactly data.requiredCapabilities {sampling}, HTTP 400",
        a.status == 400
            && a.error_code() == Some(-32021)
            && a.body["id"] == 20
            && a.body.pointer("/error/data") == Some(&json!({"requiredCapabilities": {"sampling": {}}})),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );
}

/// The first ask becomes a round; gives its answer.
async fn first_round(c: &Client, s: &mut Steps) -> Answer {
    let first = summarize_call(c, 21, sampling(), AUDIENCE, json!({})).await;
    let (keys1, state1) = first.round();
    s.check(
        "summarize_repo (request id 21): the upstream's first sampling ask becomes an input_required round keyed pick_files",
        first.status == 200 && first.body["result"]["resultType"] == "input_required" && keys1 == ["pick_files"] && !state1.is_empty(),
        format!(
            "HTTP {} resultType={} inputRequests={:?}: {}",
            first.status,
            first.body["result"]["resultType"],
            keys1,
            first_line(&first, "pick_files")
        ),
    );
    first
}

/// Answering the `first` round: with a changed request it fails the state check, unchanged it
/// gives the second round (returned).
async fn second_round(c: &Client, s: &mut Steps, first: &Answer) -> Answer {
    let (_, state1) = first.round();
    let answer1 =
        json!({"inputResponses": {"pick_files": sampled(PICKED)}, "requestState": state1});
    let a = summarize_call(c, 22, sampling(), "investors", answer1.clone()).await;
    s.check(
        "a retry that changes `audience` fails the state check: -32602 with data.reason request_changed, HTTP 400",
        a.status == 400 && a.error_code() == Some(-32602) && a.body.pointer("/error/data/reason") == Some(&json!("request_changed")),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let retry1 = summarize_call(c, 23, sampling(), AUDIENCE, answer1).await;
    let (keys2, state2) = retry1.round();
    s.check(
        "retry 1 (request id 23) answers pick_files with a JSON array of three files; the next ask is a new round keyed summarize",
        retry1.status == 200
            && retry1.body["result"]["resultType"] == "input_required"
            && keys2 == ["summarize"]
            && !state2.is_empty()
            && state2 != state1,
        format!(
            "answered {PICKED}; HTTP {} resultType={} inputRequests={:?}: {}",
            retry1.status,
            retry1.body["result"]["resultType"],
            keys2,
            first_line(&retry1, "summarize")
        ),
    );
    retry1
}

/// Answering the second round gives the tool's result; gives that answer and the retry's
/// params (to replay).
async fn result(c: &Client, s: &mut Steps, retry1: &Answer) -> (Answer, Value) {
    let (_, state2) = retry1.round();
    let answer2 =
        json!({"inputResponses": {"summarize": sampled(SUMMARY)}, "requestState": state2});
    let last = summarize_call(c, 24, sampling(), AUDIENCE, answer2.clone()).await;
    let r = &last.body["result"];
    let files = json!(["README.md", "src/server.rs", "src/store.rs"]);
    s.check(
        "retry 2 (request id 24) answers summarize; the result is complete with the chosen files and the summary",
        last.status == 200
            && r["resultType"] == "complete"
            && r["isError"] != true
            && r.pointer("/structuredContent/files") == Some(&files)
            && r.pointer("/structuredContent/summary") == Some(&json!(SUMMARY))
            && r.pointer("/content/0/text").and_then(Value::as_str).is_some_and(|t| t.contains("src/store.rs") && t.contains(SUMMARY)),
        format!("HTTP {} resultType={} structuredContent={}", last.status, r["resultType"], r["structuredContent"]),
    );
    (last, answer2)
}

/// A round-1 answer naming a file the repository lacks ends the call in the tool's error.
async fn wrong_files(c: &Client, s: &mut Steps) {
    let bad = summarize_call(c, 26, sampling(), AUDIENCE, json!({})).await;
    let (_, state) = bad.round();
    let wrong = r#"["README.md", "secrets.txt", "LICENSE"]"#;
    let answer = json!({"inputResponses": {"pick_files": sampled(wrong)}, "requestState": state});
    let a = summarize_call(c, 27, sampling(), AUDIENCE, answer).await;
    let text = a
        .body
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or("");
    s.check(
        "a round-1 answer naming a file the repository lacks is refused by the tool; Sluice relays its tool error",
        bad.body["result"]["resultType"] == "input_required"
            && a.status == 200
            && a.body["result"]["resultType"] == "complete"
            && a.body["result"]["isError"] == true
            && text.contains("secrets.txt"),
        format!("answered {wrong}; HTTP {} isError={} text={text:?}", a.status, a.body["result"]["isError"]),
    );
}
