//! The walkthrough's approval steps: the demo policy lets the destructive
//! `alpha__delete_branch` run only once the user approved it in an elicitation round.
//!
//! Takes the client, the steps so far and the tally of what the `alpha` upstream saw; gives one
//! checked step each for: no elicitation capability, the approval round, a declined approval,
//! an accepted one, and the accepted answer replayed. Refuses nothing.

use serde_json::{json, Value};

use super::client::Client;
use super::Steps;
use crate::upstream::Seen;
use sluice_mcp::method::Method;

/// The destructive tool, as Sluice lists it.
const TOOL: &str = "alpha__delete_branch";

/// The call's arguments.
fn args() -> Value {
    json!({"name": "old-parser"})
}

/// The capabilities that let Sluice ask for approval.
fn elicit() -> Value {
    json!({"elicitation": {}})
}

/// An answer to the approval round of `state`.
fn approve(yes: bool, state: String) -> Value {
    json!({"inputResponses": {"sluice_approval": {"action": "accept", "content": {"approve": yes}}}, "requestState": state})
}

/// Runs the steps of the approval round.
pub(super) async fn run(c: &Client, s: &mut Steps, alpha: &Seen) {
    let deletes = || alpha.count("call delete_branch");
    unaskable(c, s, &deletes).await;
    asked(c, s, &deletes).await;

    let again = c.call(53, TOOL, args(), elicit(), json!({})).await;
    let (keys, state) = again.round();
    let yes = approve(true, state);
    let a = c.call(54, TOOL, args(), elicit(), yes.clone()).await;
    let r = &a.body["result"];
    let text = r
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or("");
    s.check(
        "calling again and answering approve: true runs the tool: alpha deletes the branch, its first delete_branch call",
        keys == ["sluice_approval"]
            && a.status == 200
            && r["resultType"] == "complete"
            && r["isError"] != true
            && text.starts_with("deleted branch \"old-parser\"")
            && deletes() == 1,
        format!("HTTP {} resultType={} text={text:?}; alpha's delete_branch calls: {}", a.status, r["resultType"], deletes()),
    );

    let a = c.call(55, TOOL, args(), elicit(), yes).await;
    s.check(
        "an approval is single use: replaying the accepted answer gets -32602 with data.reason unknown_exchange; alpha is not called again",
        a.status == 400
            && a.error_code() == Some(-32602)
            && a.body.pointer("/error/data/reason") == Some(&json!("unknown_exchange"))
            && deletes() == 1,
        format!("HTTP {} error={}; alpha's delete_branch calls: {}", a.status, a.body["error"], deletes()),
    );
}

/// The tool is listed as destructive; without the elicitation capability the approval cannot
/// be asked, so the call is refused.
async fn unaskable(c: &Client, s: &mut Steps, deletes: &impl Fn() -> usize) {
    let list = c.send(49, &Method::ToolsList, json!({})).await;
    let annotations = list
        .tool(TOOL)
        .map_or(Value::Null, |t| t["annotations"].clone());
    let a = c.call(50, TOOL, args(), json!({}), json!({})).await;
    s.check(
        "alpha__delete_branch is listed with annotations.destructiveHint; called without the elicitation capability it gets -32021, HTTP 400: the policy's approval cannot be asked",
        annotations["destructiveHint"] == true && a.status == 400 && a.error_code() == Some(-32021) && a.body["id"] == 50 && deletes() == 0,
        format!("annotations={annotations}; HTTP {} error={}; alpha's delete_branch calls: {}", a.status, a.body["error"], deletes()),
    );
}

/// The call gets an approval round first; answering it no refuses the call.
async fn asked(c: &Client, s: &mut Steps, deletes: &impl Fn() -> usize) {
    let first = c.call(51, TOOL, args(), elicit(), json!({})).await;
    let (keys, state) = first.round();
    let ask = &first.body["result"]["inputRequests"]["sluice_approval"];
    let message = ask
        .pointer("/params/message")
        .and_then(Value::as_str)
        .unwrap_or("");
    s.check(
        "calling it gets an approval round first: input_required keyed sluice_approval, a form naming alpha and delete_branch; alpha was not called",
        first.status == 200
            && first.body["result"]["resultType"] == "input_required"
            && keys == ["sluice_approval"]
            && !state.is_empty()
            && ask["method"] == Method::ElicitationCreate.as_str()
            && ask.pointer("/params/requestedSchema/properties/approve/type") == Some(&json!("boolean"))
            && message.contains("\"alpha\"")
            && message.contains("\"delete_branch\"")
            && deletes() == 0,
        format!(
            "HTTP {} resultType={} inputRequests={keys:?} message={message:?}; alpha's delete_branch calls: {}",
            first.status,
            first.body["result"]["resultType"],
            deletes()
        ),
    );

    let a = c
        .call(52, TOOL, args(), elicit(), approve(false, state))
        .await;
    s.check(
        "answering approve: false gets -31015 with HTTP 400; alpha was still not called",
        a.status == 400 && a.error_code() == Some(-31015) && a.body["id"] == 52 && deletes() == 0,
        format!(
            "HTTP {} error={}; alpha's delete_branch calls: {}",
            a.status,
            a.body["error"],
            deletes()
        ),
    );
}
