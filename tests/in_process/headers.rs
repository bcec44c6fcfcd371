//! Issue 2 item 3, validation order (digest §1.3): `_meta` (-32602) before the mirrored headers
//! (-32020), then the version (-32022), then the method (-32601/404); and every rule of the
//! mirrored headers (digest §5.2).

use serde_json::{json, Value};

use super::prelude::*;

fn call(name: &str, args: Value) -> Req {
    Req::new("tools/call").params(json!({"name": name, "arguments": args}))
}

// ---- _meta (-32602) comes first -------------------------------------------------------------

#[tokio::test]
async fn missing_meta_is_400_invalid_params_before_any_header_check() {
    let (_demo, s) = one_demo("h-meta").await;
    // No mirrored header at all, and a body without _meta: the envelope is reported, not the headers.
    let r = Req::new("tools/call")
        .params(json!({"name": "echo"}))
        .no_meta()
        .without("mcp-protocol-version")
        .without("mcp-method")
        .without("mcp-name");
    r.send(&s.url()).await.error(400, -32602, &json!(1));
    // No params at all.
    let r = Req::new("server/discover")
        .raw_body(r#"{"jsonrpc":"2.0","id":"np","method":"server/discover"}"#)
        .send(&s.url())
        .await;
    r.error(400, -32602, &json!("np"));
}

#[tokio::test]
async fn missing_or_mistyped_protocol_version_in_meta_is_400_invalid_params() {
    let (_demo, s) = one_demo("h-meta-pv").await;
    let key = "io.modelcontextprotocol/protocolVersion";
    let mut m = meta();
    m.as_object_mut().unwrap().remove(key);
    Req::new("server/discover")
        .meta(m)
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
    for bad in [json!(20260728), Value::Null, json!(["2026-07-28"])] {
        Req::new("server/discover")
            .meta_member(key, bad)
            .send(&s.url())
            .await
            .error(400, -32602, &json!(1));
    }
    // A _meta that is not an object.
    Req::new("server/discover")
        .meta(json!("2026-07-28"))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn missing_or_mistyped_client_capabilities_in_meta_is_400_invalid_params() {
    let (_demo, s) = one_demo("h-meta-cc").await;
    let key = "io.modelcontextprotocol/clientCapabilities";
    let mut m = meta();
    m.as_object_mut().unwrap().remove(key);
    Req::new("tools/list")
        .meta(m)
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
    for bad in [json!([]), json!("none"), Value::Null, json!(true)] {
        Req::new("tools/list")
            .meta_member(key, bad)
            .send(&s.url())
            .await
            .error(400, -32602, &json!(1));
    }
}

#[tokio::test]
async fn client_info_is_optional() {
    let (_demo, s) = one_demo("h-meta-ci").await;
    let mut m = meta();
    m.as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    Req::new("tools/list")
        .meta(m)
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test]
async fn unknown_log_level_is_400_invalid_params() {
    let (_demo, s) = one_demo("h-loglevel").await;
    let r = Req::new("tools/list")
        .meta_member("io.modelcontextprotocol/logLevel", json!("verbose"))
        .send(&s.url())
        .await;
    r.error(400, -32602, &json!(1));
}

// ---- MCP-Protocol-Version / Mcp-Method / Mcp-Name (-32020) ----------------------------------

#[tokio::test]
async fn missing_protocol_version_header_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-pv-missing").await;
    Req::new("tools/list")
        .without("mcp-protocol-version")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn protocol_version_header_differing_from_meta_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-pv-diff").await;
    for v in [
        "2025-11-25",
        "2026-07-29",
        " 2026-07-28x",
        "2026-07-28, 2026-07-28",
    ] {
        Req::new("tools/list")
            .header("mcp-protocol-version", v)
            .send(&s.url())
            .await
            .error(400, -32020, &json!(1));
    }
}

#[tokio::test]
async fn missing_mcp_method_header_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-method-missing").await;
    Req::new("server/discover")
        .without("mcp-method")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn mcp_method_header_body_mismatch_is_400_with_jsonrpc_id() {
    let (_demo, s) = one_demo("h-method-diff").await;
    Req::new("tools/list")
        .id(json!("m"))
        .header("mcp-method", "prompts/list")
        .send(&s.url())
        .await
        .error(400, -32020, &json!("m"));
}

#[tokio::test]
async fn mcp_method_value_is_case_sensitive() {
    let (_demo, s) = one_demo("h-method-case").await;
    Req::new("tools/list")
        .header("mcp-method", "TOOLS/LIST")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    Req::new("tools/list")
        .header("mcp-method", "Tools/List")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn header_names_are_case_insensitive() {
    let (_demo, s) = one_demo("h-names").await;
    let body = call("locate", json!({"region": "eu"}))
        .body_json()
        .to_string();
    let head = vec![
        format!("HOST: {}", s.addr),
        "CONTENT-TYPE: application/json".to_owned(),
        "aCCEPT: application/json, text/event-stream".to_owned(),
        format!("mcp-PROTOCOL-version: {V}"),
        "MCP-METHOD: tools/call".to_owned(),
        "mcp-name: locate".to_owned(),
        "MCP-PARAM-REGION: eu".to_owned(),
    ];
    let r = raw_post(s.addr, "/mcp", &head, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["result"]["content"][0]["text"], "region=eu");
}

#[tokio::test]
async fn mcp_name_is_required_for_tools_call_prompts_get_and_resources_read() {
    let (_demo, s) = one_demo("h-name-missing").await;
    call("echo", json!({"text": "x"}))
        .without("mcp-name")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    let get = Req::new("prompts/get").params(json!({"name": "greet", "arguments": {"who": "x"}}));
    get.without("mcp-name")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    let read = Req::new("resources/read").params(json!({"uri": "demo://h-name-missing/readme"}));
    read.without("mcp-name")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    // Not required elsewhere.
    Req::new("tools/list")
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test]
async fn mcp_name_header_body_mismatch_is_400_with_jsonrpc_id() {
    let (_demo, s) = one_demo("h-name-diff").await;
    let id = json!("name-1");
    call("echo", json!({"text": "x"}))
        .id(id.clone())
        .header("mcp-name", "add")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
    let read = Req::new("resources/read")
        .id(id.clone())
        .params(json!({"uri": "demo://h-name-diff/readme"}));
    read.header("mcp-name", "demo://h-name-diff/items/1")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
    let get = Req::new("prompts/get")
        .id(id.clone())
        .params(json!({"name": "greet"}));
    get.header("mcp-name", "greeting")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
}

#[tokio::test]
async fn mcp_name_value_is_case_sensitive() {
    let (_demo, s) = one_demo("h-name-case").await;
    call("echo", json!({"text": "x"}))
        .header("mcp-name", "ECHO")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn mcp_name_sent_twice_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-name-twice").await;
    let req = call("echo", json!({"text": "x"})).body_json().to_string();
    let head = vec![
        format!("Host: {}", s.addr),
        "Content-Type: application/json".to_owned(),
        "Accept: application/json, text/event-stream".to_owned(),
        format!("MCP-Protocol-Version: {V}"),
        "Mcp-Method: tools/call".to_owned(),
        "Mcp-Name: echo".to_owned(),
        "Mcp-Name: echo".to_owned(),
    ];
    let r = raw_post(s.addr, "/mcp", &head, &req).await;
    assert_eq!(r.status, 400);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -32020);
}

#[tokio::test]
async fn surrounding_whitespace_in_header_values_is_trimmed() {
    let (_demo, s) = one_demo("h-ows").await;
    let body = call("locate", json!({"region": "eu"}))
        .body_json()
        .to_string();
    let head = vec![
        format!("Host: {}", s.addr),
        "Content-Type: application/json".to_owned(),
        "Accept: application/json, text/event-stream".to_owned(),
        format!("MCP-Protocol-Version: \t {V} \t"),
        "Mcp-Method:    tools/call   ".to_owned(),
        "Mcp-Name: \t locate \t ".to_owned(),
        "Mcp-Param-Region:  eu  ".to_owned(),
    ];
    let r = raw_post(s.addr, "/mcp", &head, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Through reqwest as well (whitespace kept in the value bytes).
    let r = call("echo", json!({"text": "x"}))
        .header("mcp-name", "  echo\t")
        .send(&s.url())
        .await;
    r.result(&json!(1));
}

#[tokio::test]
async fn base64_sentinel_values_are_decoded_before_comparing() {
    let (_demo, s) = one_demo("h-b64").await;
    // "echo" in Base64.
    call("echo", json!({"text": "x"}))
        .header("mcp-name", "=?base64?ZWNobw==?=")
        .send(&s.url())
        .await
        .result(&json!(1));
    // A non-ASCII URI must be sent encoded and matches once decoded.
    let uri = "demo://h-b64/items/café-世界";
    let read = Req::new("resources/read")
        .params(json!({"uri": uri}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(read["contents"][0]["uri"], uri);
    // Surrounding whitespace around an encoded value is trimmed too.
    call("echo", json!({"text": "x"}))
        .header("mcp-name", " =?base64?ZWNobw==?= ")
        .send(&s.url())
        .await
        .result(&json!(1));
    // Decoded, it must still equal the body.
    call("echo", json!({"text": "x"}))
        .header("mcp-name", "=?base64?YWRk?=")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn bad_base64_padding_or_alphabet_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-b64-bad").await;
    for bad in [
        "=?base64?ZWNobw?=",    // padding missing
        "=?base64?ZWNobw=?=",   // padding short
        "=?base64?ZWNobw===?=", // padding long
        "=?base64?ZW*obw==?=",  // outside the alphabet
        "=?base64?ZW-obw==?=",  // URL-safe alphabet
        "=?base64?ZWNo bw==?=", // inner space
        "=?base64?//79?=",      // valid Base64, not UTF-8
    ] {
        let r = call("echo", json!({"text": "x"}))
            .header("mcp-name", bad)
            .send(&s.url())
            .await;
        r.error(400, -32020, &json!(1));
    }
}

#[tokio::test]
async fn a_value_without_both_sentinel_ends_is_taken_literally() {
    let (_demo, s) = one_demo("h-b64-literal").await;
    // Only the start marker: not decoded, so it differs from "echo".
    call("echo", json!({"text": "x"}))
        .header("mcp-name", "=?base64?ZWNobw==")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    call("echo", json!({"text": "x"}))
        .header("mcp-name", "ZWNobw==?=")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    // And it equals a body holding exactly that text (the one upstream answers for the name).
    let name = "=?base64?ZWNobw==";
    let r = call(name, json!({}))
        .header("mcp-name", name)
        .send(&s.url())
        .await;
    let result = r.result(&json!(1));
    assert_eq!(
        result["isError"], true,
        "the demo upstream answered for the unknown name: {result}"
    );
}

#[tokio::test]
async fn raw_non_ascii_header_value_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-nonascii").await;
    let r = Req::new("resources/read").params(json!({"uri": "demo://h-nonascii/items/é"}));
    r.header_bytes("mcp-name", "demo://h-nonascii/items/é".as_bytes())
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

// ---- Mcp-Param-* against x-mcp-header --------------------------------------------------------

#[tokio::test]
async fn missing_mcp_param_header_for_a_present_argument_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-param-missing").await;
    call("locate", json!({"region": "eu"}))
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn mcp_param_header_differing_from_the_argument_is_400_header_mismatch() {
    let (_demo, s) = one_demo("h-param-diff").await;
    let id = json!("p");
    call("locate", json!({"region": "eu"}))
        .id(id.clone())
        .header("mcp-param-region", "us")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
    call("locate", json!({"region": "eu"}))
        .id(id.clone())
        .header("mcp-param-region", "EU")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
    // A header for an absent argument disagrees with the body too.
    call("locate", json!({}))
        .id(id.clone())
        .header("mcp-param-region", "eu")
        .send(&s.url())
        .await
        .error(400, -32020, &id);
}

#[tokio::test]
async fn mcp_param_header_matching_the_argument_is_served_plain_or_encoded() {
    let (_demo, s) = one_demo("h-param-ok").await;
    let r = call("locate", json!({"region": "eu"}))
        .header("Mcp-Param-Region", "eu")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["content"][0]["text"], "region=eu");
    let r = call("locate", json!({"region": "Zürich"}))
        .header("mcp-param-region", &sluice::mcp::headers::encode("Zürich"))
        .send(&s.url())
        .await;
    assert_eq!(r.result(&json!(1))["content"][0]["text"], "region=Zürich");
    // Absent or null argument: no header expected.
    call("locate", json!({}))
        .send(&s.url())
        .await
        .result(&json!(1));
    call("locate", json!({"region": null}))
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test]
async fn mcp_param_integers_and_booleans_compare_by_value() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer", "x-mcp-header": "N"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "deep": {"type": "object", "properties": {"id": {"type": "string", "x-mcp-header": "Deep-Id"}}}}});
    let mock = Spec::new("typed")
        .tools(vec![
            json!({"name": "typed", "inputSchema": schema}).to_string()
        ])
        .start()
        .await;
    let s = Gateway::e2e().upstream("typed", &mock.url()).start().await;
    let ok_call = call(
        "typed",
        json!({"n": 42.0, "flag": false, "deep": {"id": "x"}}),
    )
    .header("mcp-param-n", "42")
    .header("mcp-param-flag", "false")
    .header("mcp-param-deep-id", "x");
    ok_call.send(&s.url()).await.result(&json!(1));
    let wrong = call(
        "typed",
        json!({"n": 42, "flag": false, "deep": {"id": "x"}}),
    )
    .header("mcp-param-n", "43")
    .header("mcp-param-flag", "false");
    wrong
        .header("mcp-param-deep-id", "x")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    let nested_missing = call("typed", json!({"deep": {"id": "x"}}));
    nested_missing
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    let bool_case = call("typed", json!({"flag": true})).header("mcp-param-flag", "True");
    bool_case.send(&s.url()).await.error(400, -32020, &json!(1));
}

// ---- version (-32022), then method (-32601/404) ---------------------------------------------

#[tokio::test]
async fn unsupported_version_is_400_with_supported_equal_to_discover_and_requested_echoed() {
    let (_demo, s) = one_demo("h-version").await;
    let supported = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1))["supportedVersions"]
        .clone();
    assert_eq!(supported, json!([V]));
    for v in ["2025-11-25", "1900-01-01", "2026-07-28-draft"] {
        let r = Req::new("server/discover")
            .id(json!(v))
            .meta_member("io.modelcontextprotocol/protocolVersion", json!(v))
            .header("mcp-protocol-version", v);
        let e = r.send(&s.url()).await.error(400, -32022, &json!(v));
        assert_eq!(e["data"]["supported"], supported);
        assert_eq!(e["data"]["requested"], v);
    }
}

