//! OpenTelemetry traces (issue 15, its first part), end to end: the `sluice` binary with
//! `[telemetry]` exports over OTLP/HTTP to the project's receiver (tests/support/otlp.rs, the
//! official protobuf definitions), in front of the Python SDK's 2026-07-28 upstream
//! (`mcp==2.3.0`) and its 2025-11-25 one (`mcp==1.30.0`, whose asks become bridge A rounds).
//!
//! - a federated call: its server span parented on the client's `traceparent` header, the
//!   stages as its children, the upstream call a client span whose context the Python SDK
//!   took from `_meta` (its `trace_seen` tool says what it saw);
//! - a federated list parented on `params._meta.traceparent`, one child per upstream;
//! - a bridge A call of two rounds: each request its own server span under its own parent,
//!   each with its `round` span;
//! - the audit record carries the trace id; no canary (argument, prompt, sampling answer)
//!   is in any byte exported.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::call::{http, retry, sample, Call};
use crate::support::otlp::{self, Span};
use crate::support::peers;
use crate::support::process::{Env, Sluice};
use crate::support::text::post;

const CANARY: &str = "canary-7f3a-argument";
const PROMPT_CANARY: &str = "canary-9c1e-topic";
const ANSWER_CANARY: &str = "canary-b2d4-llm-answer";
const URI_CANARY: &str = "canary-5e8a-data-uri";
const WAIT: Duration = Duration::from_secs(20);

fn parent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

fn root<'a>(spans: &'a [Span], parent: &str) -> Option<&'a Span> {
    spans.iter().find(|s| s.kind == 2 && s.parent == parent)
}

fn children<'a>(spans: &'a [Span], of: &Span) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.parent == of.span_id).collect()
}

