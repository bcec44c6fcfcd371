//! Official SDK clients in 2026-07-28 mode complete tools of legacy servers that ask mid-call,
//! each ask surfacing as an `input_required` round their own callbacks answer.

use serde_json::{json, Value};

use super::gateway;
use crate::support::peers::{self, Run};
use crate::support::rmcp_client;

/// The methods the Python client's callbacks served for call `i` of its plan, in order.
fn asked(summary: &Value, i: usize) -> Vec<String> {
    summary["calls"][i]["asked"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["method"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_completes_two_round_sampling_on_post_and_get_streams_elicitation_and_roots_on_mcp_1_30(
) {
    let py1 = peers::py1().await;
    let gw = gateway::start(&[("py1", &py1.url)], gateway::Bridge::default()).await;
    let plan = json!({
        "url": gw.url(),
        "callbacks": ["sampling", "elicitation", "roots"],
        "calls": [
            {"name": "two_rounds", "arguments": {"topic": "alpha", "tag": "sdk-py-post"}, "expect": [
                "first: ECHO[pick files for alpha] (model=fake-llm-py2)",
                "second: ECHO[summarize alpha given ECHO[pick files for alpha] (model=fake-llm-py2)] (model=fake-llm-py2)",
            ]},
            {"name": "two_rounds_get", "arguments": {"topic": "beta", "tag": "sdk-py-get"}, "expect": [
                "first: ECHO[pick files for beta] (model=fake-llm-py2)",
                "second: ECHO[summarize beta given ECHO[pick files for beta] (model=fake-llm-py2)] (model=fake-llm-py2)",
            ]},
            {"name": "elicit", "arguments": {"question": "ship it?", "tag": "sdk-py-elicit"}, "expect": ["elicit[ship it?]: accept yes-from-py2"]},
            {"name": "roots", "arguments": {"tag": "sdk-py-roots"}, "expect": ["roots: alpha=file:///work/alpha, beta=file:///work/beta"]},
        ],
    });
    let Run {
        status,
        summary,
        transcript,
        ..
    } = peers::py2_bridge_client(&plan).await;
    assert!(
        status.success(),
        "the Python client's checks failed: {:#}\n{transcript}",
        summary["failures"]
    );
    assert_eq!(summary["protocol_version"], "2026-07-28", "{transcript}");
    // Each ask reached the client's callbacks once, one round each (two rounds for the two samplings).
    let sampling = "sampling/createMessage";
    assert_eq!(asked(&summary, 0), [sampling, sampling], "{transcript}");
    assert_eq!(asked(&summary, 1), [sampling, sampling], "{transcript}");
    assert_eq!(asked(&summary, 2), ["elicitation/create"], "{transcript}");
    assert_eq!(asked(&summary, 3), ["roots/list"], "{transcript}");
    for tag in ["sdk-py-post", "sdk-py-get", "sdk-py-elicit", "sdk-py-roots"] {
        assert_eq!(
            py1.events(tag),
            ["start", "done"],
            "upstream events for {tag}"
        );
    }
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        0,
        "nothing stays parked after complete calls"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_completes_two_round_sampling_on_post_and_get_streams_elicitation_and_roots_on_mcp_1_30(
) {
    let py1 = peers::py1().await;
    let gw = gateway::start(&[("py1", &py1.url)], gateway::Bridge::default()).await;
    let asked = rmcp_client::Asked::default();
    let client = rmcp_client::connect(&gw.url(), asked.clone(), true).await;
    let info = client.peer().peer_info().expect("discover result");
    assert_eq!(
        info.protocol_version,
        rmcp::model::ProtocolVersion::V_2026_07_28
    );

    let first = "ECHO-RS[pick files for gamma] (model=fake-llm-rs)";
    let expect_two = |tool: &str| {
        format!("{tool}[gamma] first: {first} | second: ECHO-RS[summarize gamma given {first}] (model=fake-llm-rs)")
    };
    for (tool, args, expect, want_asked) in [
        (
            "two_rounds",
            json!({"topic": "gamma", "tag": "sdk-rs-post"}),
            expect_two("two_rounds"),
            vec![
                "sampling: pick files for gamma".to_owned(),
                format!("sampling: summarize gamma given {first}"),
            ],
        ),
        (
            "two_rounds_get",
            json!({"topic": "gamma", "tag": "sdk-rs-get"}),
            expect_two("two_rounds_get"),
            vec![
                "sampling: pick files for gamma".to_owned(),
                format!("sampling: summarize gamma given {first}"),
            ],
        ),
        (
            "elicit",
            json!({"question": "merge?", "tag": "sdk-rs-elicit"}),
            "elicit[merge?]: accept yes-from-rust".to_owned(),
            vec!["elicitation: merge?".to_owned()],
        ),
        (
            "roots",
            json!({"tag": "sdk-rs-roots"}),
            "roots: rs=file:///work/rs-root".to_owned(),
            vec!["roots".to_owned()],
        ),
    ] {
        let (text, is_error) = rmcp_client::call(&client, tool, args).await;
        assert!(
            !is_error && text == expect,
            "{tool} answered {text:?} (isError {is_error}); expected {expect:?}"
        );
        assert_eq!(
            asked.take(),
            want_asked,
            "what {tool} asked the rmcp client"
        );
    }
    for tag in ["sdk-rs-post", "sdk-rs-get", "sdk-rs-elicit", "sdk-rs-roots"] {
        assert_eq!(
            py1.events(tag),
            ["start", "done"],
            "upstream events for {tag}"
        );
    }
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        0,
        "nothing stays parked after complete calls"
    );
    let _ = client.cancel().await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_complete_server_everything_sampling_and_elicitation_tools() {
    let everything = peers::everything().await;
    let gw = gateway::start(
        &[("everything", &everything.url)],
        gateway::Bridge::default(),
    )
    .await;
    // server-everything registers these tools only for sessions whose initialize declared the
    // capability: Sluice declares what each request declares, so both clients declare sampling
    // and elicitation (and not roots: server-everything would ask for roots on its own 350 ms
    // after initialize, outside any call).
    let plan = json!({
        "url": gw.url(),
        "callbacks": ["sampling", "elicitation"],
        "calls": [
            {"name": "trigger-sampling-request", "arguments": {"prompt": "everything-q", "maxTokens": 20}, "expect": [
                "LLM sampling result:", "ECHO[Resource trigger-sampling-request context: everything-q]", "fake-llm-py2",
            ]},
            {"name": "trigger-elicitation-request", "arguments": {}, "expect": [
                "User provided the requested information", "- Name: Py Two", "yes-from-py2",
            ]},
        ],
    });
    let Run {
        status,
        summary,
        transcript,
        ..
    } = peers::py2_bridge_client(&plan).await;
    assert!(
        status.success(),
        "the Python client's checks failed: {:#}\n{transcript}",
        summary["failures"]
    );
    assert_eq!(
        asked(&summary, 0),
        ["sampling/createMessage"],
        "{transcript}"
    );
    assert_eq!(asked(&summary, 1), ["elicitation/create"], "{transcript}");

    // The rmcp client through the same Sluice: a sampling and an elicitation round too.
    let asked = rmcp_client::Asked::default();
    let client = rmcp_client::connect(&gw.url(), asked.clone(), false).await;
    let (text, is_error) = rmcp_client::call(
        &client,
        "trigger-sampling-request",
        json!({"prompt": "rs-q", "maxTokens": 20}),
    )
    .await;
    assert!(
        !is_error && text.contains("ECHO-RS[Resource trigger-sampling-request context: rs-q]"),
        "{text}"
    );
    let (text, is_error) =
        rmcp_client::call(&client, "trigger-elicitation-request", json!({})).await;
    assert!(!is_error && text.contains("yes-from-rust"), "{text}");
    assert_eq!(
        asked.take(),
        [
            "sampling: Resource trigger-sampling-request context: rs-q",
            "elicitation: Please provide inputs for the following fields:"
        ]
    );
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        0,
        "nothing stays parked after complete calls"
    );
    let _ = client.cancel().await;
    gw.stop().await;
}
