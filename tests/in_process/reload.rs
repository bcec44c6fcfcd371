//! Issue 15 item 2: reloading the whole config (`Running::reload`, what SIGHUP runs; the signal
//! itself is tested on the binary in tests/binary/reload.rs). Each kind of change is made under
//! load — clients calling and listing without pause — and no request of theirs may fail.

use serde_json::json;

use std::sync::Arc;

use super::prelude::*;
use crate::support::gateway::ApiKey;
use crate::support::load::{call, tool_names, with_slow_tool, Load};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_added_and_removed_by_a_reload_lose_no_request_and_in_flight_calls_finish() {
    let a = Spec::new("a").start().await;
    let (b, gate) = with_slow_tool("b").await;
    let c = Spec::new("c").tools(vec![tool("fresh")]).start().await;
    let s = Gateway::e2e()
        .upstream("a", &a.url())
        .upstream("b", &b.url())
        .healthy()
        .start()
        .await;
    let url = s.url();
    assert_eq!(tool_names(&url).await, ["a__echo", "b__echo", "b__slow"]);

    let load = Load::start(&url, "a__echo", None, 4);
    // A call in flight on the upstream about to go.
    let slow = tokio::spawn({
        let url = url.clone();
        async move { call("b__slow").send(&url).await }
    });
    b.until("the slow call arrived", |m| m.calls("slow") == 1)
        .await;
    load.past(20).await;

    let applied = s
        .reload(
            Gateway::e2e()
                .upstream("a", &a.url())
                .upstream("c", &c.url())
                .config(),
        )
        .await
        .expect("the reload applies");
    assert_eq!(
        (
            applied.generation,
            applied.added.as_slice(),
            applied.removed.as_slice()
        ),
        (2, &["c".to_owned()][..], &["b".to_owned()][..])
    );
    assert!(
        applied.replaced.is_empty(),
        "a is unchanged and kept: {applied:?}"
    );
    // The new upstream was probed before the swap: its tools are listed and callable at once.
    assert_eq!(tool_names(&url).await, ["a__echo", "c__fresh"]);
    assert_eq!(
        call("c__fresh").send(&url).await.result(&json!(1))["content"][0]["text"],
        "c ran fresh"
    );
    // The removed upstream's tools are unknown names now, and its calls never reach it.
    call("b__echo")
        .send(&url)
        .await
        .error(400, -32602, &json!(1));
    assert_eq!(b.calls("echo"), 0);
    load.past(20).await;

    // The call that was in flight on it finishes with its answer.
    gate.send_replace(true);
    let done = slow.await.expect("the slow call's task");
    assert_eq!(done.result(&json!(1))["content"][0]["text"], "slow done");
    // The kept upstream kept its tables: no second probe of it.
    assert_eq!(
        a.count("server/discover"),
        1,
        "a kept upstream is not probed again by a reload"
    );
    assert!(load.finish().await > 40);
    let metrics = reqwest::get(format!("http://{}/metrics", s.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_config_reloads_total{result=\"applied\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_config_generation 2"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_upstream_is_replaced_and_new_calls_go_to_its_new_url() {
    let old = Spec::new("old").start().await;
    let new = Spec::new("new").start().await;
    let s = Gateway::e2e()
        .upstream("x", &old.url())
        .healthy()
        .start()
        .await;
    let url = s.url();
    let load = Load::start(&url, "echo", None, 4);
    load.past(20).await;
    let applied = s
        .reload(Gateway::e2e().upstream("x", &new.url()).config())
        .await
        .expect("the reload applies");
    assert_eq!(applied.replaced, ["x"]);
    assert_eq!(
        call("echo").send(&url).await.result(&json!(1))["content"][0]["text"],
        "new ran echo"
    );
    // Once what was in flight at the swap is answered, the old URL gets nothing more.
    load.settled().await;
    let old_calls = old.calls("echo");
    load.past(20).await;
    assert_eq!(
        old.calls("echo"),
        old_calls,
        "no call went to the old URL after the reload"
    );
    load.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_fails_to_load_or_changes_a_restart_only_setting_changes_nothing() {
    let a = Spec::new("a").start().await;
    let base = || Gateway::e2e().upstream("a", &a.url());
    let s = base().start().await;
    let url = s.url();
    let load = Load::start(&url, "echo", None, 4);
    load.past(20).await;

    // A policy file that does not parse.
    let broken = base().policy("[[rule]]\nname = \n");
    let why = s
        .reload(broken.config())
        .await
        .expect_err("a broken policy file is refused");
    assert!(
        why.contains("policy") || why.contains("rule"),
        "the reason names the file: {why}"
    );
    // A credential variable that is not set.
    let unset = base().upstream_spec(
        crate::support::gateway::Upstream::new("b", &a.url())
            .key("bearer_token_env", "SLUICE_TEST_UNSET_TOKEN"),
    );
    let why = s
        .reload(unset.config())
        .await
        .expect_err("an unset credential variable is refused");
    assert!(why.contains("SLUICE_TEST_UNSET_TOKEN"), "{why}");
    // A setting read only at startup.
    let why = s
        .reload(base().limit("max_connections", 7).config())
        .await
        .expect_err("a restart-only change is refused");
    assert!(
        why.contains("limits.max_connections") && why.contains("restart"),
        "{why}"
    );
    let why = s
        .reload(
            base()
                .set("telemetry", "otlp_endpoint", "http://127.0.0.1:4318")
                .config(),
        )
        .await
        .expect_err("refused");
    assert!(why.starts_with("telemetry changed"), "{why}");

    assert_eq!(s.current().generation, 1, "nothing was applied");
    assert_eq!(tool_names(&url).await, ["echo"]);
    load.past(20).await;
    load.finish().await;
    let metrics = reqwest::get(format!("http://{}/metrics", s.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_config_reloads_total{result=\"failed\"} 4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_config_last_reload_successful 0"),
        "{metrics}"
    );
    // The same config again applies (and says so).
    s.reload(base().config())
        .await
        .expect("an unchanged config applies");
    let metrics = reqwest::get(format!("http://{}/metrics", s.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_config_last_reload_successful 1"),
        "{metrics}"
    );
}

const KEEP: &str = "kept-key-0123456789abcdef";
const GONE: &str = "gone-key-0123456789abcdef";
const NEW: &str = "new-key-0123456789abcdef0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_limits_and_quotas_change_on_reload_while_callers_keep_being_served() {
    let a = Spec::new("a")
        .caps(json!({"tools": {"listChanged": true}}))
        .start()
        .await;
    let with = |keys: &[&str]| {
        keys.iter()
            .fold(Gateway::e2e().upstream("a", &a.url()), |g, k| {
                g.api_key(ApiKey::new(k, &k[..4]))
            })
    };
    let s = with(&[KEEP, GONE]).start().await;
    let url = s.url();
    let bearer = |k: &str| format!("Bearer {k}");
    let load = Load::start(&url, "echo", Some(KEEP), 4);
    load.past(20).await;
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(GONE))
            .send(&url)
            .await
            .status,
        200
    );

    // Keys: one removed, one added. A listen stream opened with the removed key ends with its
    // result (its client comes back with a key that holds).
    let mut gone_stream = Req::new("subscriptions/listen")
        .params(json!({"notifications": {}}))
        .header("authorization", &bearer(GONE))
        .stream(&url)
        .await;
    assert_eq!(
        gone_stream.next().await.expect("acknowledgement")["method"],
        "notifications/subscriptions/acknowledged"
    );
    let applied = s
        .reload(with(&[KEEP, NEW]).config())
        .await
        .expect("the reload applies");
    assert!(applied.auth_changed);
    let end = gone_stream.next().await.expect("the listen result");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(GONE))
            .send(&url)
            .await
            .status,
        401,
        "a removed key is refused at once"
    );
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(NEW))
            .send(&url)
            .await
            .status,
        200,
        "an added key works at once"
    );
    load.past(20).await;

    // A limit read per request: the body bound.
    let pad = Req::new("tools/list")
        .params(json!({"pad": "x".repeat(2000)}))
        .header("authorization", &bearer(NEW));
    assert_eq!(pad.send(&url).await.status, 200);
    let mut kept_stream = Req::new("subscriptions/listen")
        .params(json!({"notifications": {"toolsListChanged": true}}))
        .header("authorization", &bearer(KEEP))
        .stream(&url)
        .await;
    assert_eq!(
        kept_stream.next().await.expect("acknowledgement")["method"],
        "notifications/subscriptions/acknowledged"
    );
    let applied = s
        .reload(with(&[KEEP, NEW]).limit("max_body_bytes", 1024).config())
        .await
        .expect("the reload applies");
    assert!(!applied.auth_changed);
    // The same [auth]: the stream opened before the reload stays open and is told.
    a.wait_listen().await;
    a.notify_method("notifications/tools/list_changed");
    let told = kept_stream.next().await.expect("the stream is still open");
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
    let pad = Req::new("tools/list")
        .params(json!({"pad": "x".repeat(2000)}))
        .header("authorization", &bearer(NEW));
    assert_eq!(
        pad.send(&url).await.status,
        413,
        "the smaller body bound holds at once"
    );
    load.past(20).await;

    // A quota added for the new key's principal: one call a minute.
    let mut q = toml::Table::new();
    q.insert("name".into(), "one".into());
    q.insert(
        "principal".into(),
        toml::Value::Array(vec![NEW[..4].into()]),
    );
    q.insert("calls_per_window".into(), 1.into());
    q.insert("window_ms".into(), 60_000.into());
    let quota = with(&[KEEP, NEW])
        .limit("max_body_bytes", 1024)
        .top("quota", toml::Value::Array(vec![toml::Value::Table(q)]));
    let applied = s.reload(quota.config()).await.expect("the reload applies");
    assert!(
        applied.budgets_restarted,
        "a quota change starts the bookkeeping again"
    );
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(NEW))
            .send(&url)
            .await
            .status,
        200
    );
    let over = call("echo")
        .header("authorization", &bearer(NEW))
        .send(&url)
        .await;
    assert_eq!(
        (over.status, over.json()["error"]["code"].as_i64()),
        (429, Some(-31017)),
        "{}",
        over.text
    );
    // The same quota again keeps what was spent.
    let applied = s.reload(quota.config()).await.expect("the reload applies");
    assert!(!applied.budgets_restarted);
    let before = s.current();
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(NEW))
            .send(&url)
            .await
            .status,
        429,
        "a reload is no fresh quota"
    );
    // A budget change starts the budgets again, and only them: the quota stays spent.
    let budget = quota.budget("sampling_per_window", 7);
    let applied = s.reload(budget.config()).await.expect("the reload applies");
    assert!(applied.budgets_restarted);
    assert!(
        !Arc::ptr_eq(&s.current().governor.budgets, &before.governor.budgets),
        "new budgets under the new [budget]"
    );
    assert!(
        Arc::ptr_eq(&s.current().governor.quotas, &before.governor.quotas),
        "the quotas carried over"
    );
    assert_eq!(
        call("echo")
            .header("authorization", &bearer(NEW))
            .send(&url)
            .await
            .status,
        429,
        "still over its quota"
    );
    load.past(20).await;
    load.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_is_told_of_the_tools_a_reload_added() {
    let caps = json!({"tools": {"listChanged": true}});
    let a = Spec::new("a").caps(caps.clone()).start().await;
    let c = Spec::new("c")
        .caps(caps)
        .tools(vec![tool("fresh")])
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("a", &a.url())
        .top("prefix", "always")
        .start()
        .await;
    let url = s.url();
    let mut stream = Req::new("subscriptions/listen")
        .params(json!({"notifications": {"toolsListChanged": true}}))
        .stream(&url)
        .await;
    let ack = stream.next().await.expect("acknowledgement");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "{ack}"
    );
    s.reload(
        Gateway::e2e()
            .upstream("a", &a.url())
            .upstream("c", &c.url())
            .top("prefix", "always")
            .config(),
    )
    .await
    .expect("applies");
    let told = stream.next().await.expect("a list change");
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
    assert_eq!(tool_names(&url).await, ["a__echo", "c__fresh"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_spelled_differently_after_a_reload_are_listed_and_routed_as_the_new_config_spells_them(
) {
    // `prefix = "auto"`: one upstream is unprefixed, two are prefixed.
    let a = Spec::new("a").start().await;
    let c = Spec::new("c").tools(vec![tool("fresh")]).start().await;
    let s = Gateway::e2e()
        .upstream("a", &a.url())
        .healthy()
        .start()
        .await;
    let url = s.url();
    assert_eq!(tool_names(&url).await, ["echo"]);
    let applied = s
        .reload(
            Gateway::e2e()
                .upstream("a", &a.url())
                .upstream("c", &c.url())
                .config(),
        )
        .await
        .expect("applies");
    assert_eq!(
        applied.replaced,
        ["a"],
        "its table spelled the old names: a new one took over"
    );
    assert_eq!(tool_names(&url).await, ["a__echo", "c__fresh"]);
    assert_eq!(
        call("a__echo").send(&url).await.result(&json!(1))["content"][0]["text"],
        "a ran echo",
        "the upstream's own name goes upstream"
    );
    call("echo").send(&url).await.error(400, -32602, &json!(1));
    // And back to one: unprefixed again.
    s.reload(Gateway::e2e().upstream("a", &a.url()).config())
        .await
        .expect("applies");
    assert_eq!(tool_names(&url).await, ["echo"]);
    assert_eq!(
        call("echo").send(&url).await.result(&json!(1))["content"][0]["text"],
        "a ran echo"
    );
    // A separator change renames too.
    s.reload(
        Gateway::e2e()
            .upstream("a", &a.url())
            .upstream("c", &c.url())
            .top("separator", "-")
            .config(),
    )
    .await
    .expect("applies");
    assert_eq!(tool_names(&url).await, ["a-echo", "c-fresh"]);
    assert_eq!(
        call("a-echo").send(&url).await.result(&json!(1))["content"][0]["text"],
        "a ran echo"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_round_begun_before_its_upstream_was_removed_is_finished_after_the_reload() {
    let a = Spec::new("a").start().await;
    let b = asking("b").await;
    let both = || {
        Gateway::e2e()
            .upstream("a", &a.url())
            .upstream("b", &b.url())
            .top("prefix", "always")
    };
    // Started as generation 2, so nothing but the drain keeps its generation reachable.
    let s = Gateway::e2e()
        .upstream("a", &a.url())
        .top("prefix", "always")
        .healthy()
        .start()
        .await;
    s.reload(both().config()).await.expect("b added");
    let url = s.url();
    let ask = || {
        call("b__ask").meta_member(
            "io.modelcontextprotocol/clientCapabilities",
            json!({"sampling": {}}),
        )
    };
    let round = ask().send(&url).await.result(&json!(1));
    assert_eq!(round["resultType"], "input_required", "{round}");
    let state = round["requestState"]
        .as_str()
        .expect("a sealed requestState")
        .to_owned();

    let applied = s
        .reload(
            Gateway::e2e()
                .upstream("a", &a.url())
                .top("prefix", "always")
                .config(),
        )
        .await
        .expect("b removed");
    assert_eq!(applied.removed, ["b"]);
    let answer = json!({"llm": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});
    let retry = ask()
        .params(json!({"inputResponses": answer, "requestState": state}))
        .send(&url)
        .await
        .result(&json!(1));
    assert_eq!(
        retry["content"][0]["text"], "\"upstream-state\" answered",
        "the round finished on the removed upstream: {retry}"
    );
    // Its state is single use across the reload too, and a new call is an unknown name.
    let again = ask()
        .params(json!({"inputResponses": answer, "requestState": state}))
        .send(&url)
        .await;
    assert_eq!(again.json()["error"]["code"], -32602, "{}", again.text);
    ask().send(&url).await.error(400, -32602, &json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_round_begun_before_its_upstream_was_removed_starts_no_call_after_the_reload() {
    let a = Spec::new("a").start().await;
    let b = Spec::new("b").start().await;
    let rule = "[[rule]]\nname = \"approve-b\"\nmatch = { method = [\"tools/call\"], upstream = [\"b\"] }\neffect = \"approve\"\n";
    let s = Gateway::e2e()
        .upstream("a", &a.url())
        .upstream("b", &b.url())
        .policy(rule)
        .healthy()
        .start()
        .await;
    let url = s.url();
    let ask = || {
        call("b__echo").meta_member(
            "io.modelcontextprotocol/clientCapabilities",
            json!({"elicitation": {}}),
        )
    };
    let round = ask().send(&url).await.result(&json!(1));
    assert_eq!(
        round["resultType"], "input_required",
        "the approval round: {round}"
    );
    let state = round["requestState"]
        .as_str()
        .expect("a sealed requestState")
        .to_owned();

    s.reload(
        Gateway::e2e()
            .upstream("a", &a.url())
            .top("prefix", "always")
            .config(),
    )
    .await
    .expect("b and its rule removed");
    let approve = json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}});
    for answer in [approve, json!({})] {
        let r = ask()
            .params(json!({"inputResponses": answer, "requestState": state}))
            .send(&url)
            .await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].as_i64()),
            (400, Some(-32602)),
            "{}",
            r.text
        );
    }
    assert_eq!(
        b.calls("echo"),
        0,
        "no call started on the removed upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_from_an_environment_variable_a_reload_of_the_same_auth_keeps_streams_open() {
    // The variable is read at each load; the process environment does not change under it.
    std::env::set_var(
        "SLUICE_RELOAD_TEST_KEYS",
        format!("{}=env-user", sluice::auth::api_keys::hash_key(KEEP)),
    );
    let a = Spec::new("a")
        .caps(json!({"tools": {"listChanged": true}}))
        .start()
        .await;
    let base = || {
        Gateway::e2e().upstream("a", &a.url()).set(
            "auth",
            "api_keys_env",
            "SLUICE_RELOAD_TEST_KEYS",
        )
    };
    let s = base().start().await;
    let url = s.url();
    let mut stream = Req::new("subscriptions/listen")
        .params(json!({"notifications": {"toolsListChanged": true}}))
        .header("authorization", &format!("Bearer {KEEP}"))
        .stream(&url)
        .await;
    assert_eq!(
        stream.next().await.expect("acknowledgement")["method"],
        "notifications/subscriptions/acknowledged"
    );
    let applied = s
        .reload(base().limit("max_body_bytes", 1024).config())
        .await
        .expect("applies");
    assert!(!applied.auth_changed);
    a.wait_listen().await;
    a.notify_method("notifications/tools/list_changed");
    assert_eq!(
        stream.next().await.expect("still open")["method"],
        "notifications/tools/list_changed"
    );
}

/// A mock whose `ask` asks for one sampling answer, then answers with the upstream state it got.
async fn asking(name: &str) -> crate::support::modern::Mock {
    Spec::new(name)
        .tools(vec![tool("ask")])
        .on(|s| {
            (s.tool() == "ask").then(|| match s.params.get("inputResponses") {
                None => Reply::Result(json!({
                    "resultType": "input_required",
                    "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}},
                    "requestState": "upstream-state"
                })),
                Some(_) => Reply::Result(json!({"content": [{"type": "text", "text": format!("{} answered", s.params["requestState"])}]})),
            })
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_whose_name_another_upstream_serves_after_the_reload_goes_back_to_its_own() {
    // One unprefixed upstream replaced by another serving the same tool name.
    let (old, new) = (asking("old").await, asking("new").await);
    let s = Gateway::e2e()
        .upstream("old", &old.url())
        .healthy()
        .start()
        .await;
    let url = s.url();
    let ask = || {
        call("ask").meta_member(
            "io.modelcontextprotocol/clientCapabilities",
            json!({"sampling": {}}),
        )
    };
    let round = ask().send(&url).await.result(&json!(1));
    let state = round["requestState"]
        .as_str()
        .expect("a sealed requestState")
        .to_owned();
    s.reload(Gateway::e2e().upstream("new", &new.url()).config())
        .await
        .expect("old out, new in");
    let answer = json!({"llm": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});
    let retry = ask()
        .params(json!({"inputResponses": answer, "requestState": state}))
        .send(&url)
        .await
        .result(&json!(1));
    assert_eq!(
        retry["content"][0]["text"], "\"upstream-state\" answered",
        "{retry}"
    );
    assert_eq!(
        (old.calls("ask"), new.calls("ask")),
        (2, 0),
        "the retry went to the round's own upstream"
    );
    // A new call goes to the new one.
    assert_eq!(
        ask().send(&url).await.result(&json!(1))["resultType"],
        "input_required"
    );
    assert_eq!(new.calls("ask"), 1);
}