fn names(spans: &[&Span]) -> Vec<String> {
    let mut n: Vec<String> = spans.iter().map(|s| s.name.clone()).collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_of_a_call_a_list_and_a_bridge_a_round_reach_the_collector_with_their_parents_and_no_content(
) {
    let (py2, py1) = (peers::py2().await, peers::py1().await);
    let receiver = otlp::start().await;
    let config = format!(
        "listen = \"127.0.0.1:0\"\nprefix = \"always\"\n\n[telemetry]\notlp_endpoint = \"{}\"\nservice_name = \"sluice-under-test\"\n\n\
         [[upstream]]\nname = \"py\"\nurl = \"{}\"\n\n[[upstream]]\nname = \"legacy\"\nurl = \"{}\"\n",
        receiver.url, py2.url, py1.url
    );
    let sluice = Sluice::start_env(&config, &Env::new().set("OTEL_BSP_SCHEDULE_DELAY", "50")).await;
    let (http, url) = (http(), sluice.url());

    // A federated call, its parent in the headers.
    let (t1, p1) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let call = Call::new("py__trace_seen", json!({"note": CANARY}));
    let reply = call
        .request(&http, &url, json!({}))
        .header("traceparent", parent(t1, p1))
        .send()
        .await
        .expect("POST");
    let body: Value = serde_json::from_str(&reply.text().await.expect("body")).expect("JSON");
    let seen = body["result"]["content"][0]["text"]
        .as_str()
        .expect("trace_seen's answer")
        .to_owned();
    let spans = receiver
        .trace(t1, WAIT, |s| {
            root(s, p1).is_some_and(|r| {
                children(s, r).iter().any(|c| c.kind == 3) && children(s, r).len() >= 5
            })
        })
        .await;
    let server = root(&spans, p1).expect("the request's span");
    // Named by its method: the tool is known only once routing resolved it, after the span
    // started (issue 28 F12: text that names nothing served is never recorded).
    assert_eq!(server.name, "tools/call");
    assert_eq!(server.service, "sluice-under-test");
    assert_eq!(server.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(server.attr("gen_ai.tool.name"), Some("py__trace_seen"));
    assert_eq!(server.attr("jsonrpc.request.id"), Some("1"));
    assert_eq!(server.attr("mcp.protocol.version"), Some("2026-07-28"));
    let kids = children(&spans, server);
    assert_eq!(
        names(&kids),
        [
            "authenticate",
            "policy",
            "route",
            "tools/call trace_seen",
            "validate"
        ],
        "{kids:#?}"
    );
    let upstream = kids
        .iter()
        .find(|s| s.kind == 3)
        .expect("the upstream call's span");
    assert_eq!(upstream.attr("sluice.upstream"), Some("py"));
    assert_eq!(
        seen,
        format!("{t1}-{}", upstream.span_id),
        "the Python SDK took the upstream call's span from _meta as its parent"
    );

    // A federated list, its parent only in `params._meta`.
    let (t2, p2) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let list = json!({"jsonrpc": "2.0", "id": "list-1", "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": parent(t2, p2),
    }}});
    let r = post(&http, &url, "tools/list", None, list.to_string(), None, &[]).await;
    assert_eq!(r.status, 200);
    let spans = receiver
        .trace(t2, WAIT, |s| {
            root(s, p2).is_some_and(|r| children(s, r).iter().filter(|c| c.kind == 3).count() == 2)
        })
        .await;
    let server = root(&spans, p2).expect("the list's span");
    assert_eq!(
        (server.name.as_str(), server.attr("jsonrpc.request.id")),
        ("tools/list", Some("list-1"))
    );
    let mut pages: Vec<_> = children(&spans, server)
        .into_iter()
        .filter(|s| s.kind == 3)
        .filter_map(|s| s.attr("sluice.upstream"))
        .collect();
    pages.sort();
    assert_eq!(pages, ["legacy", "py"], "one page span for each upstream");

    // A bridge A call of two rounds: three requests, each under its own parent.
    let t3 = "5c0e2a8f9d1b4c3e8a7f6b5d4c3b2a19";
    let parents = ["1111111111111111", "2222222222222222", "3333333333333333"];
    let call = Call::new(
        "legacy__two_rounds",
        json!({"topic": PROMPT_CANARY, "tag": "traces"}),
    )
    .caps(json!({"sampling": {}}));
    let send = |extra: Value, p: &str| {
        let req = call
            .request(&http, &url, extra)
            .header("traceparent", parent(t3, p));
        async move {
            let text = req.send().await.expect("POST").text().await.expect("body");
            let line = text
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .unwrap_or(&text)
                .to_owned();
            serde_json::from_str::<Value>(&line).expect("JSON-RPC")
        }
    };
    let key_and_state = |v: &Value| {
        let r = &v["result"];
        assert_eq!(r["resultType"], "input_required", "{v}");
        (
            r["inputRequests"]
                .as_object()
                .expect("asks")
                .keys()
                .next()
                .expect("an ask")
                .clone(),
            r["requestState"].as_str().expect("state").to_owned(),
        )
    };
    let (k1, s1) = key_and_state(&send(json!({}), parents[0]).await);
    let (k2, s2) = key_and_state(
        &send(
            retry(json!({ k1: sample(ANSWER_CANARY, "m") }), &s1),
            parents[1],
        )
        .await,
    );
    let done = send(retry(json!({ k2: sample("two", "m") }), &s2), parents[2]).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let spans = receiver
        .trace(t3, WAIT, |s| {
            parents.iter().all(|p| {
                root(s, p).is_some_and(|r| children(s, r).iter().any(|c| c.name == "round"))
            })
        })
        .await;
    let mut rounds = Vec::new();
    for p in parents {
        let server = root(&spans, p).expect("each request's span");
        assert_eq!(
            (server.name.as_str(), server.attr("gen_ai.tool.name")),
            ("tools/call", Some("legacy__two_rounds"))
        );
        let round = children(&spans, server)
            .into_iter()
            .find(|c| c.name == "round")
            .expect("its round span");
        assert_eq!(round.attr("sluice.upstream"), Some("legacy"));
        rounds.push(round.attr("sluice.round").expect("sluice.round").to_owned());
    }
    assert_eq!(
        rounds,
        ["0", "1", "2"],
        "each request drove the exchange's next round"
    );

    // A `data:` URI is its content, and one no upstream serves names nothing: the span records
    // no URI at all (issue 28, review F12; a served one is kept as `mcp/recorded.rs` says).
    let (t4, p4) = ("7d1e2a8f9d1b4c3e8a7f6b5d4c3b2a20", "4444444444444444");
    let uri = format!("data:text/plain,{URI_CANARY}");
    let read = json!({"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": uri, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": parent(t4, p4),
    }}});
    let _ = post(
        &http,
        &url,
        "resources/read",
        Some(&uri),
        read.to_string(),
        None,
        &[],
    )
    .await;
    let spans = receiver.trace(t4, WAIT, |s| root(s, p4).is_some()).await;
    let server = root(&spans, p4).expect("the read's span");
    assert_eq!(
        (server.name.as_str(), server.attr("mcp.resource.uri")),
        ("resources/read", None)
    );

    // The audit record names the trace; nothing that travelled was exported.
    let output = sluice.output();
    assert!(
        output
            .lines()
            .any(|l| l.contains("\"method\":\"tools/call\"")
                && l.contains(&format!("\"trace_id\":\"{t1}\""))),
        "{output}"
    );
    let raw = receiver.raw();
    for canary in [CANARY, PROMPT_CANARY, ANSWER_CANARY, URI_CANARY] {
        assert!(
            !raw.windows(canary.len()).any(|w| w == canary.as_bytes()),
            "{canary} was exported"
        );
    }
    assert!(
        ![CANARY, PROMPT_CANARY, ANSWER_CANARY, URI_CANARY]
            .iter()
            .any(|c| output.contains(c)),
        "a canary was logged"
    );
    // What reached the receiver is counted as exported; nothing failed.
    let (exported, failed) = span_counts(&sluice).await;
    assert!(
        exported >= spans.len() as u64 && failed == 0,
        "exported {exported}, failed {failed}"
    );
    sluice.terminate().await;
}

