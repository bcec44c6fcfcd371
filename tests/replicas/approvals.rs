//! A call held on one replica is listed by another's admin route (Redis) and approved there;
//! the replica holding it learns the decision and runs the call; a second decision, from any
//! replica, is `already_decided`. Two in-process replicas share a real `redis-server`.

use http::Method;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sluice::admin::{Cx, Operator};
use sluice::events::Kind;
use sluice::Running;

use super::harness::Redis;
use crate::support::call::{http, Call};
use crate::support::gateway::{keys, Gateway};
use crate::support::{eventually_async, WAIT};

const RULE: &str = "[[rule]]\nname = \"ops\"\nmatch = { method = [\"tools/call\"], tool = [\"echo\"] }\neffect = \"approve\"\napprover = \"operator\"\n";

async fn admin(sluice: &Running, method: Method, rest: &[&str]) -> (u16, Value) {
    let cx = Cx {
        gw: sluice.gateway.clone(),
        op: Operator {
            name: "ops-on-call".into(),
            via: "key",
        },
    };
    let answer = sluice::admin::approvals::route(&cx, &method, rest, b"").await;
    let status = answer.status().as_u16();
    let body = answer.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&body).expect("admin JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_on_one_replica_is_approved_through_another() {
    let redis = Redis::start().await;
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let replica = |id: &str| {
        Gateway::bridge(keys::GOVERNANCE)
            .upstream("demo", &demo.url())
            .policy(RULE)
            .set("approvals", "progress_ms", 100)
            .set("cluster", "redis_url", redis.url())
            .set("cluster", "id", id)
            .set("cluster", "listen", "127.0.0.1:0")
            .start()
    };
    let one = replica("r1").await;
    let two = replica("r2").await;
    let mut events = one.gateway.rt.events.subscribe();
    let url = one.url();
    let call = tokio::spawn(async move {
        Call::new("echo", json!({"text": "held on one"}))
            .caps(json!({}))
            .send(&http(), &url, json!({}))
            .await
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
    .expect("held on replica 1");
    let id = held["id"].as_str().expect("id").to_owned();
    eventually_async("replica 2 lists the call held on replica 1", || async {
        let (_, list) = admin(&two, Method::GET, &[]).await;
        list["approvals"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["id"] == json!(id)))
    })
    .await;
    let (status, decided) = admin(&two, Method::POST, &[id.as_str(), "approve"]).await;
    assert_eq!(
        (status, &decided["decision"]),
        (200, &json!("approved")),
        "{decided}"
    );
    let (status, again) = admin(&one, Method::POST, &[id.as_str(), "deny"]).await;
    assert_eq!(
        (status, &again["error"]["code"]),
        (409, &json!("already_decided")),
        "{again}"
    );
    let reply = tokio::time::timeout(WAIT, call)
        .await
        .expect("the held call ends")
        .expect("call task");
    assert_eq!(reply.status, 200);
    assert!(
        reply.msg["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("held on one")),
        "{}",
        reply.msg
    );
}
