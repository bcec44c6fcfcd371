//! Issue 2 item 4: `server/discover` answered by Sluice from its upstreams, with capabilities
//! that match what Sluice really serves.

use serde_json::json;

use super::prelude::*;

#[tokio::test]
async fn discover_lists_modern_versions_cache_hints_and_sluice_server_info() {
    let (_demo, s) = one_demo("d-basic").await;
    let r = Req::new("server/discover")
        .id(json!("d"))
        .send(&s.url())
        .await
        .result(&json!("d"));
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!([V]), "modern versions only");
    assert!(r["ttlMs"].as_u64().is_some(), "ttlMs: {r}");
    assert!(
        matches!(r["cacheScope"].as_str(), Some("public" | "private")),
        "cacheScope: {r}"
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "sluice"
    );
    assert!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["version"].is_string());
    assert!(
        r["instructions"]
            .as_str()
            .is_some_and(|i| i.starts_with("The d-basic demo server: echo, add")),
        "instructions: {r}"
    );
}

#[tokio::test]
async fn discover_advertises_only_families_a_healthy_upstream_serves() {
    let tools_only = Spec::new("d-tools")
        .caps(json!({"tools": {}, "experimental": {"x": {}}, "extensions": {"com.example/y": {}}}))
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("d-tools", &tools_only.url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    let caps = r["capabilities"].as_object().unwrap();
    let keys: Vec<&str> = caps.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["tools"], "only tools is served: {r}");
    // listChanged is advertised because Sluice's listen streams serve it.
    assert_eq!(caps["tools"]["listChanged"], true);
}

#[tokio::test]
async fn a_family_nobody_serves_answers_404_method_not_found_not_an_empty_list() {
    let tools_only = Spec::new("d-none").caps(json!({"tools": {}})).start().await;
    let s = Gateway::e2e()
        .upstream("d-none", &tools_only.url())
        .start()
        .await;
    for (m, params) in [
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "greet"})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "mock://d-none/doc"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "a"}}),
        ),
    ] {
        let id = json!(m);
        Req::new(m)
            .id(id.clone())
            .params(params)
            .send(&s.url())
            .await
            .error(404, -32601, &id);
    }
    Req::new("tools/list")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(
        tools_only.count("prompts/list"),
        0,
        "Sluice never asks an upstream for a family it does not advertise"
    );
}

#[tokio::test]
async fn discover_merges_families_and_resource_subscribe_across_upstreams() {
    let a = Spec::new("d-a")
        .caps(json!({"tools": {}, "completions": {}}))
        .start()
        .await;
    let b =
        Spec::new("d-b").caps(json!({"prompts": {"listChanged": false}, "resources": {"subscribe": true}, "logging": {}})).start().await;
    let s = Gateway::e2e()
        .upstream("d-a", &a.url())
        .upstream("d-b", &b.url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    let caps = &r["capabilities"];
    assert_eq!(caps["tools"]["listChanged"], true);
    assert_eq!(caps["prompts"]["listChanged"], true);
    assert_eq!(
        caps["resources"],
        json!({"listChanged": true, "subscribe": true})
    );
    assert_eq!(caps["completions"], json!({}));
    assert_eq!(caps["logging"], json!({}));
}

#[tokio::test]
async fn discover_resources_subscribe_is_absent_when_no_upstream_offers_it() {
    let a = Spec::new("d-nosub")
        .caps(json!({"resources": {}}))
        .start()
        .await;
    let s = Gateway::e2e().upstream("d-nosub", &a.url()).start().await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["capabilities"]["resources"], json!({"listChanged": true}));
}

#[tokio::test]
async fn discover_ttl_is_the_smallest_and_scope_public_only_if_every_upstream_is() {
    let a = Spec::new("d-ttl-a")
        .discover_hints(60_000, "public")
        .start()
        .await;
    let b = Spec::new("d-ttl-b")
        .discover_hints(5_000, "public")
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("d-ttl-a", &a.url())
        .upstream("d-ttl-b", &b.url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(
        (r["ttlMs"].as_u64(), r["cacheScope"].as_str()),
        (Some(5_000), Some("public"))
    );
    let c = Spec::new("d-ttl-c")
        .discover_hints(60_000, "private")
        .start()
        .await;
    let s2 = Gateway::e2e()
        .upstream("d-ttl-a", &a.url())
        .upstream("d-ttl-c", &c.url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s2.url())
        .await
        .result(&json!(1));
    assert_eq!(r["cacheScope"], "private");
}

#[tokio::test]
async fn discover_instructions_name_their_upstream_when_there_are_several() {
    let a = Spec::new("d-ia")
        .instructions("Use alpha for weather.")
        .start()
        .await;
    let b = Spec::new("d-ib").start().await;
    let c = Spec::new("d-ic")
        .instructions("Use gamma for maps.")
        .start()
        .await;
    let s = Gateway::e2e()
        .upstream("d-ia", &a.url())
        .upstream("d-ib", &b.url())
        .upstream("d-ic", &c.url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(
        r["instructions"],
        "[d-ia] Use alpha for weather.\n\n[d-ic] Use gamma for maps."
    );
}

#[tokio::test]
async fn discover_leaves_out_families_of_an_upstream_that_is_down() {
    let up = Spec::new("d-up").caps(json!({"tools": {}})).start().await;
    let s = Gateway::e2e()
        .upstream("d-up", &up.url())
        .upstream("d-down", &dead_url())
        .start()
        .await;
    let r = Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
    let keys: Vec<String> = r["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, vec!["tools".to_owned()]);
    assert_eq!(r["supportedVersions"], json!([V]));
    // Never discovered, the down upstream could serve prompts once back: 503 naming it, not 404.
    let e = Req::new("prompts/list")
        .send(&s.url())
        .await
        .error(503, -31030, &json!(1));
    assert_eq!(e["data"]["down"][0]["upstream"], "d-down", "{e}");
}
