//! The walkthrough's stdio step: `notes`, a 2025-11-25 server Sluice runs as a child process
//! (`sluice demo-stdio-server`), asks the client's model mid-call; the ask reaches the modern
//! client as an `input_required` round, exactly as an HTTP legacy server's does.
//!
//! Takes the client and the steps so far; gives one checked step for the round and one for the
//! result. Refuses nothing.

use serde_json::json;

use super::client::{sampled, Client};
use super::Steps;

/// The tool, as Sluice lists it.
const TOOL: &str = "notes__suggest_title";

/// Runs the stdio steps.
pub(super) async fn run(c: &Client, s: &mut Steps) {
    let args = json!({"text": "Sluice fronts stdio servers too."});
    let first = c
        .call(40, TOOL, args.clone(), json!({"sampling": {}}), json!({}))
        .await;
    let (keys, state) = first.round();
    let asked = keys
        .first()
        .map(|k| first.body["result"]["inputRequests"][k]["method"].clone());
    s.check(
        "notes__suggest_title (a stdio server Sluice started as a child process) asks the model mid-call: an input_required round",
        first.status == 200 && keys.len() == 1 && asked == Some(json!("sampling/createMessage")) && !state.is_empty(),
        format!("HTTP {} inputRequests {keys:?} ({})", first.status, asked.unwrap_or_default()),
    );
    let answers = json!({"requestState": state, "inputResponses": {keys.first().cloned().unwrap_or_default(): sampled("Gateways, stdio included")}});
    let done = c
        .call(41, TOOL, args, json!({"sampling": {}}), answers)
        .await;
    let text = done
        .body
        .pointer("/result/content/0/text")
        .and_then(|t| t.as_str())
        .unwrap_or("")
        .to_owned();
    s.check(
        "answering the round completes the call with the model's title",
        done.status == 200
            && done.body.pointer("/result/resultType") == Some(&json!("complete"))
            && text == "title: Gateways, stdio included",
        format!("HTTP {} {text:?}", done.status),
    );
}
