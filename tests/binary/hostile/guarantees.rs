//! Class 6: what Sluice guarantees holds on every path. A state is used once, whoever asked
//! for the round (Sluice's approval or the upstream's own ask), also when the same retry
//! arrives six times at once. An upstream that needs a scope is invisible to a principal
//! without it: in lists, in `server/discover`, and on listen streams; and lists whose content
//! depends on the principal are `cacheScope: "private"`. The audit record of a denied ask names
//! the decision and the rule for modern and 2025-11-25 clients alike. `sluice check` prints no
//! credential from an upstream URL. Before the fixes a modern round's state could be replayed,
//! concurrent replays raced, listens and discover ignored scopes, bridge B's audit lost the
//! decision, and `check` printed URLs verbatim.

use std::time::Duration;

use serde_json::{json, Value};

use super::DENY_SAMPLING;
use crate::support::gateway::{strings, ApiKey, Gateway, Upstream};
use crate::support::legacy_client::Legacy;
use crate::support::modern::{destructive, result, tool_args as tool, Spec};
use crate::support::process::{check, check_file, Env, Sluice};
use crate::support::text::{self as client, approve, call, http, retry, sample, Events};
use crate::support::unique;

const APPROVE_DESTRUCTIVE: &str =
    "[[rule]]\nname = \"approve-destructive\"\nmatch = { method = [\"tools/call\"], destructive = true }\neffect = \"approve\"\n";

