//! The walkthrough's round-cap steps: `repo__loop_forever`, a loop bomb that asks the model
//! again after every answer, is cut by Sluice at `budget.max_rounds`, and cancelled upstream.
//!
//! Takes the client, the steps so far and the tally of what the `repo` upstream saw; gives one
//! checked step each for the rounds the client saw, the refused retry and what reached the
//! upstream. Refuses nothing.

use serde_json::{json, Value};

use super::client::{sampled, Answer, Client};
use super::Steps;
use crate::upstream::Seen;
use crate::MAX_ROUNDS;

/// The tool, as Sluice lists it.
const TOOL: &str = "repo__loop_forever";

/// The model's answers, one per round.
const IDEAS: [&str; 3] = ["kvlet", "tinykv", "dewdrop"];

/// Waits (up to two seconds) until `seen` counted `event` at least `n` times; gives the count.
async fn settled(seen: &Seen, event: &str, n: usize) -> usize {
    for _ in 0..40 {
        if seen.count(event) >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    seen.count(event)
}

/// Runs the steps of the loop bomb.
pub(super) async fn run(c: &Client, s: &mut Steps, repo: &Seen) {
    let a = rounds(c, s).await;
    let message = a
        .body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("");
    s.check(
        &format!("the retry answering round {MAX_ROUNDS} gets -31010 with HTTP 400, its message naming the limit"),
        a.status == 400
            && a.error_code() == Some(-31010)
            && a.body["id"] == 40 + MAX_ROUNDS as u64
            && a.body.pointer("/error/data/limit") == Some(&json!(MAX_ROUNDS))
            && message.contains(&format!("limit of {MAX_ROUNDS} input rounds"))
            && message.contains("max_rounds"),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let cancelled = settled(repo, "cancelled loop_forever", 1).await;
    let asked = repo.count("ask loop_forever");
    s.check(
        &format!("the repo upstream sent exactly {MAX_ROUNDS} sampling asks for the call, and Sluice cancelled the call there (notifications/cancelled)"),
        asked == MAX_ROUNDS as usize && cancelled == 1,
        format!("repo saw: {asked} asks, {cancelled} notifications/cancelled for loop_forever"),
    );
}

/// Calls the tool and answers each of its rounds with the next idea; gives the last answer
/// (the one after the rounds stopped).
async fn rounds(c: &Client, s: &mut Steps) -> Answer {
    let caps = || json!({"sampling": {}});
    let args = json!({"topic": "names for a key-value store"});
    let mut a = c.call(40, TOOL, args.clone(), caps(), json!({})).await;
    let mut rounds = Vec::new();
    let mut states: Vec<String> = Vec::new();
    for (i, idea) in IDEAS.iter().enumerate() {
        let (keys, state) = a.round();
        let is_round = a.status == 200
            && a.body["result"]["resultType"] == "input_required"
            && keys == ["next"]
            && !state.is_empty();
        rounds.push(format!(
            "round {}: HTTP {} resultType={} inputRequests={keys:?}",
            i + 1,
            a.status,
            a.body["result"]["resultType"]
        ));
        if !is_round || states.contains(&state) {
            break;
        }
        states.push(state.clone());
        let answer = json!({"inputResponses": {"next": sampled(idea)}, "requestState": state});
        a = c
            .call(41 + i as u64, TOOL, args.clone(), caps(), answer)
            .await;
    }
    s.check(
        &format!(
            "repo__loop_forever (a loop bomb) asks the model again after every answer: the client receives exactly {MAX_ROUNDS} input_required rounds (budget.max_rounds = {MAX_ROUNDS})"
        ),
        states.len() == MAX_ROUNDS as usize,
        format!("answered {IDEAS:?} in turn; {}", rounds.join("; ")),
    );
    a
}
