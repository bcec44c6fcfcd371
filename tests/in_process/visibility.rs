//! Who sees what (issue 16 item 1): `hide` and `show` rules give two principals of different
//! groups different views of the same federated upstreams, through the official Rust SDK
//! client; a hidden tool or prompt is answered exactly as an unknown one (`-32602`); a family
//! hiding empties leaves `server/discover`; each listen stream is told of list changes only
//! when its own view changed.

use serde_json::{json, Value};

use super::prelude::*;
use crate::support::gateway::ApiKey;
use crate::support::rmcp_client;

const ALICE: &str = "visibility-alice-key-0123456789";
const BOB: &str = "visibility-bob-key-9876543210";

const RULES: &str = r#"
[[rule]]
name = "eng-sees-admin"
match = { group = ["eng"], tool = ["admin_*"] }
effect = "show"

[[rule]]
name = "admin-tools-hidden"
match = { tool = ["admin_*"] }
effect = "hide"

[[rule]]
name = "eng-no-sales"
match = { group = ["eng"], tool = ["sales_*"] }
effect = "hide"

[[rule]]
name = "sales-no-beta"
match = { group = ["sales"], upstream = ["beta"] }
effect = "hide"
"#;

fn prompt(name: &str) -> String {
    json!({"name": name, "description": name}).to_string()
}

async fn upstreams() -> (crate::support::modern::Mock, crate::support::modern::Mock) {
    let alpha = Spec::new("alpha")
        .tools(vec![
            tool("search"),
            tool("admin_reset"),
            tool("sales_report"),
        ])
        .prompts(vec![prompt("hello")])
        .start()
        .await;
    let beta = Spec::new("beta")
        .tools(vec![tool("echo")])
        .prompts(vec![prompt("greet")])
        .start()
        .await;
    (alpha, beta)
}

fn gateway(alpha: &str, beta: &str) -> Gateway {
    Gateway::e2e()
        .api_key(ApiKey::new(ALICE, "alice").groups(&["eng"]))
        .api_key(ApiKey::new(BOB, "bob").groups(&["sales"]))
        .policy(RULES)
        .upstream("alpha", alpha)
        .upstream("beta", beta)
}

fn authed(r: Req, key: &str) -> Req {
    r.header("authorization", &format!("Bearer {key}"))
}

fn call(name: &str) -> Req {
    Req::new("tools/call")
        .params(json!({"name": name, "arguments": {}}))
        .header("mcp-name", name)
}

