//! Approval by an operator with a real SDK client: the official Rust SDK (`rmcp`, 2026-07-28)
//! calls a tool an `approver = "operator"` rule holds; the call waits on its SSE stream until
//! an operator approves it through the admin route, then rmcp gets the tool's answer.

use http::Method;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sluice::admin::{Cx, Operator};
use sluice::events::Kind;

use crate::support::gateway::Gateway;
use crate::support::rmcp_client;
use crate::support::WAIT;

const RULE: &str = "[[rule]]\nname = \"ops\"\nmatch = { method = [\"tools/call\"], tool = [\"echo\"] }\neffect = \"approve\"\napprover = \"operator\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_call_held_for_an_operator_runs_once_approved_through_the_admin_route() {
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let gw = Gateway::e2e()
        .upstream("demo", &demo.url())
        .policy(RULE)
        .set("approvals", "progress_ms", 100)
        .start()
        .await;
    let mut events = gw.gateway.rt.events.subscribe();
    let client = rmcp_client::connect(&gw.url(), rmcp_client::Asked::default(), false).await;
    let call = tokio::spawn(async move {
        let out = rmcp_client::call(&client, "echo", json!({"text": "held by rmcp"})).await;
        drop(client);
        out
    });
    let held = tokio::time::timeout(WAIT, async {
        loop {
            let e = events.recv().await.expect("event bus");
            if e.kind == Kind::Approval && e.data["state"] == "held" {
                return e.data;
            }
        }
    })
    .await
    .expect("the call is held");
    assert!(!call.is_finished(), "a held call waits for the operator");
    let id = held["id"].as_str().expect("id").to_owned();
    let cx = Cx {
        gw: gw.gateway.clone(),
        op: Operator {
            name: "ops-on-call".into(),
            via: "key",
        },
    };
    let answer =
        sluice::admin::approvals::route(&cx, &Method::POST, &[id.as_str(), "approve"], b"").await;
    assert_eq!(answer.status(), 200);
    let body: Value =
        serde_json::from_slice(&answer.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["decision"], "approved");
    let (text, is_error) = call.await.expect("the rmcp call task");
    assert!(!is_error && text.contains("held by rmcp"), "{text}");
}
