//! Issue 2 item 6: `subscriptions/listen` — acknowledgement first, only opted-in notifications
//! re-tagged with the client's listen id, never progress or log messages, the listen result on
//! a graceful end, and list-changed notifications that refresh Sluice's tables.

use std::time::Duration;

use serde_json::{json, Value};

use super::prelude::*;

const SUB: &str = "io.modelcontextprotocol/subscriptionId";

fn listen(id: Value, filter: Value) -> Req {
    Req::new("subscriptions/listen")
        .id(id)
        .params(json!({"notifications": filter}))
}

fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

async fn open(url: &str, id: Value, filter: Value) -> Stream {
    let mut st = listen(id.clone(), filter).stream(url).await;
    assert_eq!(st.status, 200);
    let ack = st.next().await.expect("acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUB], id);
    st
}

#[tokio::test]
async fn listen_is_acknowledged_first_with_the_listen_id_and_the_honoured_subset() {
    let m = Spec::new("ack")
        .caps(json!({"tools": {"listChanged": true}}))
        .start()
        .await;
    let s = Gateway::e2e().upstream("ack", &m.url()).start().await;
    let all = json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": ["mock://ack/doc"]});
    let mut st = listen(json!("L-1"), all).stream(&s.url()).await;
    assert_eq!(st.status, 200);
    assert_eq!(st.header("content-type"), Some("text/event-stream"));
    assert_eq!(st.header("x-accel-buffering"), Some("no"));
    let ack = st.next().await.expect("acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert!(ack.get("id").is_none(), "a notification: {ack}");
    assert_eq!(ack["params"]["_meta"][SUB], "L-1");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "only what an upstream serves is honoured"
    );
    // A numeric id and an empty filter.
    let mut st = listen(json!(7), json!({})).stream(&s.url()).await;
    let ack = st.next().await.expect("acknowledgement");
    assert_eq!(
        (
            ack["params"]["_meta"][SUB].clone(),
            ack["params"]["notifications"].clone()
        ),
        (json!(7), json!({}))
    );
}

#[tokio::test]
async fn listen_with_a_malformed_filter_is_400_invalid_params() {
    let m = Spec::new("badfilter").start().await;
    let s = Gateway::e2e().upstream("badfilter", &m.url()).start().await;
    listen(json!(1), json!("tools"))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
    listen(json!(2), json!({"resourceSubscriptions": "mock://x"}))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(2));
}

#[tokio::test]
async fn upstream_list_changed_reaches_only_opted_in_listens_retagged_with_their_id() {
    let m = Spec::new("fan").start().await;
    let s = Gateway::e2e().upstream("fan", &m.url()).start().await;
    let mut tools = open(
        &s.url(),
        json!("tools-sub"),
        json!({"toolsListChanged": true}),
    )
    .await;
    let mut prompts = open(&s.url(), json!(99), json!({"promptsListChanged": true})).await;
    m.wait_listen().await;
    let upstream_sub = json!({SUB: "sluice-internal"});
    m.notify(notification(
        "notifications/prompts/list_changed",
        json!({"_meta": upstream_sub}),
    ));
    m.notify(notification(
        "notifications/tools/list_changed",
        json!({"_meta": upstream_sub}),
    ));
    let n = tools.next().await.expect("tools list_changed");
    assert_eq!(
        n["method"], "notifications/tools/list_changed",
        "prompts were not asked for: {n}"
    );
    assert_eq!(n["params"]["_meta"], json!({SUB: "tools-sub"}));
    let n = prompts.next().await.expect("prompts list_changed");
    assert_eq!(n["method"], "notifications/prompts/list_changed");
    assert_eq!(n["params"]["_meta"], json!({SUB: 99}));
    assert!(
        prompts.silent_for(Duration::from_millis(200)).await,
        "tools list_changed was not asked for"
    );
}

#[tokio::test]
async fn progress_and_log_notifications_never_appear_on_a_listen_stream() {
    let m = Spec::new("noise").start().await;
    let s = Gateway::e2e().upstream("noise", &m.url()).start().await;
    let mut st = open(
        &s.url(),
        json!("quiet"),
        json!({"toolsListChanged": true, "resourcesListChanged": true}),
    )
    .await;
    m.wait_listen().await;
    m.notify(notification(
        "notifications/progress",
        json!({"progressToken": "t", "progress": 1}),
    ));
    m.notify(notification(
        "notifications/message",
        json!({"level": "emergency", "data": "x"}),
    ));
    m.notify(
        json!({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {}}),
    );
    m.notify(notification(
        "notifications/resources/list_changed",
        json!({}),
    ));
    let n = st.next().await.expect("resources list_changed");
    assert_eq!(n["method"], "notifications/resources/list_changed", "{n}");
    assert_eq!(n["params"]["_meta"][SUB], "quiet");
    assert!(st.silent_for(Duration::from_millis(200)).await);
}

