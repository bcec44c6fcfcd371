//! The walkthrough's front-door steps: discovery, federation of the three upstreams' tools,
//! routing a prefixed call, and what the modern wire refuses.
//!
//! Takes the client and the steps so far; gives one checked step per fact. Refuses nothing.

use serde_json::{json, Value};

use super::client::{headers, request, Answer, Client};
use super::Steps;
use sluice_mcp::method::Method;

/// `server/discover` is answered by Sluice itself, from its upstreams.
pub(super) async fn discover(c: &Client, s: &mut Steps) {
    let a = c.send(1, &Method::ServerDiscover, json!({})).await;
    let r = &a.body["result"];
    s.check(
        "server/discover is answered by Sluice from its upstreams: complete, with ttlMs and cacheScope",
        a.status == 200
            && r["resultType"] == "complete"
            && r["supportedVersions"] == json!(["2026-07-28"])
            && r["ttlMs"].is_u64()
            && r["cacheScope"].is_string()
            && r["capabilities"]["tools"].is_object(),
        format!(
            "HTTP {} resultType={} supportedVersions={} capabilities={} ttlMs={} cacheScope={}",
            a.status, r["resultType"], r["supportedVersions"], r["capabilities"], r["ttlMs"], r["cacheScope"]
        ),
    );
}

/// `tools/list`, twice: the three upstreams' tools, prefixed, in the same order both times.
/// Gives the second list.
pub(super) async fn federation(c: &Client, s: &mut Steps) -> Answer {
    let a = c.send(2, &Method::ToolsList, json!({})).await;
    let names = a.tool_names();
    let b = c.send(3, &Method::ToolsList, json!({})).await;
    let again = b.tool_names();
    s.check(
        "tools/list federates the three upstreams with prefixed names, in a stable order",
        names.contains(&"alpha__add".to_owned())
            && names.contains(&"beta__echo".to_owned())
            && names.contains(&"repo__summarize_repo".to_owned())
            && names == again
            && a.body["result"]["resultType"] == "complete",
        format!("{names:?}"),
    );
    b
}

/// The legacy upstream's tool in the `list` answer, as a modern list result.
pub(super) fn legacy_listing(list: &Answer, s: &mut Steps) {
    let tool = list.tool("repo__summarize_repo");
    let r = &list.body["result"];
    s.check(
        "the legacy (2025-11-25) upstream's tool is listed as repo__summarize_repo, in a list result with resultType, ttlMs and cacheScope",
        tool.is_some_and(|t| t.pointer("/inputSchema/properties/audience").is_some())
            && r["resultType"] == "complete"
            && r["ttlMs"].is_u64()
            && r["cacheScope"].is_string(),
        format!(
            "descriptor={} resultType={} ttlMs={} cacheScope={}",
            tool.map_or(Value::Null, |t| json!({"name": t["name"], "inputSchema": t["inputSchema"]})),
            r["resultType"],
            r["ttlMs"],
            r["cacheScope"]
        ),
    );
}

/// A prefixed `tools/call` reaches its upstream under the tool's own name.
pub(super) async fn routing(c: &Client, s: &mut Steps) {
    let a = c
        .call(
            4,
            "alpha__add",
            json!({"a": 2, "b": 3}),
            json!({"elicitation": {}}),
            json!({}),
        )
        .await;
    s.check(
        "tools/call alpha__add is routed to alpha as `add`",
        a.status == 200
            && a.body.pointer("/result/content/0/text") == Some(&json!("5"))
            && a.body["result"]["resultType"] == "complete",
        format!("HTTP {} result={}", a.status, a.body["result"]["content"]),
    );
}

/// What the modern wire refuses: no `_meta`, a header that disagrees with the body, an
/// unsupported version, a handshake-era method.
pub(super) async fn refusals(c: &Client, s: &mut Steps) {
    let list = Method::ToolsList;
    let a = c
        .post(
            &headers(&list),
            &json!({"jsonrpc": "2.0", "id": 5, "method": list.as_str(), "params": {}}),
        )
        .await;
    s.check(
        "a request without _meta gets -32602 and HTTP 400",
        a.status == 400 && a.error_code() == Some(-32602) && a.body["id"] == 5,
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let call = Method::ToolsCall;
    let mut hh = headers(&call);
    hh.push(("mcp-name", "beta__add"));
    let a = c
        .post(
            &hh,
            &request(
                6,
                &call,
                json!({"name": "alpha__add", "arguments": {"a": 1, "b": 1}}),
            ),
        )
        .await;
    s.check(
        "an Mcp-Name header that disagrees with the body gets -32020 and HTTP 400",
        a.status == 400 && a.error_code() == Some(-32020),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let mut body = request(7, &list, json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "1900-01-01".into();
    let a = c
        .post(
            &[
                ("mcp-protocol-version", "1900-01-01"),
                ("mcp-method", list.as_str()),
            ],
            &body,
        )
        .await;
    s.check(
        "an unsupported version gets -32022 with exactly data {supported, requested}, HTTP 400",
        a.status == 400
            && a.error_code() == Some(-32022)
            && a.body["id"] == 7
            && a.body.pointer("/error/data")
                == Some(&json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let a = c.send(8, &Method::Initialize, json!({})).await;
    s.check(
        "initialize on the modern wire gets -32601 and HTTP 404",
        a.status == 404 && a.error_code() == Some(-32601),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );
}

/// A notification is accepted with no JSON-RPC answer.
pub(super) async fn notification(c: &Client, s: &mut Steps) {
    let initialized = Method::Initialized;
    let note = json!({"jsonrpc": "2.0", "method": initialized.as_str()});
    let a = c.post(&headers(&initialized), &note).await;
    s.check(
        "a notification gets 202 and no JSON-RPC answer (an empty body)",
        a.status == 202 && a.len == 0,
        format!("HTTP {}, {} body bytes", a.status, a.len),
    );
}