async fn vault() -> crate::support::modern::Mock {
    Spec::raw("vault")
        .tools_json(json!([destructive("wipe")]))
        .fallback(|s| {
            (s.tool() == "wipe").then(|| {
                result(
                    &s.id,
                    r#"{"resultType":"complete","content":[{"type":"text","text":"wiped"}]}"#,
                )
            })
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_retry_replayed_five_times_is_refused_as_unknown_exchange_and_runs_once() {
    let up = vault().await;
    let sluice = Sluice::start(
        &Gateway::hostile()
            .policy(APPROVE_DESTRUCTIVE)
            .upstream("vault", &up.url())
            .text(),
    )
    .await;
    let (h, canary) = (http(), unique("arg"));
    let args = json!({"what": canary}).to_string();
    let first = call(&h, &sluice.url(), 1, "wipe", &args, "", None).await;
    let again = retry(&approve(), &first.state());
    let done = call(&h, &sluice.url(), 2, "wipe", &args, &again, None).await;
    assert_eq!(
        done.msg["result"]["content"][0]["text"], "wiped",
        "{}",
        done.text
    );
    for i in 0..5 {
        let replay = call(&h, &sluice.url(), 3 + i, "wipe", &args, &again, None).await;
        assert_eq!(
            replay.refused(400, -32602, &format!("replay {i}"))["reason"],
            "unknown_exchange"
        );
    }
    assert_eq!(up.calls("wipe"), 1, "the approved tool ran exactly once");
    sluice.assert_no_leak(&[&canary]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_retry_sent_six_times_at_once_runs_the_tool_once() {
    let up = vault().await;
    let sluice = Sluice::start(
        &Gateway::hostile()
            .policy(APPROVE_DESTRUCTIVE)
            .upstream("vault", &up.url())
            .text(),
    )
    .await;
    let h = http();
    let first = call(&h, &sluice.url(), 1, "wipe", "{}", "", None).await;
    let again = retry(&approve(), &first.state());
    let sends = (0..6).map(|i| {
        let (h, url, again) = (h.clone(), sluice.url(), again.clone());
        async move { call(&h, &url, 10 + i, "wipe", "{}", &again, None).await }
    });
    let answers = futures_util::future::join_all(sends).await;
    let ran = answers.iter().filter(|a| a.status == 200).count();
    assert_eq!(
        ran,
        1,
        "exactly one of six concurrent uses of one state is served: {:?}",
        answers.iter().map(|a| &a.text).collect::<Vec<_>>()
    );
    for a in answers.iter().filter(|a| a.status != 200) {
        assert_eq!(
            a.refused(400, -32602, "a concurrent replay")["reason"],
            "unknown_exchange"
        );
    }
    assert_eq!(up.calls("wipe"), 1, "the approved tool ran exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_rounds_retry_replayed_is_refused_as_unknown_exchange() {
    let prompt = unique("prompt");
    let p = prompt.clone();
    let up = Spec::raw("asker")
        .tools_json(json!([tool("ask", &[])]))
        .fallback(move |s| {
            if s.params.get("inputResponses").is_some() {
                return Some(result(&s.id, r#"{"resultType":"complete","content":[{"type":"text","text":"thanks"}]}"#));
            }
            let asks = json!({"llm": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": p}}], "maxTokens": 10}}});
            Some(result(&s.id, &format!(r#"{{"resultType":"input_required","inputRequests":{asks},"requestState":"asker-state"}}"#)))
        })
        .start()
        .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("asker", &up.url()).text()).await;
    let h = http();
    let first = call(&h, &sluice.url(), 1, "ask", "{}", "", None).await;
    let again = retry(&json!({"llm": sample("an answer")}), &first.state());
    let done = call(&h, &sluice.url(), 2, "ask", "{}", &again, None).await;
    assert_eq!(
        done.msg["result"]["content"][0]["text"], "thanks",
        "{}",
        done.text
    );
    let replay = call(&h, &sluice.url(), 3, "ask", "{}", &again, None).await;
    assert_eq!(
        replay.refused(400, -32602, "the round's retry used twice")["reason"],
        "unknown_exchange"
    );
    assert_eq!(up.calls("ask"), 2, "the replay never reached the upstream");
    sluice.assert_no_leak(&[&prompt]);
}

const FULL: &str = "hostile-full-key-0123456789abcdef";
const LIMITED: &str = "hostile-limited-key-0123456789abc";

/// Opens a listen for `key` wanting tool and resource list changes; gives its stream after the
/// acknowledgement.
async fn listen(h: &reqwest::Client, url: &str, id: u64, key: &str) -> Events {
    let body = client::body(
        id,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "resourcesListChanged": true}}),
        &json!({}),
    );
    let resp = h
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .bearer_auth(key)
        .body(body)
        .send()
        .await
        .expect("open a listen");
    assert_eq!(resp.status(), 200, "a listen for {key}");
    let mut ev = Events::of(resp);
    let ack = ev
        .next(Duration::from_secs(10))
        .await
        .expect("an acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    ev
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_needing_a_scope_is_invisible_to_a_principal_without_it() {
    let open = Spec::raw("open")
        .tools_json(json!([tool("open_t", &[])]))
        .start()
        .await;
    let secret = Spec::raw("secret")
        .tools_json(json!([tool("secret_t", &[])]))
        .prompts_json(json!([{"name": "secret_p"}]))
        .start()
        .await;
    let cfg = Gateway::hostile()
        .api_key(ApiKey::new(FULL, "full").scopes(&["s"]))
        .api_key(ApiKey::new(LIMITED, "limited").scopes(&[]))
        .upstream("open", &open.url())
        .upstream_spec(
            Upstream::new("secret", &secret.url()).key("required_scopes", strings(&["s"])),
        );
    let sluice = Sluice::start(&cfg.text()).await;
    let h = http();
    let list = |key: &'static str| {
        let (h, url) = (h.clone(), sluice.url());
        async move {
            client::post(
                &h,
                &url,
                "tools/list",
                None,
                client::body(1, "tools/list", json!({}), &json!({})),
                Some(key),
                &[],
            )
            .await
        }
    };
    let names = |a: &client::Answer| -> Vec<String> {
        a.msg["result"]["tools"]
            .as_array()
            .unwrap_or(&vec![])
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (full, limited) = (list(FULL).await, list(LIMITED).await);
    assert!(
        names(&full).iter().any(|n| n.contains("secret_t")),
        "full sees the scoped upstream's tools: {}",
        full.text
    );
    assert!(
        !names(&limited).iter().any(|n| n.contains("secret")),
        "limited sees the scoped upstream's tools: {}",
        limited.text
    );
    assert!(
        names(&limited).iter().any(|n| n.contains("open_t")),
        "{}",
        limited.text
    );
    for (who, a) in [("full", &full), ("limited", &limited)] {
        assert_eq!(
            a.msg["result"]["cacheScope"], "private",
            "{who}'s tools/list depends on the principal: {}",
            a.text
        );
    }
    let discover = |key: &'static str| {
        let (h, url) = (h.clone(), sluice.url());
        async move {
            client::post(
                &h,
                &url,
                "server/discover",
                None,
                client::body(2, "server/discover", json!({}), &json!({})),
                Some(key),
                &[],
            )
            .await
        }
    };
    let (d_full, d_limited) = (discover(FULL).await, discover(LIMITED).await);
    assert!(
        d_full.msg["result"]["capabilities"]
            .get("prompts")
            .is_some(),
        "full is served prompts: {}",
        d_full.text
    );
    assert!(
        d_limited.msg["result"]["capabilities"]
            .get("prompts")
            .is_none(),
        "limited is told of prompts only the scoped upstream serves: {}",
        d_limited.text
    );

    // Listens: the scoped upstream's change reaches full only. Then the open upstream's resource
    // change follows it; for limited that must be the first thing after the acknowledgement.
    let mut l_full = listen(&h, &sluice.url(), 10, FULL).await;
    let mut l_limited = listen(&h, &sluice.url(), 11, LIMITED).await;
    secret.listening(1).await;
    open.listening(1).await;
    secret.notify_method("notifications/tools/list_changed");
    let got = l_full
        .next(Duration::from_secs(10))
        .await
        .expect("full's listen is open");
    assert_eq!(got["method"], "notifications/tools/list_changed", "{got}");
    open.notify_method("notifications/resources/list_changed");
    let got = l_full
        .next(Duration::from_secs(10))
        .await
        .expect("full's listen is open");
    assert_eq!(
        got["method"], "notifications/resources/list_changed",
        "{got}"
    );
    let first = l_limited
        .next(Duration::from_secs(10))
        .await
        .expect("limited's listen is open");
    assert_eq!(
        first["method"], "notifications/resources/list_changed",
        "limited received the scoped upstream's change: {first}"
    );
}

/// The audit records in `path`, once one for `method` arrived (10 s at most).
async fn audit_of(path: &std::path::Path, method: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let recs: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let hits: Vec<Value> = recs
            .iter()
            .filter(|r| r["method"] == method)
            .cloned()
            .collect();
        if !hits.is_empty() {
            return hits;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit record for {method} within 10 s: {recs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_ask_is_audited_with_the_decision_and_rule_for_both_eras() {
    let prompt = unique("prompt");
    let p = prompt.clone();
    let up = Spec::raw("asker")
        .tools_json(json!([tool("ask", &[])]))
        .fallback(move |s| {
            let asks = json!({"llm": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": p}}], "maxTokens": 10}}});
            Some(result(&s.id, &format!(r#"{{"resultType":"input_required","inputRequests":{asks},"requestState":"s"}}"#)))
        })
        .start()
        .await;
    let conf = Gateway::hostile()
        .policy(DENY_SAMPLING)
        .upstream("asker", &up.url());
    let sink = conf.file("audit.jsonl", "");
    let sluice = Sluice::start(&conf.set("audit", "sink", sink.as_str()).text()).await;
    let h = http();
    // A 2025-11-25 client (bridge B).
    let mut legacy = Legacy::with(&h, &sluice.url(), None);
    legacy.handshake(json!({"sampling": {}})).await;
    let a = legacy
        .answer(1, "tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    assert_eq!(
        a.code(),
        Some(-31014),
        "the legacy client is refused by policy: {}",
        a.text
    );
    let recs = audit_of(std::path::Path::new(&sink), "tools/call").await;
    let r = recs
        .iter()
        .find(|r| r["client_era"] == "legacy")
        .unwrap_or_else(|| panic!("no legacy tools/call record: {recs:#?}"));
    assert_eq!(
        (&r["status"], &r["error_code"]),
        (&json!(200), &json!(-31014)),
        "{r}"
    );
    assert_eq!(
        (&r["decision"], &r["policy_rule"]),
        (&json!("deny"), &json!("no-sampling")),
        "bridge B's record: {r}"
    );
    // A modern client.
    let a = call(&h, &sluice.url(), 2, "ask", "{}", "", None).await;
    a.refused(400, -31014, "a modern client");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let recs = audit_of(std::path::Path::new(&sink), "tools/call").await;
        if let Some(r) = recs.into_iter().find(|r| r["client_era"] == "modern") {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no modern tools/call record"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (&r["decision"], &r["policy_rule"]),
        (&json!("deny"), &json!("no-sampling")),
        "the modern record: {r}"
    );
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_no_credential_from_an_upstream_url_and_its_output_loads_again() {
    let conf = Gateway::hostile().upstream(
        "creds",
        "http://user:pa55word@127.0.0.1:9/mcp?token=t0ken&x=1",
    );
    let run = check(&conf.text(), &Env::new()).await;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        !said.contains("pa55word") && !said.contains("t0ken"),
        "check printed a credential:\n{said}"
    );
    assert_eq!(run.code, Some(0), "the config is valid:\n{said}");
    // Secrets print redacted (state keys as `ID:<redacted>`) and cannot load back; everything
    // else, the redacted URL included, must.
    let printed = run
        .stdout
        .split_once(sluice::inspect::CONFIG_HEADER)
        .map_or("", |(_, c)| c);
    let loadable: String = printed
        .lines()
        .filter(|l| !l.contains("<redacted>"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        loadable.contains("http://redacted@127.0.0.1:9/mcp?token=redacted"),
        "{loadable}"
    );
    let printed = conf.file("printed.toml", &loadable);
    let again = check_file(std::path::Path::new(&printed), &Env::new()).await;
    assert_eq!(
        again.code,
        Some(0),
        "the printed config loads again:\n{}{}",
        again.stdout,
        again.stderr
    );
}
