use super::*;

#[test]
fn results_without_result_type_or_hints_are_stamped() {
    let out = stamp_result(
        r#"{"tools":[],"_meta":{"x":1}}"#,
        "tools/list",
        r#"{"name":"sluice"}"#,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["resultType"], "complete");
    assert_eq!(v["ttlMs"], 0);
    assert_eq!(v["cacheScope"], "private");
    assert_eq!(v["_meta"]["x"], 1);
    assert_eq!(
        v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "sluice"
    );
}

#[test]
fn stamping_keeps_member_order_and_bytes_and_replaces_server_info() {
    let raw = "{ \"content\": [ {\"type\":\"text\", \"text\": \"a  b\"} ],\n \"_meta\": {\"io.modelcontextprotocol/serverInfo\": {\"name\":\"up\"}, \"k\": 1.50},\n \"ttlMs\": -1, \"x\\u0041\": 2 }";
    let out = stamp_result(raw, "resources/read", r#"{"name":"sluice"}"#).unwrap();
    assert_eq!(
        out,
        r#"{"content":[{"type":"text","text":"a  b"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sluice"},"k":1.50},"xA":2,"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
    );
    assert_eq!(stamp_result("[1]", "tools/call", "{}"), None);
    let twice = stamp_result(
        r#"{"resultType":"input_required","a":1,"resultType":"complete"}"#,
        "tools/call",
        "{}",
    )
    .unwrap();
    assert_eq!(
        twice,
        r#"{"resultType":"complete","a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{}}}"#
    );
    let odd_meta = stamp_result(r#"{"_meta":7}"#, "tools/call", "{}").unwrap();
    assert_eq!(
        odd_meta,
        r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"resultType":"complete"}"#
    );
}

#[test]
fn finish_wraps_the_stamped_result_in_the_client_id() {
    let (s, b) = finish(
        "\"c1\"",
        &Method::ToolsCall,
        "u",
        StatusCode::OK,
        r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#,
        None,
        "{}",
    );
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        std::str::from_utf8(&b).unwrap(),
        r#"{"jsonrpc":"2.0","id":"c1","result":{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#
    );
    let (s, _) = finish(
        "1",
        &Method::ToolsCall,
        "u",
        StatusCode::OK,
        "not json",
        None,
        "{}",
    );
    assert_eq!(s, StatusCode::BAD_GATEWAY);
}

#[test]
fn result_types_are_decoded_and_only_complete_passes_where_no_round_may_come() {
    let kind = |r: &str| result_kind(&members(r).unwrap());
    assert_eq!(kind("{}"), ResultKind::Complete);
    assert_eq!(
        kind(r#"{"resultType":"compl\u0065te"}"#),
        ResultKind::Complete
    );
    assert_eq!(
        kind(r#"{"resultType":"input\u005frequired"}"#),
        ResultKind::InputRequired
    );
    assert_eq!(
        kind(r#"{"result\u0054ype":"input_required"}"#),
        ResultKind::InputRequired
    );
    assert_eq!(
        kind(r#"{"resultType":"complete","resultType":"input_required"}"#),
        ResultKind::InputRequired
    );
    for other in [
        r#"{"resultType":"task"}"#,
        r#"{"resultType":"Input_Required"}"#,
        r#"{"resultType":""}"#,
        r#"{"resultType":1}"#,
    ] {
        assert_eq!(kind(other), ResultKind::Other, "{other}");
    }
    for msg in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input\u005frequired","inputRequests":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task"}}"#,
    ] {
        let (s, b) = finish(
            "1",
            &Method::ToolsCall,
            "u",
            StatusCode::OK,
            msg,
            None,
            "{}",
        );
        assert_eq!(s, StatusCode::BAD_GATEWAY, "{msg}");
        assert!(!String::from_utf8_lossy(&b).contains("inputRequests"));
    }
}

#[test]
fn input_required_results_get_no_cache_hints() {
    let out = stamp_result(
        r#"{"resultType":"input_required","requestState":"s"}"#,
        "resources/read",
        "{}",
    )
    .unwrap();
    assert!(!out.contains("ttlMs"));
}

#[test]
fn retired_and_undefined_codes_are_mapped() {
    let e = jsonrpc::RpcError {
        code: -32002,
        message: "nf".into(),
        data: None,
    };
    let (_, e) = map_error(e, StatusCode::OK, Some("test://x"));
    assert_eq!(
        (e.code, e.data.unwrap()["uri"].as_str()),
        (-32602, Some("test://x"))
    );
    let e = jsonrpc::RpcError {
        code: -32042,
        message: "x".into(),
        data: None,
    };
    assert_eq!(map_error(e, StatusCode::OK, None).1.code, -32603);
    let e = jsonrpc::RpcError {
        code: -32601,
        message: "x".into(),
        data: None,
    };
    assert_eq!(map_error(e, StatusCode::OK, None).0, StatusCode::NOT_FOUND);
}

#[test]
fn an_upstreams_final_message_is_one_object_never_an_array_of_its_fields() {
    assert!(matches!(
        read_final(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
        Final::Result(..)
    ));
    // `[result, error]`: what serde reads as the message's fields, in order.
    assert!(matches!(read_final(r#"[{"content":[]},null]"#), Final::Bad));
    assert!(matches!(
        read_final(r#"[null,{"code":1,"message":"m"}]"#),
        Final::Bad
    ));
}
