//! Class 2: numbers are compared as the numbers they denote. A sampling ask's `maxTokens` of
//! `1e6`, `1000000.0`, `1E6` or `10e5` is a million tokens for the per-ask cap (deny or clamp),
//! the token window and a policy's `max_tokens_above`; a `maxTokens` that is no non-negative
//! integer (`1.5`, `-1`, `"100"`, `null`, absent) is a malformed ask. `Mcp-Param-*` integers
//! are compared exactly (no rounding through a double) and written in decimal. Before the fixes
//! Sluice read `maxTokens` only when it was spelled as a plain integer, so the others passed as
//! asks for no tokens.

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::legacy::{self, Step};
use crate::support::modern::{self as hostile, result, tool_args as tool, Spec};
use crate::support::process::Sluice;
use crate::support::text::{self as client, call, http};
use crate::support::unique;

/// The spellings of a million.
const MILLION: [&str; 4] = ["1e6", "1000000.0", "1E6", "10e5"];

/// A sampling ask (key `llm`) with `maxTokens` written as `raw` (`None`: absent).
fn ask(text: &str, raw: Option<&str>) -> String {
    let tokens = raw
        .map(|r| format!(r#","maxTokens":{r}"#))
        .unwrap_or_default();
    format!(
        r#"{{"llm":{{"method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":{}}}}}]{tokens}}}}}}}"#,
        json!(text)
    )
}

/// A modern upstream `tokens` whose tool `ask` answers one round asking for `arguments.mt`
/// tokens (raw JSON text; "absent" leaves `maxTokens` out), and completes a retry.
async fn tokens_upstream(prompt: &str) -> hostile::Mock {
    let prompt = prompt.to_owned();
    Spec::raw("tokens")
        .tools_json(json!([tool("ask", &["mt"])]))
        .fallback(move |s| {
            if s.params.get("inputResponses").is_some() {
                return Some(result(
                    &s.id,
                    r#"{"resultType":"complete","content":[{"type":"text","text":"answered"}]}"#,
                ));
            }
            let mt = s.params["arguments"]["mt"].as_str()?;
            let raw = (mt != "absent").then_some(mt);
            Some(result(
                &s.id,
                &format!(
                    r#"{{"resultType":"input_required","inputRequests":{},"requestState":"s"}}"#,
                    ask(&prompt, raw)
                ),
            ))
        })
        .start()
        .await
}

async fn ask_with(sluice: &Sluice, mt: &str) -> client::Answer {
    call(
        &http(),
        &sluice.url(),
        1,
        "ask",
        &json!({"mt": mt}).to_string(),
        "",
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_spelled_1e6_is_over_the_per_ask_cap_and_refused_with_31016() {
    let prompt = unique("prompt");
    let up = tokens_upstream(&prompt).await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("tokens", &up.url()).text()).await;
    for mt in MILLION {
        ask_with(&sluice, mt).await.refused(
            400,
            -31016,
            &format!("maxTokens {mt} over max_tokens_per_ask 8192"),
        );
    }
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_spelled_1e6_is_clamped_to_the_integer_8192() {
    let prompt = unique("prompt");
    let up = tokens_upstream(&prompt).await;
    let cfg = Gateway::hostile().set("budget", "max_tokens_action", "clamp");
    let sluice = Sluice::start(&cfg.upstream("tokens", &up.url()).text()).await;
    for mt in MILLION {
        let a = ask_with(&sluice, mt).await;
        assert!(
            a.is_input_required(),
            "maxTokens {mt}: the round reaches the client, clamped: {}",
            client::cut(&a.text)
        );
        let asked = &a.input_requests()["llm"]["params"]["maxTokens"];
        assert!(
            asked.is_u64() && asked.as_u64() == Some(8192),
            "maxTokens {mt}: the client was asked for {asked}"
        );
        let at = a
            .text
            .find(r#""maxTokens":"#)
            .map(|i| i + r#""maxTokens":"#.len())
            .expect("maxTokens in the answer");
        let written: String = a.text[at..]
            .chars()
            .take_while(|c| !matches!(c, ',' | '}' | ' '))
            .collect();
        assert_eq!(
            written, "8192",
            "maxTokens {mt}: written as the integer 8192"
        );
    }
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_spelled_1e6_counts_against_the_token_window() {
    let prompt = unique("prompt");
    let up = tokens_upstream(&prompt).await;
    let cfg = Gateway::hostile()
        .set("budget", "max_tokens_per_ask", 100000000)
        .set("budget", "tokens_per_window", 200000);
    let sluice = Sluice::start(&cfg.upstream("tokens", &up.url()).text()).await;
    for mt in MILLION {
        ask_with(&sluice, mt).await.refused(
            400,
            -31013,
            &format!("maxTokens {mt} over tokens_per_window 200000"),
        );
    }
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_tokens_above_rule_matches_max_tokens_spelled_1e6() {
    let prompt = unique("prompt");
    let up = tokens_upstream(&prompt).await;
    let rule =
        "[[rule]]\nname = \"small-asks\"\nmatch = { method = [\"sampling/createMessage\"], max_tokens_above = 1000 }\neffect = \"deny\"\n";
    let cfg = Gateway::hostile()
        .set("budget", "max_tokens_per_ask", 100000000)
        .set("budget", "tokens_per_window", 2000000000)
        .policy(rule);
    let sluice = Sluice::start(&cfg.upstream("tokens", &up.url()).text()).await;
    for mt in MILLION {
        let data =
            ask_with(&sluice, mt)
                .await
                .refused(400, -31014, &format!("maxTokens {mt} above 1000"));
        assert_eq!(data["rule"], "small-asks", "maxTokens {mt}");
    }
    sluice.assert_no_leak(&[&prompt]);
}

/// Malformed `maxTokens`: no non-negative integer, or absent.
const MALFORMED: [&str; 5] = ["1.5", "-1", "\"100\"", "null", "absent"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_max_tokens_from_a_modern_upstream_is_a_502_naming_it() {
    let prompt = unique("prompt");
    let up = tokens_upstream(&prompt).await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("tokens", &up.url()).text()).await;
    for mt in MALFORMED {
        let a = ask_with(&sluice, mt).await;
        a.refused(502, -32603, &format!("maxTokens {mt}"));
        assert!(
            a.message().contains("tokens"),
            "maxTokens {mt}: the message names the upstream: {}",
            a.text
        );
    }
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_max_tokens_from_a_legacy_upstream_is_answered_32602_and_the_call_goes_on() {
    let prompt = unique("prompt");
    let p = prompt.clone();
    let up = legacy::start(json!([tool("ask", &["v"])]), move |s| {
        let v: usize = s.params["arguments"]["v"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
        let mt = MALFORMED[v];
        let tokens = if mt == "absent" { String::new() } else { format!(r#","maxTokens":{mt}"#) };
        let id = format!("\"ask-{v}\"");
        vec![
            Step::Send(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":{}}}}}]{tokens}}}}}"#,
                json!(p)
            )),
            Step::Await(vec![id]),
            Step::Send(hostile::result_text("{id}", r#"{"content":[{"type":"text","text":"finished anyway"}]}"#)),
        ]
    })
    .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("oldone", &up.url()).text()).await;
    let h = http();
    for (v, mt) in MALFORMED.iter().enumerate() {
        let a = call(
            &h,
            &sluice.url(),
            1,
            "ask",
            &json!({"v": v.to_string()}).to_string(),
            "",
            None,
        )
        .await;
        assert_eq!(
            a.status,
            200,
            "maxTokens {mt}: the call goes on: {}",
            client::cut(&a.text)
        );
        assert_eq!(
            a.msg["result"]["content"][0]["text"],
            "finished anyway",
            "maxTokens {mt}: {}",
            client::cut(&a.text)
        );
        let replies = up.replies();
        let r = replies
            .iter()
            .find(|r| r["id"] == format!("ask-{v}"))
            .unwrap_or_else(|| panic!("maxTokens {mt}: no answer to the ask: {replies:?}"));
        assert_eq!(
            r["error"]["code"], -32602,
            "maxTokens {mt}: the ask is answered with -32602: {r}"
        );
    }
    sluice.assert_no_leak(&[&prompt]);
}

/// A modern upstream `counter` whose tool `count` mirrors `n` (an integer) into `Mcp-Param-N`.
async fn counter() -> hostile::Mock {
    let t = json!({"name": "count", "description": "counts", "inputSchema": {"type": "object",
        "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}});
    Spec::raw("counter")
        .tools_json(json!([t]))
        .fallback(|s| {
            (s.tool() == "count").then(|| {
                result(
                    &s.id,
                    r#"{"resultType":"complete","content":[{"type":"text","text":"counted"}]}"#,
                )
            })
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_param_integers_are_compared_exactly_and_written_in_decimal() {
    let up = counter().await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("counter", &up.url()).text()).await;
    let h = http();
    let send = |body: &'static str, header: &'static str| {
        let (h, url) = (h.clone(), sluice.url());
        async move {
            let b = client::tool_body(1, "count", &format!(r#"{{"n":{body}}}"#), "", &json!({}));
            client::post(
                &h,
                &url,
                "tools/call",
                Some("count"),
                b,
                None,
                &[("mcp-param-n", header)],
            )
            .await
        }
    };
    let mut wrong = Vec::new();
    for (body, header, accepted) in [
        ("9007199254740993", "9007199254740992", false),
        ("42.0", "42", true),
        ("4.2e1", "42", true),
        ("42.5", "42", false),
        ("100", "1e2", false),
    ] {
        let before = up.calls("count");
        let a = send(body, header).await;
        let reached = up.calls("count") - before;
        let ok = if accepted {
            a.status == 200 && reached == 1
        } else {
            a.status == 400 && a.code() == Some(-32020) && reached == 0
        };
        if !ok {
            let want = if accepted {
                "accepted and forwarded"
            } else {
                "400 -32020, not forwarded"
            };
            wrong.push(format!(
                "body {body} with Mcp-Param-N: {header}: want {want}; got HTTP {} (forwarded {reached}): {}",
                a.status, a.text
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
