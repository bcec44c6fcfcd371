//! Issue 2 item 5: federation of many upstreams — merged lists, prefixes, dropped tools,
//! byte-identical descriptors, cache hints, routing by name, URI and ref, down upstreams.

use std::time::Duration;

use serde_json::{json, Value};

use super::prelude::*;

fn names(list: &Value, member: &str) -> Vec<String> {
    list[member]
        .as_array()
        .unwrap_or_else(|| panic!("no {member} in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
        .collect()
}

async fn tools_list(url: &str) -> (Value, String) {
    let r = Req::new("tools/list").send(url).await;
    let v = r.result(&json!(1));
    (v, r.text)
}

fn call(name: &str) -> Req {
    Req::new("tools/call").params(json!({"name": name, "arguments": {}}))
}

// ---- names ----------------------------------------------------------------------------------

#[tokio::test]
async fn with_one_upstream_names_are_not_prefixed() {
    let m = Spec::new("solo")
        .tools(vec![tool("echo"), tool("add")])
        .start()
        .await;
    let s = Gateway::e2e().upstream("solo", &m.url()).start().await;
    assert_eq!(
        names(&tools_list(&s.url()).await.0, "tools"),
        ["echo", "add"]
    );
    let p = Req::new("prompts/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(names(&p, "prompts"), ["greet"]);
    let r = call("echo").send(&s.url()).await.result(&json!(1));
    assert_eq!(r["content"][0]["text"], "solo ran echo");
}

#[tokio::test]
async fn with_several_upstreams_tool_and_prompt_names_are_prefixed_in_config_order() {
    let z = Spec::new("zeta")
        .tools(vec![tool("b"), tool("a"), tool("c")])
        .start()
        .await;
    let a = Spec::new("alpha").tools(vec![tool("echo")]).start().await;
    let s = Gateway::e2e()
        .upstream("zeta", &z.url())
        .upstream("alpha", &a.url())
        .start()
        .await;
    let (first, _) = tools_list(&s.url()).await;
    assert_eq!(
        names(&first, "tools"),
        ["zeta__b", "zeta__a", "zeta__c", "alpha__echo"]
    );
    let p = Req::new("prompts/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(names(&p, "prompts"), ["zeta__greet", "alpha__greet"]);
    // Resources keep their URIs.
    let r = Req::new("resources/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    let uris: Vec<&str> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["mock://zeta/doc", "mock://alpha/doc"]);
    // The same order every time.
    for _ in 0..3 {
        assert_eq!(
            names(&tools_list(&s.url()).await.0, "tools"),
            names(&first, "tools")
        );
    }
}

#[tokio::test]
async fn prefix_always_prefixes_a_single_upstream() {
    let m = Spec::new("one").start().await;
    let s = Gateway::e2e()
        .top("prefix", "always")
        .upstream("one", &m.url())
        .start()
        .await;
    assert_eq!(names(&tools_list(&s.url()).await.0, "tools"), ["one__echo"]);
    call("one__echo").send(&s.url()).await.result(&json!(1));
    assert_eq!(m.last("tools/call").params["name"], "echo");
}

#[tokio::test]
async fn the_separator_is_configurable() {
    let a = Spec::new("sa").start().await;
    let b = Spec::new("sb").start().await;
    let s = Gateway::e2e()
        .top("separator", "-.-")
        .upstream("sa", &a.url())
        .upstream("sb", &b.url())
        .start()
        .await;
    assert_eq!(
        names(&tools_list(&s.url()).await.0, "tools"),
        ["sa-.-echo", "sb-.-echo"]
    );
    let r = call("sb-.-echo").send(&s.url()).await.result(&json!(1));
    assert_eq!(r["content"][0]["text"], "sb ran echo");
}

#[test]
fn an_upstream_name_holding_the_separator_or_a_bad_separator_is_refused_at_load() {
    let text = "listen = \"127.0.0.1:0\"\n[[upstream]]\nname = \"my__server\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
    let e = sluice::config::Config::from_toml(text, "fed.toml", &Default::default())
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("fed.toml:3:") && e.contains("separator"),
        "{e}"
    );
    let text = "separator = \"/\"\n";
    let e = sluice::config::Config::from_toml(text, "fed.toml", &Default::default())
        .unwrap_err()
        .0;
    assert!(e.contains("[A-Za-z0-9_.-]"), "{e}");
    let text =
        "separator = \"-\"\n[[upstream]]\nname = \"my-server\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
    assert!(sluice::config::Config::from_toml(text, "fed.toml", &Default::default()).is_err());
}

#[tokio::test]
async fn with_prefixing_off_a_collision_is_reported_and_not_silently_shadowed() {
    let a = Spec::new("coll-first")
        .tools(vec![tool("shared"), tool("only-first")])
        .start()
        .await;
    let b = Spec::new("coll-second")
        .tools(vec![tool("shared"), tool("only-second")])
        .start()
        .await;
    let s = Gateway::e2e()
        .no_prefix()
        .upstream("coll-first", &a.url())
        .upstream("coll-second", &b.url())
        .start()
        .await;
    let line = wait_warning(&[
        "name collision",
        "name=\"shared\"",
        "coll-first",
        "coll-second",
    ])
    .await;
    assert!(!line.contains("only-"), "{line}");
    let (list, _) = tools_list(&s.url()).await;
    assert_eq!(
        names(&list, "tools"),
        ["shared", "only-first", "only-second"],
        "the colliding name is listed once"
    );
    // Calls go where the warning says: the first upstream in config order.
    call("shared").send(&s.url()).await.result(&json!(1));
    assert_eq!((a.count("tools/call"), b.count("tools/call")), (1, 0));
    call("only-second").send(&s.url()).await.result(&json!(1));
    assert_eq!(b.last("tools/call").params["name"], "only-second");
}

#[tokio::test]
async fn a_prefixed_name_over_128_characters_is_dropped_with_a_warning() {
    // "fx" + "__" = 4 characters of prefix.
    let fits = "k".repeat(124);
    let too_long = "L".repeat(125);
    let a = Spec::new("fx")
        .tools(vec![tool(&fits), tool(&too_long), tool("short")])
        .start()
        .await;
    let b = Spec::new("fy").start().await;
    let s = Gateway::e2e()
        .upstream("fx", &a.url())
        .upstream("fy", &b.url())
        .start()
        .await;
    let (list, _) = tools_list(&s.url()).await;
    assert_eq!(
        names(&list, "tools"),
        [
            format!("fx__{fits}"),
            "fx__short".to_owned(),
            "fy__echo".to_owned()
        ]
    );
    wait_warning(&["longer than 128", &too_long]).await;
    call(&format!("fx__{too_long}"))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn a_tool_with_an_invalid_x_mcp_header_annotation_is_dropped_with_a_warning() {
    let bad = |name: &str, prop: Value| {
        json!({"name": name, "inputSchema": {"type": "object", "properties": {"p": prop}}})
            .to_string()
    };
    let tools = vec![
        bad("xh-number", json!({"type": "number", "x-mcp-header": "P"})),
        bad("xh-space", json!({"type": "string", "x-mcp-header": "A B"})),
        bad("xh-empty", json!({"type": "string", "x-mcp-header": ""})),
        bad("xh-items", json!({"type": "array", "items": {"type": "string", "x-mcp-header": "P"}})),
        json!({"name": "xh-dup", "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}}}})
        .to_string(),
        bad("xh-good", json!({"type": "string", "x-mcp-header": "P"})),
    ];
    let m = Spec::new("xh").tools(tools).start().await;
    let s = Gateway::e2e().upstream("xh", &m.url()).start().await;
    assert_eq!(names(&tools_list(&s.url()).await.0, "tools"), ["xh-good"]);
    for t in ["xh-number", "xh-space", "xh-empty", "xh-items", "xh-dup"] {
        wait_warning(&["invalid x-mcp-header", &format!("tool={t:?}")]).await;
    }
}

#[tokio::test]
async fn descriptors_are_forwarded_byte_identical_except_the_name() {
    let weird = r#"{"name":"weird","title":"Caf\u00e9 \"q\" \/","inputSchema":{"type":"object","properties":{"z":{"type":"number","default":1.50,"x-k":[1e3,-0.0,12345678901234567890]},"a":{"type":"string"}},"required":["z"]},"annotations":{"readOnlyHint":true},"_meta":{"com.example/k":{"nested":null}},"icons":[]}"#;
    let resource = r#"{"uri":"mock://bytes/r\u0031","name":"r1","size":1.0e2,"annotations":{"priority":0.50}}"#;
    let a = Spec::new("bytes")
        .tools(vec![weird.to_owned()])
        .resources(vec![resource.to_owned()])
        .start()
        .await;
    let b = Spec::new("other").start().await;
    let s = Gateway::e2e()
        .upstream("bytes", &a.url())
        .upstream("other", &b.url())
        .start()
        .await;
    let (_, text) = tools_list(&s.url()).await;
    let expected = weird.replacen(r#""name":"weird""#, r#""name":"bytes__weird""#, 1);
    assert!(
        text.contains(&expected),
        "descriptor changed:\n{text}\nexpected to contain\n{expected}"
    );
    let r = Req::new("resources/list").send(&s.url()).await;
    assert!(
        r.text.contains(resource),
        "resource descriptor changed: {}",
        r.text
    );
    // With one unprefixed upstream the whole descriptor is the upstream's bytes.
    let s1 = Gateway::e2e().upstream("bytes", &a.url()).start().await;
    assert!(tools_list(&s1.url()).await.1.contains(weird));
}

// ---- pages and cache hints ------------------------------------------------------------------

#[tokio::test]
async fn upstream_cursors_are_followed_and_sluice_serves_one_page() {
    let m = Spec::new("pages")
        .tools((1..=5).map(|i| tool(&format!("t{i}"))).collect())
        .page(2)
        .start()
        .await;
    let s = Gateway::e2e().upstream("pages", &m.url()).start().await;
    let (list, _) = tools_list(&s.url()).await;
    assert_eq!(names(&list, "tools"), ["t1", "t2", "t3", "t4", "t5"]);
    assert!(list.get("nextCursor").is_none(), "{list}");
    assert_eq!(list["cacheScope"], "public");
    let cursors: Vec<Value> = m
        .seen("tools/list")
        .iter()
        .map(|x| x.params["cursor"].clone())
        .collect();
    assert_eq!(&cursors[..3], [Value::Null, json!("2"), json!("4")]);
}

#[tokio::test]
async fn upstream_pages_are_bounded_by_max_list_pages() {
    let m = Spec::new("bounded")
        .tools((1..=5).map(|i| tool(&format!("t{i}"))).collect())
        .page(1)
        .start()
        .await;
    let s = Gateway::e2e()
        .limit("max_list_pages", 2)
        .upstream("bounded", &m.url())
        .start()
        .await;
    assert_eq!(names(&tools_list(&s.url()).await.0, "tools"), ["t1", "t2"]);
    wait_warning(&["truncated", "bounded"]).await;
}

#[tokio::test]
async fn a_cursor_sluice_did_not_issue_is_400_invalid_params() {
    let m = Spec::new("cursor").start().await;
    let s = Gateway::e2e().upstream("cursor", &m.url()).start().await;
    Req::new("tools/list")
        .params(json!({"cursor": "abc"}))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn cache_scope_is_public_only_if_every_upstream_page_is_public() {
    let public = Spec::new("cs-pub").start().await;
    let private = Spec::new("cs-priv")
        .hints(Some((60_000, "private")))
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("cs-pub", &public.url())
        .start()
        .await;
    assert_eq!(tools_list(&s.url()).await.0["cacheScope"], "public");
    let s = Gateway::e2e()
        .upstream("cs-pub", &public.url())
        .upstream("cs-priv", &private.url())
        .start()
        .await;
    for m in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        assert_eq!(
            Req::new(m).send(&s.url()).await.result(&json!(1))["cacheScope"],
            "private",
            "{m}"
        );
    }
    // One private page among public ones makes the whole list private.
    let mixed = Spec::new("cs-mixed")
        .tools((1..=3).map(|i| tool(&format!("m{i}"))).collect())
        .on(|seen| {
            (seen.method == "tools/list" && seen.params["cursor"] == "1").then(|| ok(&seen.id, json!({"tools": [json!({"name": "m2", "inputSchema": {}})], "nextCursor": "2", "ttlMs": 60000, "cacheScope": "private"})))
        })
        .page(1)
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("cs-mixed", &mixed.url())
        .start()
        .await;
    let (list, _) = tools_list(&s.url()).await;
    assert_eq!(names(&list, "tools"), ["m1", "m2", "m3"]);
    assert_eq!(list["cacheScope"], "private");
}

#[tokio::test]
async fn ttl_is_the_smallest_upstream_ttl_reduced_by_its_age() {
    let long = Spec::new("ttl-long")
        .hints(Some((60_000, "public")))
        .start()
        .await;
    let short = Spec::new("ttl-short")
        .hints(Some((5_000, "public")))
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("ttl-long", &long.url())
        .upstream("ttl-short", &short.url())
        .start()
        .await;
    let first = tools_list(&s.url()).await.0["ttlMs"].as_u64().unwrap();
    assert!((3_000..=5_000).contains(&first), "ttlMs {first}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = tools_list(&s.url()).await.0["ttlMs"].as_u64().unwrap();
    assert!(
        second + 150 <= first,
        "ttlMs must shrink with the list's age: {first} then {second}"
    );
    assert_eq!(
        short.count("tools/list"),
        1,
        "a fresh list is served from Sluice's table"
    );
}

#[tokio::test]
async fn an_upstream_list_without_cache_hints_is_served_private_with_ttl_0() {
    let m = Spec::new("nohints").hints(None).start().await;
    let s = Gateway::e2e().upstream("nohints", &m.url()).start().await;
    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let r = Req::new(method).send(&s.url()).await.result(&json!(1));
        assert_eq!(
            (
                r["ttlMs"].as_u64(),
                r["cacheScope"].as_str(),
                r["resultType"].as_str()
            ),
            (Some(0), Some("private"), Some("complete")),
            "{method}: {r}"
        );
    }
}

#[tokio::test]
async fn a_ttl_0_upstream_does_not_cost_a_list_call_per_tool_call() {
    let a = Spec::new("zero-a").hints(Some((0, "public"))).start().await;
    let b = Spec::new("zero-b").hints(Some((0, "public"))).start().await;
    let s = Gateway::e2e()
        .upstream("zero-a", &a.url())
        .upstream("zero-b", &b.url())
        .start()
        .await;
    let before = a.count("tools/list");
    for _ in 0..5 {
        call("zero-a__echo").send(&s.url()).await.result(&json!(1));
    }
    assert_eq!(
        a.count("tools/list"),
        before,
        "routing uses Sluice's last fetched table"
    );
    assert_eq!(a.count("tools/call"), 5);
    // Prefixing off, one upstream: the same.
    let s1 = Gateway::e2e().upstream("zero-a", &a.url()).start().await;
    let before = a.count("tools/list");
    for _ in 0..5 {
        call("echo").send(&s1.url()).await.result(&json!(1));
    }
    assert_eq!(a.count("tools/list"), before);
}

// ---- routing --------------------------------------------------------------------------------

#[tokio::test]
async fn tools_call_is_routed_by_prefix_and_renamed_for_the_upstream() {
    let a = Spec::new("ra").start().await;
    let b = Spec::new("rb")
        .tools(vec![tool("echo"), tool("météo")])
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("ra", &a.url())
        .upstream("rb", &b.url())
        .start()
        .await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"rb__echo","arguments":{{"x":1.50}},"_meta":{}}}}}"#,
        meta()
    );
    let r = call("rb__echo")
        .raw_body(body)
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["content"][0]["text"], "rb ran echo");
    assert_eq!(a.count("tools/call"), 0);
    let seen = b.last("tools/call");
    assert_eq!(seen.params["name"], "echo");
    assert_eq!(seen.header("mcp-name"), Some("echo"));
    assert!(
        seen.body.contains(r#""arguments":{"x":1.50}"#),
        "other members keep their bytes: {}",
        seen.body
    );
    // A name that needs Base64 is re-encoded for the upstream's own name.
    call("rb__météo").send(&s.url()).await.result(&json!(1));
    let seen = b.last("tools/call");
    assert_eq!(seen.params["name"], "météo");
    assert_eq!(
        seen.header("mcp-name"),
        Some(&*sluice::mcp::headers::encode("météo"))
    );
}

#[tokio::test]
async fn prompts_get_is_routed_by_prefix_and_renamed_for_the_upstream() {
    let a = Spec::new("pa").start().await;
    let b = Spec::new("pb").start().await;
    let s = Gateway::e2e()
        .upstream("pa", &a.url())
        .upstream("pb", &b.url())
        .start()
        .await;
    let r = Req::new("prompts/get")
        .params(json!({"name": "pa__greet", "arguments": {"who": "x"}}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["messages"][0]["content"]["text"], "pa prompt \"greet\"");
    assert_eq!(a.last("prompts/get").header("mcp-name"), Some("greet"));
    assert_eq!(b.count("prompts/get"), 0);
    Req::new("prompts/get")
        .params(json!({"name": "pb__nope"}))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn resources_read_is_routed_by_uri_from_lists_and_templates() {
    let a = Spec::new("ua").start().await;
    let b = Spec::new("ub").start().await;
    let s = Gateway::e2e()
        .upstream("ua", &a.url())
        .upstream("ub", &b.url())
        .start()
        .await;
    let read = |uri: &str| Req::new("resources/read").params(json!({"uri": uri}));
    let r = read("mock://ub/doc").send(&s.url()).await.result(&json!(1));
    assert_eq!(r["contents"][0]["text"], "ub read mock://ub/doc");
    let r = read("mock://ua/items/42")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["contents"][0]["text"], "ua read mock://ua/items/42");
    assert_eq!(
        b.last("resources/read").header("mcp-name"),
        Some("mock://ub/doc")
    );
    assert_eq!(
        (a.count("resources/read"), b.count("resources/read")),
        (1, 1)
    );
    // The cache hints of a read result are kept.
    assert_eq!(
        (r["ttlMs"].as_u64(), r["cacheScope"].as_str()),
        (Some(1000), Some("public"))
    );
}

#[tokio::test]
async fn a_uri_that_matches_nothing_is_400_invalid_params_with_data_uri() {
    let a = Spec::new("na").start().await;
    let b = Spec::new("nb").start().await;
    let s = Gateway::e2e()
        .upstream("na", &a.url())
        .upstream("nb", &b.url())
        .start()
        .await;
    for uri in ["mock://nc/doc", "mock://na/items/1/2", "mock://na/items/"] {
        let e = Req::new("resources/read")
            .id(json!(uri))
            .params(json!({"uri": uri}))
            .send(&s.url())
            .await
            .error(400, -32602, &json!(uri));
        assert_eq!(e["data"], json!({"uri": uri}));
    }
    assert_eq!(a.count("resources/read") + b.count("resources/read"), 0);
}

#[tokio::test]
async fn completion_complete_is_routed_by_its_ref() {
    let caps = json!({"prompts": {}, "resources": {}, "completions": {}});
    let a = Spec::new("ca").caps(caps.clone()).start().await;
    let b = Spec::new("cb").caps(caps).start().await;
    let s = Gateway::e2e()
        .upstream("ca", &a.url())
        .upstream("cb", &b.url())
        .start()
        .await;
    let complete = |r: Value| {
        Req::new("completion/complete")
            .params(json!({"ref": r, "argument": {"name": "who", "value": "A"}}))
    };
    let r = complete(json!({"type": "ref/prompt", "name": "cb__greet"}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["completion"]["values"][0], "cb completes");
    assert_eq!(
        b.last("completion/complete").params["ref"],
        json!({"type": "ref/prompt", "name": "greet"})
    );
    let r = complete(json!({"type": "ref/resource", "uri": "mock://ca/items/{id}"}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["completion"]["values"][0], "ca completes");
    assert_eq!(
        a.last("completion/complete").params["ref"]["uri"],
        "mock://ca/items/{id}"
    );
    complete(json!({"type": "ref/prompt", "name": "ca__nope"}))
        .send(&s.url())
        .await
        .error(400, -32602, &json!(1));
}

#[tokio::test]
async fn an_unknown_tool_with_several_upstreams_is_invalid_params_revealing_nothing_else() {
    let a = Spec::new("hid-a")
        .tools(vec![tool("public_tool")])
        .start()
        .await;
    let b = Spec::new("hid-b")
        .tools(vec![tool("secret_tool")])
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("hid-a", &a.url())
        .upstream("hid-b", &b.url())
        .start()
        .await;
    for name in [
        "hid-a__secret_tool",
        "secret_tool",
        "nobody__public_tool",
        "hid-a__",
        "__x",
    ] {
        let e = call(name)
            .id(json!(name))
            .send(&s.url())
            .await
            .error(400, -32602, &json!(name));
        let text = e.to_string();
        for other in ["hid-a", "hid-b", "public_tool", "secret_tool"]
            .into_iter()
            .filter(|o| !name.contains(o))
        {
            assert!(
                !text.contains(other),
                "{name}: the error reveals {other}: {text}"
            );
        }
        assert!(e.get("data").is_none(), "{text}");
    }
    assert_eq!(a.count("tools/call") + b.count("tools/call"), 0);
}

#[tokio::test]
async fn a_single_unprefixed_upstream_gets_an_unlisted_name_after_one_refresh() {
    let m = Spec::new("unlisted").start().await;
    let s = Gateway::e2e().upstream("unlisted", &m.url()).start().await;
    let before = m.count("tools/list");
    let r = call("hidden").send(&s.url()).await.result(&json!(1));
    assert_eq!(r["content"][0]["text"], "unlisted ran hidden");
    assert_eq!(
        m.count("tools/list"),
        before + 1,
        "exactly one refresh before forwarding"
    );
    assert_eq!(m.last("tools/call").header("mcp-name"), Some("hidden"));
}

#[tokio::test]
async fn a_tool_added_upstream_is_found_after_one_refresh_on_a_miss() {
    let a = Spec::new("miss-a").start().await;
    let b = Spec::new("miss-b").start().await;
    let s = Gateway::e2e()
        .upstream("miss-a", &a.url())
        .upstream("miss-b", &b.url())
        .start()
        .await;
    a.set_tools(vec![tool("echo"), tool("fresh")]);
    let before = a.count("tools/list");
    call("miss-a__fresh").send(&s.url()).await.result(&json!(1));
    assert_eq!(a.count("tools/list"), before + 1);
    assert_eq!(a.last("tools/call").params["name"], "fresh");
}

// ---- down upstreams -------------------------------------------------------------------------

#[tokio::test]
async fn lists_are_served_from_healthy_upstreams_when_one_is_down_with_a_warning() {
    let up = Spec::new("fed-up").start().await;
    let s = Gateway::e2e()
        .upstream("fed-up", &up.url())
        .upstream("fed-down", &dead_url())
        .start()
        .await;
    wait_warning(&["upstream is down", "fed-down"]).await;
    assert_eq!(
        names(&tools_list(&s.url()).await.0, "tools"),
        ["fed-up__echo"]
    );
    let p = Req::new("prompts/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(names(&p, "prompts"), ["fed-up__greet"]);
    call("fed-up__echo").send(&s.url()).await.result(&json!(1));
}

#[tokio::test]
async fn a_call_to_a_down_upstream_fails_with_an_error_naming_it() {
    let up = Spec::new("named-up").start().await;
    let s = Gateway::e2e()
        .upstream("named-up", &up.url())
        .upstream("named-down", &dead_url())
        .start()
        .await;
    let r = call("named-down__echo").id(json!("c")).send(&s.url()).await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.header("retry-after"), Some("1"));
    let v = r.json();
    assert_eq!(v["id"], "c");
    assert_eq!(v["error"]["code"], -31030);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'named-down'"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn an_upstream_that_goes_down_after_its_probe_is_named_and_left_out_of_lists() {
    let stays = Spec::new("late-stays").start().await;
    let goes = Spec::new("late-goes").start().await;
    let s = Gateway::e2e()
        .upstream("late-stays", &stays.url())
        .upstream("late-goes", &goes.url())
        .start()
        .await;
    assert_eq!(
        names(&tools_list(&s.url()).await.0, "tools"),
        ["late-stays__echo", "late-goes__echo"]
    );
    goes.stop();
    drop(goes);
    let r = call("late-goes__echo").send(&s.url()).await;
    assert!(r.status >= 500, "{} {}", r.status, r.text);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'late-goes'"),
        "{}",
        r.text
    );
    assert_eq!(
        names(&tools_list(&s.url()).await.0, "tools"),
        ["late-stays__echo"]
    );
    call("late-stays__echo")
        .send(&s.url())
        .await
        .result(&json!(1));
}
