//! Real 2025-11-25 clients through Sluice to a 2026-07-28 server (`mcp==2.3.0`: `ask_llm`, `ask_raw`)
//! and to a 2025-11-25 server (`mcp==1.30.0`: mid-call sampling, bridge A behind bridge B); the
//! `mcp==2.3.0` client in `auto` mode; and the same round on the raw wire.

use serde_json::{json, Value};

use crate::support::gateway::{Gateway, Upstream};
use crate::support::legacy_client::{has_result_type, sample, Legacy};
use crate::support::peers::{self};

/// Sluice in front of the shared `py` (2026-07-28) and `py1` (2025-11-25) upstreams. `py`
/// (`mcp==2.3.0`) speaks both eras; `era = "2026-07-28"` serves every client on its modern wire,
/// so a legacy client's calls there take bridge B's rounds (`dual_era.rs` has it on `auto`).
async fn both_upstreams() -> sluice::Running {
    let (py2, py1) = tokio::join!(peers::py2(), peers::py1());
    let py = Upstream::new("py", &py2.url).key("era", "2026-07-28");
    let gw = Gateway::bridge_b()
        .upstream_spec(py)
        .upstream("py1", &py1.url)
        .start()
        .await;
    let legacy: Vec<_> = gw
        .gateway
        .catalog
        .upstreams
        .iter()
        .map(|u| {
            (
                u.name.clone(),
                u.status().wire == sluice::upstream::Wire::Legacy,
            )
        })
        .collect();
    assert_eq!(
        legacy,
        [("py".to_owned(), false), ("py1".to_owned(), true)],
        "the upstreams' eras as Sluice sees them"
    );
    gw
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The plan both legacy SDK clients run; `echo` is what their sampling handler answers with
/// (`ECHO1`, `ECHO-TS`), `model` the model it names.
fn plan(url: &str, echo: &str, model: &str, tag: &str) -> Value {
    let e = |p: &str| format!("{echo}[{p}] (model={model})");
    json!({
        "url": url,
        "calls": [
            {"name": "py__echo", "arguments": {"text": "hello"}, "expect": ["hello"]},
            {"name": "py__ask_llm", "arguments": {"prompt": format!("{tag}-llm")}, "expect": [format!("llm said: {}", e(&format!("{tag}-llm")))]},
            {"name": "py__ask_raw", "arguments": {"prompt": format!("{tag}-raw")}, "expect": [format!("raw said: {echo}[{tag}-raw] (state=raw-round-1)")]},
            {"name": "py1__two_rounds", "arguments": {"topic": tag, "tag": format!("{tag}-two")},
             "expect": [format!("first: {}", e(&format!("pick files for {tag}"))),
                        format!("second: {}", e(&format!("summarize {tag} given {}", e(&format!("pick files for {tag}")))))]},
            {"name": "py1__two_rounds_get", "arguments": {"topic": format!("{tag}g")},
             "expect": [format!("first: {}", e(&format!("pick files for {tag}g")))]},
        ],
    })
}

/// The prompts the plan's sampling rounds ask, in order.
fn prompts(echo: &str, model: &str, tag: &str) -> Vec<String> {
    let first = format!("pick files for {tag}");
    let first_g = format!("pick files for {tag}g");
    vec![
        format!("{tag}-llm"),
        format!("{tag}-raw"),
        first.clone(),
        format!("summarize {tag} given {echo}[{first}] (model={model})"),
        first_g.clone(),
        format!("summarize {tag}g given {echo}[{first_g}] (model={model})"),
    ]
}

/// What both SDK clients must have seen: the handshake era end to end, every round a real
/// `sampling/createMessage` with a session-unique id, every call a stream, every answer 202.
fn check_legacy_run(run: &peers::Run, echo: &str, model: &str, tag: &str) {
    let (s, t) = (&run.summary, &run.transcript);
    assert!(
        run.success,
        "the client's checks failed: {:#}\n{t}",
        s["failures"]
    );
    assert_eq!(s["protocol_version"], "2025-11-25", "{t}");
    assert_eq!(s["server_name"], "sluice", "{t}");
    assert_eq!(s["ping"], json!({}), "ping answered exactly {{}}: {t}");
    let tools = strings(&s["tools"]);
    for name in [
        "py__ask_llm",
        "py__ask_raw",
        "py1__two_rounds",
        "py1__two_rounds_get",
    ] {
        assert!(
            tools.contains(&name.to_owned()),
            "{name} missing from tools/list: {tools:?}"
        );
    }
    let asked: Vec<String> = s["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        asked,
        prompts(echo, model, tag),
        "each input_required round reached the sampling handler once, in order: {t}"
    );
    let mut ids: Vec<String> = s["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["request_id"].to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        6,
        "server→client request ids are unique within the session: {t}"
    );
    let http = s["http"].as_array().unwrap();
    let of = |method: Option<&str>| {
        http.iter()
            .filter(|h| h["verb"] == "POST" && h["method"].as_str() == method)
            .collect::<Vec<_>>()
    };
    let calls = of(Some("tools/call"));
    assert_eq!(calls.len(), 5, "{t}");
    for c in calls {
        assert_eq!(
            (
                c["status"].as_u64(),
                c["content_type"]
                    .as_str()
                    .map(|c| c.starts_with("text/event-stream"))
            ),
            (Some(200), Some(true)),
            "{t}"
        );
    }
    let answers = of(None);
    assert_eq!(
        answers.len(),
        6,
        "one POSTed response per sampling round: {t}"
    );
    assert!(
        answers.iter().all(|a| a["status"] == 202),
        "POSTed responses get 202: {t}"
    );
    assert!(
        !http.iter().any(|h| h["method"] == "server/discover"),
        "a 2025-11-25 client never sends server/discover: {t}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_1_30_client_completes_sampling_tools_on_a_2026_server_and_on_a_2025_server() {
    let gw = both_upstreams().await;
    let run = peers::py1_client(&plan(&gw.url(), "ECHO1", "fake-llm-py1", "p1")).await;
    check_legacy_run(&run, "ECHO1", "fake-llm-py1", "p1");
    assert_eq!(
        run.summary["set_level"],
        json!({}),
        "logging/setLevel answered exactly {{}}: {}",
        run.transcript
    );
    assert_eq!(run.summary["session_id_issued"], true, "{}", run.transcript);
    // The bridge A round trip behind bridge B ran to its end on the 1.30 server.
    assert_eq!(peers::py1().await.events("p1-two"), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_1_32_client_completes_sampling_tools_on_a_2026_server_and_on_a_2025_server()
{
    let gw = both_upstreams().await;
    let run = peers::ts1_client(&plan(&gw.url(), "ECHO-TS", "fake-llm-ts1", "t1")).await;
    check_legacy_run(&run, "ECHO-TS", "fake-llm-ts1", "t1");
    let t = &run.transcript;
    assert_eq!(run.summary["session_id_visible_ascii"], true, "{t}");
    assert!(
        run.summary["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["result_type"].is_null()),
        "no resultType reached the client: {t}"
    );
    // The client ended its session with DELETE (2xx); the id is gone.
    let deletes: Vec<_> = run.summary["http"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["verb"] == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "{t}");
    assert!(
        deletes[0]["status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s)),
        "{t}"
    );
    assert!(
        gw.gateway.rt.legacy_sessions.is_empty(),
        "the deleted session is gone"
    );
    assert_eq!(peers::py1().await.events("t1-two"), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_2_3_client_in_auto_mode_ends_up_on_2026_07_28_through_sluice() {
    let gw = both_upstreams().await;
    let plan = json!({
        "url": gw.url(),
        "calls": [
            {"name": "py__ask_llm", "arguments": {"prompt": "auto-llm"}, "expect": ["llm said: ECHO2[auto-llm] (model=fake-llm-auto)"]},
            {"name": "py1__two_rounds", "arguments": {"topic": "auto"}, "expect": ["second: ECHO2[summarize auto given ECHO2[pick files for auto] (model=fake-llm-auto)]"]},
        ],
    });
    let run = peers::py2_auto_client(&plan).await;
    let (s, t) = (&run.summary, &run.transcript);
    assert!(
        run.success,
        "the auto client's checks failed: {:#}\n{t}",
        s["failures"]
    );
    assert_eq!(s["protocol_version"], "2026-07-28", "{t}");
    let http = s["http"].as_array().unwrap();
    assert_eq!(
        http[0]["method"], "server/discover",
        "auto probes server/discover first: {t}"
    );
    assert_eq!(http[0]["status"], 200, "{t}");
    assert!(
        !http
            .iter()
            .any(|h| h["method"] == "initialize" || h["verb"] != "POST"),
        "no fallback to the handshake: {t}"
    );
    assert_eq!(strings(&s["sampled"]).len(), 3, "{t}");
    assert!(
        gw.gateway.rt.legacy_sessions.is_empty(),
        "Sluice was modern for it: no legacy session"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_wire_the_round_is_a_request_on_the_posts_stream_and_the_result_follows_on_it() {
    let py = Upstream::new("py", &peers::py2().await.url).key("era", "2026-07-28");
    let gw = Gateway::bridge_b().upstream_spec(py).start().await;
    let mut c = Legacy::new(&gw.url());
    c.initialize(json!({"sampling": {}})).await;
    let mut sse = c
        .stream(
            41,
            "tools/call",
            json!({"name": "py__ask_raw", "arguments": {"prompt": "wire-q"}}),
        )
        .await;
    assert_eq!(sse.status, 200);
    assert!(
        sse.content_type.starts_with("text/event-stream"),
        "{}",
        sse.content_type
    );
    // SEP-1699: a priming event (an id, empty data) before anything else.
    let priming = sse.next().await.expect("a priming event");
    assert!(
        priming.id.is_some() && priming.data.is_empty(),
        "the first event primes the stream: {priming:?}"
    );
    let ask = sse.next_message().await;
    assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
    assert!(
        ask["id"].is_string() || ask["id"].is_number(),
        "a request: {ask}"
    );
    assert_eq!(
        ask["params"]["messages"][0]["content"]["text"], "wire-q",
        "{ask}"
    );
    assert_eq!(ask["params"]["maxTokens"], 32, "{ask}");
    assert!(!has_result_type(&ask), "{ask}");
    // The client's answer is POSTed on its own; it gets 202 and no body.
    let answer = c
        .post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": sample("by-wire")}))
        .await;
    assert_eq!(answer.status(), 202);
    assert_eq!(answer.text().await.unwrap(), "");
    // The tool result arrives on the same stream, under the client's id, without modern stamping.
    let done = sse.next_message().await;
    assert_eq!(done["id"], 41, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "raw said: by-wire (state=raw-round-1)",
        "{done}"
    );
    assert!(
        !has_result_type(&done),
        "no resultType for a legacy client: {done}"
    );
    assert!(
        done["result"]["_meta"]
            .get("io.modelcontextprotocol/serverInfo")
            .is_none(),
        "{done}"
    );
    sse.ends_within(std::time::Duration::from_secs(2))
        .await
        .expect("the stream ends after the result");
    gw.stop().await;
}