/// The error a principal gets for `name`, with the name itself taken out of the message.
async fn refusal(url: &str, key: &str, name: &str) -> Value {
    let e = authed(call(name), key)
        .send(url)
        .await
        .error(400, -32602, &json!(1));
    json!({"message": e["message"].as_str().unwrap_or_default().replace(name, "NAME"), "data": e.get("data")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_see_different_tools_through_the_sdk_and_a_hidden_one_is_answered_as_unknown() {
    let (alpha, beta) = upstreams().await;
    let s = gateway(&alpha.url(), &beta.url()).start().await;
    let url = s.url();
    let alice = rmcp_client::connect_as(&url, ALICE, rmcp_client::Asked::default()).await;
    let bob = rmcp_client::connect_as(&url, BOB, rmcp_client::Asked::default()).await;
    assert_eq!(
        rmcp_client::tool_names(&alice).await,
        ["alpha__search", "alpha__admin_reset", "beta__echo"]
    );
    assert_eq!(
        rmcp_client::tool_names(&bob).await,
        ["alpha__search", "alpha__sales_report"]
    );
    // Each calls its own; the other's is as unknown as a name nobody lists.
    assert_eq!(
        rmcp_client::call(&alice, "alpha__admin_reset", json!({})).await,
        ("alpha ran admin_reset".into(), false)
    );
    assert_eq!(
        rmcp_client::call(&bob, "alpha__sales_report", json!({})).await,
        ("alpha ran sales_report".into(), false)
    );
    let unknown = refusal(&url, BOB, "alpha__no_such_tool").await;
    for (key, name) in [
        (BOB, "alpha__admin_reset"),
        (BOB, "beta__echo"),
        (ALICE, "alpha__sales_report"),
    ] {
        assert_eq!(
            refusal(&url, key, name).await,
            unknown,
            "{name} must be refused as an unknown tool"
        );
    }
    assert_eq!(
        alpha.calls("admin_reset"),
        1,
        "only Alice's call reached the upstream"
    );
    assert_eq!(beta.calls("echo"), 0);
    // A prompt of a hidden upstream is as unknown too, and its family leaves Bob's discover.
    let get = || {
        Req::new("prompts/get")
            .params(json!({"name": "beta__greet"}))
            .header("mcp-name", "beta__greet")
    };
    authed(get(), BOB)
        .send(&url)
        .await
        .error(400, -32602, &json!(1));
    authed(get(), ALICE).send(&url).await.result(&json!(1));
    let discover = |key| authed(Req::new("server/discover"), key).send(&url);
    let caps = |r: Value| {
        r["capabilities"]
            .as_object()
            .map(|c| c.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert!(caps(discover(ALICE).await.result(&json!(1))).contains(&"prompts".to_owned()));
    let bob_caps = caps(discover(BOB).await.result(&json!(1)));
    assert!(
        bob_caps.contains(&"prompts".to_owned()),
        "alpha's prompt is still Bob's: {bob_caps:?}"
    );
    // Lists and discover are private once who you are decides what you see.
    let listed = authed(Req::new("tools/list"), BOB)
        .send(&url)
        .await
        .result(&json!(1));
    assert_eq!(listed["cacheScope"], "private", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_family_hiding_empties_leaves_discover() {
    let (alpha, beta) = upstreams().await;
    let rules =
        format!("{RULES}\n[[rule]]\nname = \"sales-no-prompts\"\nmatch = {{ group = [\"sales\"], prompt = [\"*\"] }}\neffect = \"hide\"\n");
    let s = Gateway::e2e()
        .api_key(ApiKey::new(ALICE, "alice").groups(&["eng"]))
        .api_key(ApiKey::new(BOB, "bob").groups(&["sales"]))
        .policy(&rules)
        .upstream("alpha", &alpha.url())
        .upstream("beta", &beta.url())
        .start()
        .await;
    let caps = |r: Value| {
        r["capabilities"]
            .as_object()
            .map(|c| c.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let bob = caps(
        authed(Req::new("server/discover"), BOB)
            .send(&s.url())
            .await
            .result(&json!(1)),
    );
    assert!(
        !bob.contains(&"prompts".to_owned()) && bob.contains(&"tools".to_owned()),
        "{bob:?}"
    );
    let alice = caps(
        authed(Req::new("server/discover"), ALICE)
            .send(&s.url())
            .await
            .result(&json!(1)),
    );
    assert!(alice.contains(&"prompts".to_owned()), "{alice:?}");
}

async fn listen(url: &str, key: &str) -> Stream {
    let filter = json!({"toolsListChanged": true, "promptsListChanged": true});
    let mut st = authed(
        Req::new("subscriptions/listen").params(json!({"notifications": filter})),
        key,
    )
    .stream(url)
    .await;
    assert_eq!(st.status, 200);
    let ack = st.next().await.expect("acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    st
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_is_told_of_a_list_change_only_when_its_own_view_changed() {
    let (alpha, beta) = upstreams().await;
    let s = gateway(&alpha.url(), &beta.url()).start().await;
    let (mut alice, mut bob) = (listen(&s.url(), ALICE).await, listen(&s.url(), BOB).await);
    alpha.wait_listen().await;
    beta.wait_listen().await;
    let changed = |m: &str| json!({"jsonrpc": "2.0", "method": m, "params": {}});
    let method = |n: Option<Value>| n.map(|n| n["method"].as_str().unwrap_or_default().to_owned());

    // Beta's tools change: Alice sees beta, Bob does not.
    beta.set_tools(vec![tool("echo"), tool("echo2")]);
    beta.notify(changed("notifications/tools/list_changed"));
    assert_eq!(
        method(alice.next().await).as_deref(),
        Some("notifications/tools/list_changed")
    );
    // Alpha gains a tool only sales sees: Bob is told, Alice is not.
    alpha.set_tools(vec![
        tool("search"),
        tool("admin_reset"),
        tool("sales_report"),
        tool("sales_summary"),
    ]);
    alpha.notify(changed("notifications/tools/list_changed"));
    // Bob's first notification is this one, not beta's before it.
    assert_eq!(
        method(bob.next().await).as_deref(),
        Some("notifications/tools/list_changed")
    );
    // Then a prompt change both see: it is the next thing each stream carries, so neither was
    // told of the change it cannot see.
    alpha.set_prompts(vec![prompt("hello"), prompt("hello2")]);
    alpha.notify(changed("notifications/prompts/list_changed"));
    assert_eq!(
        method(alice.next().await).as_deref(),
        Some("notifications/prompts/list_changed")
    );
    assert_eq!(
        method(bob.next().await).as_deref(),
        Some("notifications/prompts/list_changed")
    );
}

/// The names on the `shown` lines of one list's section of `sluice check --principal`.
fn shown_in(report: &str, list: &str) -> Vec<String> {
    let section = report
        .lines()
        .skip_while(|l| *l != list)
        .skip(1)
        .take_while(|l| l.starts_with("  "));
    section
        .filter_map(|l| l.trim_start().strip_prefix("shown"))
        .filter_map(|l| l.trim_start().split('"').nth(1))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_check_principal_prints_what_that_principal_then_sees_and_the_deciding_rules() {
    let (alpha, beta) = upstreams().await;
    let g = gateway(&alpha.url(), &beta.url());
    let path = g.file("check.toml", &g.text());
    let s = g.start().await;
    let mut reports = Vec::new();
    for (id, key) in [("alice", ALICE), ("bob", BOB)] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["check", "--config", &path, "--principal", id])
            .env("NO_COLOR", "1")
            .output()
            .await
            .expect("run sluice check");
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{report}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (list, member) in [("tools/list", "tools"), ("prompts/list", "prompts")] {
            let listed = authed(Req::new(list), key)
                .send(&s.url())
                .await
                .result(&json!(1));
            let names: Vec<String> = listed[member]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                shown_in(&report, list),
                names,
                "{id}'s {list}: the report says what the list then gives\n{report}"
            );
        }
        reports.push(report);
    }
    assert!(
        reports[0].contains(r#"shown  "alpha__admin_reset"  (show rule "eng-sees-admin")"#),
        "{}",
        reports[0]
    );
    assert!(
        reports[0].contains(r#"hidden "alpha__sales_report"  (hide rule "eng-no-sales")"#),
        "{}",
        reports[0]
    );
    assert!(
        reports[1].contains(r#"hidden "beta__echo"  (hide rule "sales-no-beta")"#),
        "{}",
        reports[1]
    );
    assert!(
        reports[1].contains(r#"shown  "alpha__search"  (no rule)"#),
        "{}",
        reports[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_unprefixed_upstream_a_hidden_name_is_answered_as_an_unknown_one() {
    let m = Spec::new("solo")
        .tools(vec![tool("search"), tool("admin_reset")])
        .start()
        .await;
    let rules = "[[rule]]\nname = \"admin-tools-hidden\"\nmatch = { tool = [\"admin_*\"] }\neffect = \"hide\"\n";
    let s = Gateway::e2e()
        .api_key(ApiKey::new(BOB, "bob"))
        .policy(rules)
        .upstream("solo", &m.url())
        .start()
        .await;
    let unknown = refusal(&s.url(), BOB, "no_such_tool").await;
    assert_eq!(refusal(&s.url(), BOB, "admin_reset").await, unknown);
    assert_eq!(
        (m.calls("admin_reset"), m.calls("no_such_tool")),
        (0, 0),
        "neither reached the upstream"
    );
    authed(call("search"), BOB)
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_hears_no_update_of_a_resource_it_may_not_see() {
    let m = Spec::new("rs").start().await;
    let rules = "[[rule]]\nname = \"secrets-hidden\"\nmatch = { resource = [\"mock://rs/secret*\"] }\neffect = \"hide\"\n";
    let s = Gateway::e2e()
        .api_key(ApiKey::new(BOB, "bob"))
        .policy(rules)
        .upstream("rs", &m.url())
        .start()
        .await;
    let filter = json!({"resourceSubscriptions": ["mock://rs"]});
    let mut st = authed(
        Req::new("subscriptions/listen").params(json!({"notifications": filter})),
        BOB,
    )
    .stream(&s.url())
    .await;
    assert_eq!(
        st.next().await.expect("acknowledgement")["method"],
        "notifications/subscriptions/acknowledged"
    );
    m.until("an upstream listen holding the URI", |m| {
        m.seen("subscriptions/listen")
            .iter()
            .any(|x| x.params["notifications"]["resourceSubscriptions"] == json!(["mock://rs"]))
    })
    .await;
    let updated = |uri: &str| json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
    m.notify(updated("mock://rs/secret-plan"));
    m.notify(updated("mock://rs/doc"));
    let n = st.next().await.expect("resources/updated");
    assert_eq!(
        n["params"]["uri"], "mock://rs/doc",
        "the hidden resource's update was not told: {n}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_clients_get_stream_is_told_only_of_changes_to_its_own_view() {
    use crate::support::legacy_client::{Legacy, Sse};
    let (alpha, beta) = upstreams().await;
    let s = gateway(&alpha.url(), &beta.url()).start().await;
    let mut bob = Legacy::with(&crate::support::client::client(), &s.url(), Some(BOB));
    bob.handshake(json!({})).await;
    let mut stream = Sse::of(bob.get().await);
    // Alice (who sees beta) listens too: her stream tells when beta's change was published.
    let mut alice = listen(&s.url(), ALICE).await;
    alpha.wait_listen().await;
    beta.wait_listen().await;
    let changed = |m: &str| json!({"jsonrpc": "2.0", "method": m, "params": {}});
    // Beta is hidden from Bob's group: its tools change is not his.
    beta.set_tools(vec![tool("echo"), tool("echo2")]);
    beta.notify(changed("notifications/tools/list_changed"));
    assert_eq!(
        alice.next().await.expect("beta's change")["method"],
        "notifications/tools/list_changed"
    );
    // Alpha's prompts change is: it is the first thing his stream carries.
    alpha.set_prompts(vec![prompt("hello"), prompt("hello2")]);
    alpha.notify(changed("notifications/prompts/list_changed"));
    assert_eq!(
        stream.next_message().await["method"],
        "notifications/prompts/list_changed"
    );
}