#[tokio::test]
async fn list_changed_drops_the_cached_list_and_refreshes_the_routing_table() {
    let a = Spec::new("lc-a").start().await;
    let b = Spec::new("lc-b").start().await;
    let s = Gateway::e2e()
        .upstream("lc-a", &a.url())
        .upstream("lc-b", &b.url())
        .start()
        .await;
    let list = Req::new("tools/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(list["tools"].as_array().unwrap().len(), 2);
    let mut st = open(&s.url(), json!("lc"), json!({"toolsListChanged": true})).await;
    a.wait_listen().await;
    a.set_tools(vec![tool("echo"), tool("added")]);
    let before = a.count("tools/list");
    a.notify(notification("notifications/tools/list_changed", json!({})));
    assert_eq!(
        st.next().await.expect("list_changed")["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!(
        a.count("tools/list"),
        before + 1,
        "the notification refreshed the table"
    );
    let list = Req::new("tools/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["lc-a__echo", "lc-a__added", "lc-b__echo"],
        "the cached list (ttl 60 s) was dropped"
    );
    Req::new("tools/call")
        .params(json!({"name": "lc-a__added", "arguments": {}}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(
        a.count("tools/list"),
        before + 1,
        "routing uses the refreshed table"
    );
}

#[tokio::test]
async fn resource_subscriptions_reach_the_upstream_and_updates_come_back_tagged() {
    let m = Spec::new("rs").start().await;
    let s = Gateway::e2e().upstream("rs", &m.url()).start().await;
    let uri = "mock://rs/doc";
    let mut st = listen(
        json!("res"),
        json!({"resourceSubscriptions": [uri], "promptsListChanged": false}),
    )
    .stream(&s.url())
    .await;
    let ack = st.next().await.expect("acknowledgement");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [uri]}),
        "{ack}"
    );
    m.until("an upstream listen holding the URI", |m| {
        m.seen("subscriptions/listen")
            .iter()
            .any(|x| x.params["notifications"]["resourceSubscriptions"] == json!([uri]))
    })
    .await;
    let last = m.last("subscriptions/listen");
    assert_eq!(last.header("mcp-method"), Some("subscriptions/listen"));
    assert_eq!(
        last.params["notifications"]["toolsListChanged"], true,
        "Sluice's own list-changed interests stay"
    );
    m.notify(notification(
        "notifications/resources/updated",
        json!({"uri": "mock://rs/other"}),
    ));
    m.notify(notification(
        "notifications/resources/updated",
        json!({"uri": "mock://rs/doc/part-1"}),
    ));
    let n = st.next().await.expect("resources/updated");
    assert_eq!(n["method"], "notifications/resources/updated");
    assert_eq!(
        n["params"]["uri"], "mock://rs/doc/part-1",
        "a sub-resource of the subscribed URI, and nothing else"
    );
    assert_eq!(n["params"]["_meta"][SUB], "res");
}

#[tokio::test]
async fn listen_ends_with_its_result_when_sluice_shuts_down() {
    let m = Spec::new("bye").start().await;
    let s = Gateway::e2e().upstream("bye", &m.url()).start().await;
    let mut st = open(&s.url(), json!("end-1"), json!({"toolsListChanged": true})).await;
    let stopping = tokio::spawn(s.stop());
    let r = st.next().await.expect("the listen result");
    assert_eq!(r["id"], "end-1", "{r}");
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["_meta"][SUB], "end-1");
    assert!(
        st.next().await.is_none(),
        "the stream closes after the result"
    );
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("Sluice stops within 10 s")
        .expect("stop task");
}

#[tokio::test]
async fn a_2025_11_25_upstreams_list_changed_on_its_session_stream_refreshes_the_table_and_reaches_listens(
) {
    let up = crate::support::legacy::start(
        json!([crate::support::modern::tool_args("echo", &[])]),
        |_| vec![],
    )
    .await;
    let s = Gateway::e2e()
        .upstream("old", &up.url())
        .all_legacy()
        .start()
        .await;
    let list = Req::new("tools/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(list["tools"].as_array().unwrap().len(), 1);
    let mut st = open(&s.url(), json!("old-lc"), json!({"toolsListChanged": true})).await;
    up.wait_get().await;
    let before = up.seen("tools/list").len();
    up.notify(&notification(
        "notifications/prompts/list_changed",
        json!({}),
    ));
    up.notify(&notification("notifications/tools/list_changed", json!({})));
    let n = st.next().await.expect("tools list_changed");
    assert_eq!(
        n["method"], "notifications/tools/list_changed",
        "prompts were not asked for: {n}"
    );
    assert_eq!(n["params"]["_meta"], json!({SUB: "old-lc"}));
    assert_eq!(
        up.seen("tools/list").len(),
        before + 1,
        "the notification refreshed the table before the listens were told"
    );
}
