//! Class 1: governance decides on the decoded values an upstream sent, never on how it spelled
//! them. A `resultType` written with JSON escapes (`input\u005frequired`, `\u0069nput_required`),
//! under an escaped key (`result\u0054ype`), or repeated (`complete` then `input_required`: the
//! last one counts, as every JSON reader Sluice's clients use reads it) is an `input_required`
//! round: its asks are judged by policy and counted against the round cap. A `resultType` no
//! one defined, or `input_required` where the method may not return it, is the upstream's
//! protocol error (502). Before the fixes, Sluice looked for the literal bytes
//! `"resultType":"input_required"` and relayed anything else as a final result.

use serde_json::json;

use super::DENY_SAMPLING;
use crate::support::gateway::Gateway;
use crate::support::legacy::{self, Step};
use crate::support::modern::{self as hostile, result, tool_args as tool, Spec};
use crate::support::process::Sluice;
use crate::support::text::{self as client, call, http, retry, sample};
use crate::support::unique;

/// The four spellings of an `input_required` result carrying `asks` and `state`.
fn spellings(asks: &str, state: &str) -> [(&'static str, String); 4] {
    let tail = format!(r#""inputRequests":{asks},"requestState":"{state}""#);
    [
        (
            "input\\u005frequired",
            format!(r#"{{"resultType":"input\u005frequired",{tail}}}"#),
        ),
        (
            "\\u0069nput_required",
            format!(r#"{{"resultType":"\u0069nput_required",{tail}}}"#),
        ),
        (
            "result\\u0054ype",
            format!(r#"{{"result\u0054ype":"input_required",{tail}}}"#),
        ),
        (
            "repeated key",
            format!(
                r#"{{"resultType":"complete","content":[],{tail},"resultType":"input_required"}}"#
            ),
        ),
    ]
}

/// One sampling ask (input key `llm`) whose message is `text`.
fn sampling_ask(text: &str) -> String {
    json!({"llm": {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 100}}})
    .to_string()
}

/// A modern upstream `escaper` whose tool `ask` answers, forever, the spelling chosen by
/// `arguments.v` (0..4) of an `input_required` round.
async fn escaper(prompt: &str, state: &str) -> hostile::Mock {
    let variants: Vec<String> = spellings(&sampling_ask(prompt), state)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    Spec::raw("escaper")
        .tools_json(json!([tool("ask", &["v", "note"])]))
        .fallback(move |s| {
            let v: usize = s.params["arguments"]["v"].as_str()?.parse().ok()?;
            Some(result(&s.id, &variants[v]))
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_or_repeated_input_required_whose_sampling_is_denied_is_refused_with_31014() {
    let (prompt, state, note) = (unique("prompt"), unique("upstate"), unique("arg"));
    let up = escaper(&prompt, &state).await;
    let sluice = Sluice::start(
        &Gateway::hostile()
            .policy(DENY_SAMPLING)
            .upstream("escaper", &up.url())
            .text(),
    )
    .await;
    let h = http();
    for (i, (spelling, _)) in spellings("", "").iter().enumerate() {
        let args = json!({"v": i.to_string(), "note": note}).to_string();
        let a = call(&h, &sluice.url(), 1, "ask", &args, "", None).await;
        assert!(
            !a.is_input_required(),
            "{spelling}: the client got the upstream's round unjudged: {}",
            client::cut(&a.text)
        );
        assert!(
            !a.text.contains(&state),
            "{spelling}: the upstream's own requestState reached the client: {}",
            client::cut(&a.text)
        );
        let data = a.refused(400, -31014, spelling);
        assert_eq!(data["rule"], "no-sampling", "{spelling}: {}", a.text);
    }
    sluice.assert_no_leak(&[&prompt, &state, &note]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_or_repeated_input_required_loop_is_cut_at_the_round_cap() {
    let (prompt, state) = (unique("prompt"), unique("upstate"));
    let up = escaper(&prompt, &state).await;
    let cfg = Gateway::hostile()
        .set("budget", "max_rounds", 5)
        .set("budget", "sampling_per_window", 1000)
        .set("budget", "sampling_burst", 1000);
    let sluice = Sluice::start(&cfg.upstream("escaper", &up.url()).text()).await;
    let h = http();
    let answer = json!({"llm": sample("again")});
    for (i, (spelling, _)) in spellings("", "").iter().enumerate() {
        let args = json!({"v": i.to_string()}).to_string();
        let before = up.calls("ask");
        let mut a = call(&h, &sluice.url(), 1, "ask", &args, "", None).await;
        let mut retries = 0;
        while a.is_input_required() && retries < 20 {
            assert!(
                !a.text.contains(&state),
                "{spelling}: the upstream's own requestState reached the client: {}",
                client::cut(&a.text)
            );
            retries += 1;
            let extra = retry(
                &answer,
                a.msg["result"]["requestState"].as_str().unwrap_or(""),
            );
            a = call(&h, &sluice.url(), 1 + retries, "ask", &args, &extra, None).await;
        }
        a.refused(400, -31010, &format!("{spelling}: after {retries} retries"));
        assert!(
            retries <= 6,
            "{spelling}: the round cap (5) let {retries} retries through"
        );
        let reached = up.calls("ask") - before;
        assert!(
            reached <= 6,
            "{spelling}: {reached} calls reached the upstream: the first and at most 5 retries may"
        );
    }
    sluice.assert_no_leak(&[&prompt, &state]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_type_no_one_defined_is_a_502_naming_the_upstream() {
    let note = unique("arg");
    let up = Spec::raw("oddtypes")
        .tools_json(json!([tool("odd", &["t", "note"])]))
        .fallback(|s| {
            let t = s.params["arguments"]["t"].as_str()?;
            Some(result(
                &s.id,
                &format!(
                    r#"{{"resultType":{},"content":[{{"type":"text","text":"odd"}}]}}"#,
                    json!(t)
                ),
            ))
        })
        .start()
        .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("oddtypes", &up.url()).text()).await;
    let h = http();
    for t in ["task", "Input_Required", ""] {
        let a = call(
            &h,
            &sluice.url(),
            1,
            "odd",
            &json!({"t": t, "note": note}).to_string(),
            "",
            None,
        )
        .await;
        a.refused(502, -32603, &format!("resultType {t:?}"));
        assert!(
            a.message().contains("oddtypes"),
            "resultType {t:?}: the message names the upstream: {}",
            a.text
        );
    }
    sluice.assert_no_leak(&[&note]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_for_completion_complete_is_a_502() {
    let prompt = unique("prompt");
    let asks = sampling_ask(&prompt);
    let up = Spec::raw("completer")
        .prompts_json(json!([{"name": "greet", "description": "a prompt", "arguments": [{"name": "who"}]}]))
        .fallback(move |s| {
            (s.method == "completion/complete")
                .then(|| result(&s.id, &format!(r#"{{"resultType":"input_required","inputRequests":{asks},"requestState":"c"}}"#)))
        })
        .start()
        .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("completer", &up.url()).text()).await;
    let params = json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "w"}});
    let body = client::body(1, "completion/complete", params, &client::all_caps());
    let a = client::post(
        &http(),
        &sluice.url(),
        "completion/complete",
        None,
        body,
        None,
        &[],
    )
    .await;
    assert_eq!(
        up.seen("completion/complete").len(),
        1,
        "the request reached the upstream: {}",
        a.text
    );
    a.refused(502, -32603, "input_required answering completion/complete");
    assert!(
        a.message().contains("completer"),
        "the message names the upstream: {}",
        a.text
    );
    sluice.assert_no_leak(&[&prompt]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_final_result_carrying_input_required_is_a_502_naming_the_upstream() {
    let (prompt, state) = (unique("prompt"), unique("upstate"));
    let asks = sampling_ask(&prompt);
    let finals = [
        format!(
            r#"{{"resultType":"input_required","inputRequests":{asks},"requestState":"{state}","content":[]}}"#
        ),
        format!(
            r#"{{"resultType":"input\u005frequired","inputRequests":{asks},"requestState":"{state}","content":[]}}"#
        ),
    ];
    let up = legacy::start(json!([tool("finish", &["v"])]), move |s| {
        let v: usize = s.params["arguments"]["v"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        vec![Step::Send(hostile::result_text("{id}", &finals[v]))]
    })
    .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("oldone", &up.url()).text()).await;
    let h = http();
    for (v, spelling) in ["plain", "escaped"].iter().enumerate() {
        let a = call(
            &h,
            &sluice.url(),
            1,
            "finish",
            &json!({"v": v.to_string()}).to_string(),
            "",
            None,
        )
        .await;
        assert!(
            !a.is_input_required(),
            "{spelling}: a legacy final result became a round: {}",
            client::cut(&a.text)
        );
        assert!(
            !a.text.contains(&state),
            "{spelling}: the upstream's requestState reached the client: {}",
            client::cut(&a.text)
        );
        a.refused(502, -32603, spelling);
        assert!(
            a.message().contains("oldone"),
            "{spelling}: the message names the upstream: {}",
            a.text
        );
    }
    sluice.assert_no_leak(&[&prompt, &state]);
}