#[tokio::test]
async fn header_mismatch_is_reported_before_an_unsupported_version() {
    let (_demo, s) = one_demo("h-order-version").await;
    let r = Req::new("tools/list").meta_member(
        "io.modelcontextprotocol/protocolVersion",
        json!("1900-01-01"),
    );
    r.send(&s.url()).await.error(400, -32020, &json!(1));
    // Mcp-Param-* too: a missing header for a present argument wins over the version.
    let r = call("locate", json!({"region": "eu"})).meta_member(
        "io.modelcontextprotocol/protocolVersion",
        json!("1900-01-01"),
    );
    r.header("mcp-protocol-version", "1900-01-01")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404_method_not_found() {
    let (_demo, s) = one_demo("h-404").await;
    for m in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
        "tasks/get",
        "sampling/createMessage",
    ] {
        let id = json!(format!("id-{m}"));
        let params = if m == "initialize" {
            json!({"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}})
        } else {
            json!({"uri": "demo://h-404/readme", "level": "info"})
        };
        Req::new(m)
            .id(id.clone())
            .params(params)
            .send(&s.url())
            .await
            .error(404, -32601, &id);
    }
}

#[tokio::test]
async fn unsupported_version_is_reported_before_a_removed_method() {
    let (_demo, s) = one_demo("h-order-method").await;
    let r = Req::new("initialize")
        .meta_member(
            "io.modelcontextprotocol/protocolVersion",
            json!("2025-11-25"),
        )
        .header("mcp-protocol-version", "2025-11-25");
    r.send(&s.url()).await.error(400, -32022, &json!(1));
    // And _meta before everything, even for a removed method.
    Req::new("ping")
        .no_meta()
        .without("mcp-method")
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn unknown_tool_errors_wait_for_header_version_and_method_checks() {
    let a = Spec::new("ua").start().await;
    let b = Spec::new("ub").start().await;
    let s = Gateway::e2e()
        .upstream("ua", &a.url())
        .upstream("ub", &b.url())
        .start()
        .await;
    // Header mismatch first.
    call("ua__nope", json!({}))
        .header("mcp-method", "tools/list")
        .send(&s.url())
        .await
        .error(400, -32020, &json!(1));
    // Then version.
    let old = call("ua__nope", json!({})).meta_member(
        "io.modelcontextprotocol/protocolVersion",
        json!("2025-11-25"),
    );
    old.header("mcp-protocol-version", "2025-11-25")
        .send(&s.url())
        .await
        .error(400, -32022, &json!(1));
    // Then the unknown name itself.
    call("ua__nope", json!({}))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}