/// `sluice_trace_spans_total` for `exported` and `failed`, from `/metrics`.
async fn span_counts(sluice: &Sluice) -> (u64, u64) {
    let text = reqwest::get(sluice.at("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let count = |result: &str| {
        let line = format!("sluice_trace_spans_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (count("exported"), count("failed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_whose_collector_is_down_are_counted_as_failed() {
    let py2 = peers::py2().await;
    let config = format!(
        "listen = \"127.0.0.1:0\"\n\n[telemetry]\notlp_endpoint = \"{}\"\n\n[[upstream]]\nname = \"py\"\nurl = \"{}\"\n",
        crate::support::net::dead_url().trim_end_matches("/mcp"),
        py2.url
    );
    let sluice = Sluice::start_env(&config, &Env::new().set("OTEL_BSP_SCHEDULE_DELAY", "50")).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    assert_eq!(
        post(
            &http(),
            &sluice.url(),
            "tools/list",
            None,
            list.to_string(),
            None,
            &[]
        )
        .await
        .status,
        200
    );
    // The export fails within its timeout (connection refused at once); polled: another process.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (exported, failed) = span_counts(&sluice).await;
        if failed > 0 {
            assert_eq!(exported, 0);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failed export counted within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sluice.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_telemetry_the_clients_trace_context_reaches_the_upstream_untouched() {
    let py2 = peers::py2().await;
    let config = format!(
        "listen = \"127.0.0.1:0\"\n\n[[upstream]]\nname = \"py\"\nurl = \"{}\"\n",
        py2.url
    );
    let sluice = Sluice::start(&config).await;
    let (t, p) = ("6e0c63257de34c926f9efcd03899b8a1", "a3ce929d0e0e4736");
    let call = Call::new("trace_seen", json!({"note": "x"}));
    let mut body = call.body(json!({}));
    body["params"]["_meta"]["traceparent"] = json!(parent(t, p));
    let v = post(
        &http(),
        &sluice.url(),
        "tools/call",
        Some("trace_seen"),
        body.to_string(),
        None,
        &[],
    )
    .await
    .msg;
    assert_eq!(
        v["result"]["content"][0]["text"],
        format!("{t}-{p}"),
        "forwarded byte for byte: {v}"
    );
    assert!(
        !sluice.output().contains("trace_id"),
        "no trace id is recorded with tracing off"
    );
    sluice.terminate().await;
}

/// Issue 28, class 8: client text on exported spans. What a client writes in `tracestate`
/// reaches no exported byte (the OTLP span's `trace_state` included), and the upstream gets it
/// bounded and valid per W3C (members that break the grammar dropped alone, at most 32 and 512
/// characters); an `MCP-Protocol-Version` Sluice does not serve is not recorded on the span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_tracestate_goes_upstream_bounded_and_valid_and_no_client_text_or_unchecked_version_is_exported(
) {
    const TS: &str = "canary5e1d";
    let py2 = peers::py2().await;
    let receiver = otlp::start().await;
    let config = format!(
        "listen = \"127.0.0.1:0\"\n\n[telemetry]\notlp_endpoint = \"{}\"\n\n[[upstream]]\nname = \"py\"\nurl = \"{}\"\n",
        receiver.url, py2.url
    );
    let sluice = Sluice::start_env(&config, &Env::new().set("OTEL_BSP_SCHEDULE_DELAY", "50")).await;
    let (http, url) = (http(), sluice.url());
    let seen = |v: &Value| {
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("trace_seen's answer: {v}"))
            .to_owned()
    };

    // Headers: two tracestate values, hostile members among valid ones, then past 512 characters.
    let (t1, p1) = ("7a1c0e2f4b6d8a9c0e1f2a3b4c5d6e7f", "1a2b3c4d5e6f7a8b");
    let valid = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    let hostile = format!("Bad={TS}1,{valid},x=a=b,nokey,=v,sluice-test={TS}2");
    let long: Vec<String> = (0..40)
        .map(|i| format!("m{i:02}={}", "v".repeat(30)))
        .collect();
    let call = Call::new("trace_seen", json!({"note": "x"}));
    let req = call
        .request(&http, &url, json!({}))
        .header("traceparent", parent(t1, p1));
    let reply = req
        .header("tracestate", hostile)
        .header("tracestate", long.join(","))
        .send()
        .await
        .expect("POST");
    let got = seen(&serde_json::from_str(&reply.text().await.expect("body")).expect("JSON"));
    let (ctx, state) = got
        .split_once(';')
        .unwrap_or_else(|| panic!("the upstream saw no tracestate: {got}"));
    assert!(ctx.starts_with(t1), "{got}");
    assert!(
        state.starts_with(&format!("{valid},sluice-test={TS}2,m00=")),
        "valid members in order, the others dropped: {state}"
    );
    let members: Vec<&str> = state.split(',').collect();
    assert!(
        state.len() <= 512 && members.len() <= 32 && !state.contains("m39="),
        "bounded: {state}"
    );
    assert!(
        !state.contains("Bad=") && !state.contains("x=a") && !state.contains("nokey"),
        "{state}"
    );

    // `_meta`: a control character and an over-long value are dropped, a valid member kept.
    let (t2, p2) = ("8b2d1f3a5c7e9b0d1f2a3b4c5d6e7f80", "2b3c4d5e6f7a8b9c");
    let meta_state = format!("ok=1,k3=a\u{7}{TS}3,big={}{TS}4,Up={TS}5", "z".repeat(300));
    let extra = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}, "traceparent": parent(t2, p2), "tracestate": meta_state}});
    let got = seen(&call.send(&http, &url, extra).await.msg);
    assert_eq!(got.split_once(';').map(|(_, s)| s), Some("ok=1"), "{got}");

    // A version Sluice does not serve, refused after the span began: not an attribute.
    let (t3, p3) = ("9c3e2a4b6d8f0a1b2c3d4e5f6a7b8c9d", "3c4d5e6f7a8b9c0d");
    let r = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", format!("2099-12-31-{TS}6"))
        .header("mcp-method", "tools/call")
        .header("mcp-name", "trace_seen")
        .header("traceparent", parent(t3, p3))
        .body(call.body(json!({})).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 400);
    let spans = receiver
        .trace(t3, WAIT, |s| {
            root(s, p3).is_some_and(|r| r.attr("http.response.status_code").is_some())
        })
        .await;
    let server = root(&spans, p3).expect("the refused request's span");
    assert_eq!(
        server.attr("mcp.protocol.version"),
        None,
        "an unchecked version was recorded: {server:#?}"
    );
    for (t, p) in [(t1, p1), (t2, p2)] {
        let spans = receiver
            .trace(t, WAIT, |s| {
                root(s, p).is_some_and(|r| children(s, r).iter().any(|c| c.kind == 3))
            })
            .await;
        assert_eq!(
            root(&spans, p).and_then(|s| s.attr("mcp.protocol.version")),
            Some("2026-07-28"),
            "a served version is"
        );
    }
    let raw = receiver.raw();
    assert!(
        !raw.windows(TS.len()).any(|w| w == TS.as_bytes()),
        "a client's tracestate or version text was exported"
    );
    assert!(
        !sluice.output().contains(TS),
        "a client's tracestate or version text was logged"
    );
    sluice.terminate().await;
}
